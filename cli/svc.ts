import { parseArgs } from 'node:util';
import { linkBaseUrl, readConfig, verificationTiming } from '../server/config';
import { ConfigurationError } from '../server/production-gaps';
import { createDomain, createKey, createOrganization } from '../core/provisioning';
import { identityDeps } from '../core/domains/identity';
import { setPlan, setWarmupStage } from '../core/limits/operator';
import { organizationLimit, stageLimit } from '../core/limits/caps';
import type { Permission, KeyMode, Plan, Stream, Transport } from '../db/entities';
import { setTransport } from '../core/delivery/transport';
import { UsageError, oneOf, operatorUsage, required, withDb } from './shared';
import { start, temporalDev, worker } from './run';
import { closeUnconfirmedCommand, unconfirmedCommand } from './email';
import { operatorCreateCommand } from './operator';
import { temporalCluster } from './temporal-cluster';

// The operator command (bin/svc.js, npm start): reads the arguments and runs the command they name;
// the long-running ones are in cli/run.ts, the email ones in cli/email.ts, the console's operators in cli/operator.ts.

const USAGE = `usage:
  svc start                                   run the API, the embedded engine and (without SMTP_URL) the dev inbox
  svc worker                                  run Temporal workers (ENGINE=temporal; see docs/temporal.md)
  svc temporal dev [--port 7233]              run Temporal's dev server (installed by npm run tools) with its Web UI,
                                              on 127.0.0.1, its state in DATA_DIR/temporal.sqlite; npm run temporal
  svc temporal cluster [--port 7233]          run a Temporal cluster as in production (npm run tools builds it): PostgreSQL,
                                              frontend, history, matching and worker processes, the UI on port + 1000;
                                              state in DATA_DIR/temporal-cluster; npm run temporal:cluster; docs/temporal.md
  svc migrate                                 apply the committed database migrations
  svc email close-unconfirmed EMAIL_ID        close a sent message whose delivery event will never come
  svc email unconfirmed --older-than DURATION [--close] [--org ORG_ID]
                                              count (or, with --close, close as unconfirmed) live messages at
                                              sent for longer than DURATION (90m, 36h, 3d, P3D); docs/operations.md
  svc org create --name NAME [--plan free|standard]
  svc org plan ORG_ID free|standard           move an organization to a plan (its daily send cap follows; audit-logged)
  svc domain warmup DOMAIN --stage N|--off    set a domain's warm-up stage (1-7: 200 to 20,000 a day) or turn it
                                              off for a domain with an established reputation (audit-logged)
  svc transport set --org ORG_ID [--domain DOMAIN_ID] relay|direct|inherit
                                              how live mail leaves: SMTP_URL's relay, or straight to recipients' MX;
                                              a domain's own setting overrides its organization's (inherit clears it;
                                              audit-logged); docs/delivery.md
  svc domain create --org ORG_ID --name DOMAIN [--stream transactional|bulk] [--verified]
  svc key create --org ORG_ID --name NAME --permission send|full|admin --mode live|test [--domain DOMAIN_ID]... [--rate N]
  svc operator create --email EMAIL [--org ORG_ID]
                                              a console operator (platform; with --org, that organization's admin):
                                              prints a one-time set-password link, valid 24 h; docs/operations.md
Reads DATABASE_URL / DATA_DIR like npm start. Prints JSON on stdout.`;

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
      email: { type: 'string' },
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
  if (positionals[0] === 'transport' && positionals[1] === 'set') {
    const usage = 'usage: svc transport set --org ORG_ID [--domain DOMAIN_ID] relay|direct|inherit';
    if (positionals.length !== 3 || (values.domain?.length ?? 0) > 1) throw new UsageError(usage);
    const org = required('org', values.org);
    const transport = oneOf<Transport | 'inherit'>('transport', positionals[2], ['relay', 'direct', 'inherit']);
    return withDb(async (db) => {
      const t = await setTransport(db.orm, { organizationId: org, domainId: values.domain?.[0] ?? null, transport }).catch(operatorUsage);
      process.stdout.write(JSON.stringify(t) + '\n');
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
    case 'temporal cluster':
      return temporalCluster(values.port);
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
        // The domain gets a DKIM key, its return-path host and the records to publish, like a domain
        // made by POST /domains; the running service checks its DNS for DOMAIN_VERIFY_WINDOW_HOURS.
        // --verified skips only that wait (the operator checked DNS): its mail is signed all the same.
        const identity = identityDeps({ ...config, publicUrl: linkBaseUrl(config, config.port) });
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
          records: d.records.map(({ purpose, type, name: n, value }) => ({ purpose, type, name: n, value })),
        });
      });
    }
    case 'operator create':
      return operatorCreateCommand({ email: values.email, org: values.org }, out);
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
  if (err instanceof ConfigurationError) {
    process.stderr.write(`svc: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(JSON.stringify({ error: (err as Error).message }) + '\n');
  process.exit(1);
});
