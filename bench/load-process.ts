import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * Runs a load generator of bench/ in its own process (it must not share the server's event loop) and
 * reads the JSON it prints last. A generator that prints a line `started` first (bench/load.ts,
 * bench/smtp-load.ts) has `onStart` called then: its start-up is left out of CPU measurements.
 */
export function loadProcess<T>(script: string, args: object, onStart?: () => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, script), JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      if (out.startsWith('started\n')) {
        out = out.slice('started\n'.length);
        onStart?.();
      }
    });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`${script} exited ${code}`))));
  });
}
