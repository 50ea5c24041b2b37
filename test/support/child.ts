import { spawn, type ChildProcess } from 'node:child_process';
import { freePorts } from '../../tools/dev-server';
import path from 'node:path';
import { waitFor } from './wait';
import { newDatabase, tempDir } from './pg';

const ROOT = path.resolve(__dirname, '../..');

export async function freePort(): Promise<number> {
  return (await freePorts(1))[0];
}

export interface Child {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Runs `svc ARGS` as an operator would, in its own process: `bin/svc.js` (tsx loaded in-process), or
 * with `via: 'tsx'` as `npm start` runs it, under the tsx CLI (a parent process relaying signals to
 * the node process running cli/svc.ts).
 */
/** The secrets key of the processes tests start (32 bytes, base64). */
export const TEST_SECRETS_KEY = Buffer.alloc(32, 7).toString('base64');

export function runSvc(args: string[], env: Record<string, string>, opts: { via?: 'bin' | 'tsx' } = {}): Child {
  const entry = opts.via === 'tsx' ? [require.resolve('tsx/cli'), 'cli/svc.ts'] : [path.join(ROOT, 'bin/svc.js')];
  const proc = spawn(process.execPath, [...entry, ...args], {
    cwd: ROOT,
    // A free relay port unless the test names one: several services run side by side.
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      LOG_LEVEL: 'warn',
      // One key for every process of a test: a domain's DKIM key encrypted by `svc domain create`
      // must decrypt in the services that send its mail.
      SECRETS_KEY: TEST_SECRETS_KEY,
      SMTP_RELAY_PORT: '0',
      INBOUND_SMTP_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

/** Until `svc worker` polls its task queues (it logs 'temporal worker running', at LOG_LEVEL info). */
export async function waitWorkerPolling(w: Child, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => {
      if (w.proc.exitCode !== null) throw new Error(`svc worker exited ${w.proc.exitCode}: ${w.output()}`);
      return w.output().includes('temporal worker running');
    },
    'svc worker to poll',
    timeoutMs,
  );
}

export async function svcJson(args: string[], env: Record<string, string>): Promise<any> {
  const child = runSvc(args, env);
  const code = await child.exited;
  if (code !== 0) throw new Error(`svc ${args.join(' ')} exited ${code}: ${child.output()}`);
  return JSON.parse(child.output().trim().split('\n').pop()!);
}

export async function waitHealthy(baseUrl: string, child: Child, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => {
      if (child.proc.exitCode !== null) throw new Error(`service exited early: ${child.output()}`);
      try {
        return (await fetch(`${baseUrl}/health`)).status === 200;
      } catch {
        return false;
      }
    },
    'service health',
    timeoutMs,
    200,
  );
}

/**
 * What a crash test's `svc start` runs with: a fresh database and data directory of its own, a free
 * port, its mail to the SMTP sink at `smtpPort`, and retries 1 s apart. The same env starts it
 * again after a kill.
 */
export async function crashTestSvc(name: string, smtpPort: number): Promise<{ env: Record<string, string>; base: string }> {
  const port = await freePort();
  return {
    env: {
      DATABASE_URL: await newDatabase(`svc_${name}`),
      SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
      PORT: String(port),
      DATA_DIR: tempDir(`svc-${name.replaceAll('_', '-')}`),
      RETRY_BASE_SECONDS: '1',
    },
    base: `http://127.0.0.1:${port}`,
  };
}
