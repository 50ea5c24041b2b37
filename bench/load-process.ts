import { spawn } from 'node:child_process';
import path from 'node:path';

/** Runs a load generator of bench/ in its own process (it must not share the server's event loop) and reads the JSON it prints. */
export function loadProcess<T>(script: string, args: object): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, script), JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`${script} exited ${code}`))));
  });
}
