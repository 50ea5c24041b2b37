import { Worker } from 'node:worker_threads';

/**
 * Starts a thread running one module of this code base, `modulePath` absolute and without its
 * extension. Run from source (tsx), a thread has no TypeScript loader of its own: it registers
 * tsx's first, then requires the `.ts` file; compiled, it runs the `.js` file directly.
 */
export function startModuleThread(modulePath: string, workerData: unknown): Worker {
  if (__filename.endsWith('.ts')) {
    const code = `require(${JSON.stringify(require.resolve('tsx/cjs'))}); require(${JSON.stringify(`${modulePath}.ts`)});`;
    return new Worker(code, { eval: true, workerData });
  }
  return new Worker(`${modulePath}.js`, { workerData });
}
