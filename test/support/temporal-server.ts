import { temporalToolPath } from '../../tools/temporal-tools';
import { DevServer } from '../../tools/dev-server';
import { skipBecause } from './skips';

export { DevServer };

let shared: Promise<DevServer> | undefined;

/**
 * The address of a Temporal server for the live suites: TEMPORAL_ADDRESS when given (a server of
 * your own), else the project's dev server, started once. Skips the suite, with the reason, when
 * neither is there (no Go on this machine: `npm run tools` says so).
 */
export async function liveTemporal(ctx: Mocha.Context): Promise<{ address: string; server?: DevServer }> {
  if (process.env.TEMPORAL_ADDRESS) return { address: process.env.TEMPORAL_ADDRESS };
  if (!temporalToolPath('temporal')) {
    skipBecause(ctx, 'no Temporal CLI in .tools/bin (run `npm run tools`; it needs Go) and no TEMPORAL_ADDRESS');
  }
  ctx.timeout(Math.max(ctx.timeout(), 90_000));
  shared ??= DevServer.start();
  const server = await shared;
  return { address: server.address, server };
}

/** Root hook: the shared dev server stops after every file ran. */
export async function stopSharedDevServer(): Promise<void> {
  if (!shared) return;
  const s = shared;
  shared = undefined;
  await (await s.catch(() => undefined))?.stop();
}
