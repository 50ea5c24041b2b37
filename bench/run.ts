/**
 * npm run bench: accepted messages per second and latency for POST /emails and POST /emails/batch,
 * each beside a baseline measured in the same run (bare Koa + one PostgreSQL insert). Writes
 * BENCHMARKS.md. Loopback only; every phase is bounded in time.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { ensureEmbeddedPostgres } from '../db/embedded-postgres';
import { readConfig, type Config } from '../server/config';
import { startService } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { startBaseline } from './baseline';
import { compileTemplate, renderTemplate } from '../core/templates/render';
import { parseVariables } from '../core/templates/variables';
import { benchAudienceReads, UPSERT_BODY, AUDIENCE_CONTACTS, type AudienceResult } from './audience';
import { benchWebhooks, type WebhookBenchResult } from './webhooks';
import { BenchClock, benchPark, benchPickup, type ParkResult, type PickupResult } from './caps';
import { loadProcess } from './load-process';
import { benchDrain, smtpCeiling, type DrainResult } from './drain';
import { countingSink, type CountingSink } from './sink';
import { benchSoak, BOUND_RATIO, type SoakResult } from './soak';
import { benchBroadcast, type BroadcastResult } from './broadcast';
import {
  automationsOrg,
  benchDelayZero,
  benchSleepingRuns,
  createAutomation,
  EVENT_BODY,
  runCounts,
  type DelayZeroResult,
  type SleepingResult,
} from './automations';
import { benchTemporal, temporalSection, TEMPORAL_GOALS, type TemporalBenchResult } from './temporal';
import type { Clock } from '../core/clock';
import { Client } from 'pg';

const SECONDS = Number(process.env.BENCH_SECONDS || 15);
const SINGLE_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 32);
const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY || 4);
const POOL = 10;
/** Rounds of the interleaved comparison of plain and templated sends. */
const INTERLEAVED_ROUNDS = 4;
/** Each round's phase: the rounds together last as long as one ordinary phase. */
const ROUND_SECONDS = SECONDS / INTERLEAVED_ROUNDS;
/**
 * For iterating on one path: BENCH_ONLY=live-single, test-single, live-batch, test-batch, template
 * (live single sends plain and with templates), audience, webhooks, relay, caps, drain, soak, broadcast, automations or temporal (bench/temporal.ts) measures the baseline and that phase only
 * (BENCHMARKS.md is not written).
 */
const ONLY = process.env.BENCH_ONLY;
/** Deliveries in the webhook burst, and the steady event rate (per second) of the latency phase. */
const WEBHOOK_DELIVERIES = Number(process.env.BENCH_WEBHOOK_DELIVERIES || 10_000);
const WEBHOOK_RATE = Number(process.env.BENCH_WEBHOOK_RATE || 100);
/** Messages parked behind a spent cap and released at a simulated day turn. */
const PARKED = Number(process.env.BENCH_PARKED || 100_000);
/** The bulk backlog transactional pickup is measured behind, and how many transactional sends are timed. */
const BULK_BACKLOG = Number(process.env.BENCH_BULK_BACKLOG || 10_000);
const PICKUP_SENDS = Number(process.env.BENCH_PICKUP_SENDS || 60);
/** The backlog of the drain phase (live, then test mode). */
const DRAIN_MESSAGES = Number(process.env.BENCH_DRAIN_MESSAGES || 5_000);
/** The soak: live messages a second through POST /emails/batch, for this many minutes (bench/soak.ts). */
const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES || 30);
const SOAK_RATE = Number(process.env.BENCH_SOAK_RATE || 100);
/**
 * The soak's service keeps finished workflows a tenth of the soak (3 minutes of 30), so the engine's
 * tables reach their bound early and the second half shows whether they stay there.
 */
const SOAK_RETENTION_MINUTES = SOAK_MINUTES / 10;
/** The audience of the broadcast phase (contacts seeded in SQL, all subscribed). */
const BROADCAST_CONTACTS = Number(process.env.BENCH_BROADCAST_CONTACTS || 100_000);
/** Runs put to sleep in a one-day delay for the memory measurement, after a warm-up of SLEEPING_WARMUP. */
const SLEEPING_RUNS = Number(process.env.BENCH_SLEEPING_RUNS || 10_000);
const SLEEPING_WARMUP = 200;
/** The bound of the sleeping runs' measurement, from the first event: memory is sampled then if not every run is in its delay yet. */
const SLEEPING_SECONDS = Number(process.env.BENCH_SLEEPING_SECONDS || 240);
/** Events of the delay-0 automation, one every DELAY_ZERO_INTERVAL_MS. */
const DELAY_ZERO_EVENTS = Number(process.env.BENCH_DELAY_ZERO_EVENTS || 200);
const DELAY_ZERO_INTERVAL_MS = Number(process.env.BENCH_DELAY_ZERO_INTERVAL_MS || 50);

/** The automations phase (issue 17): bench/automations.ts. */
interface AutomationsBenchResult {
  /** POST /events under load (after a discarded warm-up of the same length). */
  events: Result;
  /**
   * The baseline measured again just before the events load: the phase runs last, tens of minutes
   * after the run's first baseline, on a PostgreSQL that has taken every phase since.
   */
  nearBaseline: Result;
  /** The same load for an automation whose first step runs on the engine (an update, then the delay). */
  eventsEngine: Result;
  /** Runs created during the measured load, all of the automation's runs at its end, and of those not started yet. */
  eventRuns: number;
  runsTotal: number;
  unstarted: number;
  sleeping: SleepingResult;
  delayZero: DelayZeroResult;
}

interface Result {
  requests: number;
  errors: number;
  firstError: string;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
}

function load(url: string, tokens: string[], body: unknown, concurrency: number, seconds = SECONDS): Promise<Result> {
  return loadProcess<Result>('load.ts', { url, tokens, body: JSON.stringify(body), concurrency, seconds });
}

/** The relay's load: `connections` SMTP connections, one key each (bench/smtp-load.ts). */
function smtpLoad(port: number, tokens: string[], message: unknown, connections: number, seconds = SECONDS): Promise<Result> {
  return loadProcess<Result>('smtp-load.ts', { port, tokens, message, connections, seconds });
}

/** What the template phases send: a typical transactional template, with its own text part and without one (text made from the html). */
const TEMPLATE_HTML =
  '<h1>Welcome, {{user.first_name}}!</h1><p>Your order <b>{{order.id}}</b> of {{order.total}} is confirmed.</p>' +
  '{{#if vip}}<p>As a VIP you get free shipping.</p>{{else}}<p>Shipping: standard.</p>{{/if}}' +
  '<p><a href="https://shop.example/orders/{{order.id}}">See your order</a></p>';
const TEMPLATE_VARIABLES = [
  { key: 'user.first_name', type: 'string', fallback: 'there' },
  { key: 'order.id', type: 'string' },
  { key: 'order.total', type: 'number' },
  { key: 'vip', type: 'boolean', fallback: false },
];
const TEMPLATES = [
  {
    label: 'html and text parts',
    name: 'Bench order',
    slug: 'bench-order',
    subject: 'Order {{order.id}} confirmed, {{user.first_name}}',
    html: TEMPLATE_HTML,
    text: 'Welcome, {{user.first_name}}! Order {{order.id}} of {{order.total}} is confirmed. https://shop.example/orders/{{order.id}}',
    variables: TEMPLATE_VARIABLES,
  },
  {
    label: 'html only, text made from it',
    name: 'Bench order html',
    slug: 'bench-order-html',
    subject: 'Order {{order.id}} confirmed, {{user.first_name}}',
    html: TEMPLATE_HTML,
    variables: TEMPLATE_VARIABLES,
  },
];
/** `__SEQ__` becomes a unique number per request (bench/load.ts). */
const TEMPLATE_DATA = { 'user.first_name': 'Ann', order: { id: 'A-__SEQ__', total: 42.5 }, vip: true };
/** What the first template renders to with TEMPLATE_DATA, rendered by the service's own code and sent plain: the cost of the content alone. */
const RENDERED = {
  from: 'Bench <bench@bench.test>',
  to: 'someone@example.com',
  ...renderTemplate(
    compileTemplate({
      subject: TEMPLATES[0].subject,
      html: TEMPLATES[0].html,
      text: TEMPLATES[0].text ?? null,
      variables: parseVariables(TEMPLATE_VARIABLES),
    }),
    TEMPLATE_DATA,
    'refuse',
  ),
};

async function newDb(adminUrl: string, name: string): Promise<string> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  await c.query(`drop database if exists ${name}`);
  await c.query(`create database ${name}`);
  await c.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function dropDb(adminUrl: string, name: string): Promise<void> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  await c.query(`drop database if exists ${name} with (force)`);
  await c.end();
}

async function main() {
  const log = pino({ level: 'info' }, pino.destination(2));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const pg = process.env.DATABASE_URL ? null : await ensureEmbeddedPostgres(dataDir, log);
  const adminUrl = process.env.DATABASE_URL ?? pg!.url;
  const message = {
    from: 'Bench <bench@bench.test>',
    to: 'someone@example.com',
    subject: 'Benchmark',
    text: 'hello',
    html: '<p>hello</p>',
  };

  log.info({ seconds: SECONDS, concurrency: SINGLE_CONCURRENCY }, 'phase 1/3: baseline (bare Koa route, one insert)');
  const baseline = await startBaseline(await newDb(adminUrl, 'bench_baseline'), POOL);
  await load(baseline.url, ['none'], message, SINGLE_CONCURRENCY).catch(() => undefined); // warm-up run discarded
  const base = await load(baseline.url, ['none'], message, SINGLE_CONCURRENCY);
  await baseline.stop();

  // The outbound relay: a real SMTP server on loopback that accepts (and only counts) every message.
  const relay = await countingSink();
  const relayPort = relay.port;

  /**
   * The service on a fresh database of its own, sending to the relay. Stopping it drops that
   * database: a phase leaves a backlog of hundreds of thousands of rows, and autovacuum working
   * through them would take CPU from the phases after it.
   */
  const startBenchService = async (
    database: string,
    opts: { clock?: Clock; smtpPort?: number; sendRatePerSecond?: number; engineRetentionHours?: number; config?: Partial<Config> } = {},
  ) => {
    const service = await startService(
      {
        ...readConfig({}),
        databaseUrl: await newDb(adminUrl, database),
        port: 0,
        devSmtpPort: 0,
        dataDir,
        logLevel: 'warn',
        dbPoolSize: POOL,
        smtpUrl: `smtp://127.0.0.1:${opts.smtpPort ?? relayPort}`,
        ...(opts.sendRatePerSecond ? { sendRatePerSecond: opts.sendRatePerSecond } : {}),
        ...(opts.engineRetentionHours !== undefined ? { engineRetentionHours: opts.engineRetentionHours } : {}),
        smtpRelay: { ...readConfig({}).smtpRelay!, port: 0 },
        inboundSmtpPort: 0,
        platformDailyCap: 0,
        domainWarmup: false,
        ...opts.config,
      },
      { log: pino({ level: 'warn' }, pino.destination(2)), clock: opts.clock },
    );
    const stop = service.stop.bind(service);
    return Object.assign(service, {
      stop: async () => {
        await stop();
        await dropDb(adminUrl, database);
      },
    });
  };

  /**
   * Compares request bodies on one service in alternating rounds (A B C, B C A, C A B …, after one
   * discarded warm-up each): on a noisy machine the rate drifts by a third
   * between phases minutes apart, so a ratio of two phases measured in turn says little.
   */
  const interleaved = async (url: string, tokens: string[], bodies: unknown[]): Promise<Result[]> => {
    const sum = bodies.map((): Result => ({ requests: 0, errors: 0, firstError: '', seconds: 0, rps: 0, p50: 0, p99: 0 }));
    const p50s: number[][] = bodies.map(() => []);
    const p99s: number[][] = bodies.map(() => []);
    for (const body of bodies) await load(`${url}/api/v1/emails`, tokens, body, SINGLE_CONCURRENCY, ROUND_SECONDS);
    for (let round = 0; round < INTERLEAVED_ROUNDS; round++) {
      log.info({ round: round + 1, of: INTERLEAVED_ROUNDS }, 'POST /emails plain and with templates, in turn');
      // Each round starts one body later (A B C D, B C D A, …): no body always follows the same one.
      for (let k = 0; k < bodies.length; k++) {
        const i = (round + k) % bodies.length;
        const body = bodies[i];
        const r = await load(`${url}/api/v1/emails`, tokens, body, SINGLE_CONCURRENCY, ROUND_SECONDS);
        sum[i].requests += r.requests;
        sum[i].errors += r.errors;
        sum[i].firstError ||= r.firstError;
        sum[i].seconds += r.seconds;
        p50s[i].push(r.p50);
        p99s[i].push(r.p99);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    return sum.map((r, i) => ({ ...r, rps: r.requests / r.seconds, p50: median(p50s[i]), p99: median(p99s[i]) }));
  };

  /** Publishes the templates the template phases send with, through the API. */
  const publishTemplates = async (url: string, orgId: string, orm: Parameters<typeof createKey>[0]) => {
    const admin = (await createKey(orm, orgId, { name: 'bench-admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
    const call = async (p: string, body?: unknown) => {
      const res = await fetch(`${url}/api/v1${p}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    };
    for (const { label: _label, ...t } of TEMPLATES) {
      await call('/templates', t);
      await call(`/templates/${t.slug}/publish`);
    }
  };

  const runService = async (mode: 'live' | 'test') => {
    const service = await startBenchService(`bench_service_${mode}`);
    const org = await benchOrganization(service.db.orm, 'Bench');
    await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
    // Keys at the highest cap (1000/s), used in turn: the per-key rate limit is charged on every
    // request, as in production, but must not be what the benchmark measures (a batch costs 100).
    const tokens: string[] = [];
    for (let i = 0; i < SINGLE_CONCURRENCY; i++)
      tokens.push((await createKey(service.db.orm, org.id, { name: `bench-${i}`, permission: 'send', mode, rateLimit: 1000 })).token);
    const batchBody = Array.from({ length: 100 }, () => message);
    if (ONLY?.endsWith('-batch')) {
      await load(`${service.url}/api/v1/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY);
      const batch = await load(`${service.url}/api/v1/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY);
      log.info({ base: base.rps, batch, messagesPerSecond: batch.rps * 100 }, 'BENCH_ONLY: batches measured');
      await service.stop();
      return null;
    }
    log.info({ mode }, 'POST /emails');
    await load(`${service.url}/api/v1/emails`, tokens, message, SINGLE_CONCURRENCY);
    const single = await load(`${service.url}/api/v1/emails`, tokens, message, SINGLE_CONCURRENCY);
    let templated: Result[] = [];
    if (mode === 'live' && (!ONLY || ONLY === 'template')) {
      await publishTemplates(service.url, org.id, service.db.orm);
      templated = await interleaved(service.url, tokens, [
        message,
        RENDERED,
        ...TEMPLATES.map((t) => ({ from: message.from, to: message.to, template: { slug: t.slug, data: TEMPLATE_DATA } })),
      ]);
    }
    if (ONLY === 'template') {
      log.info(
        { base: base.rps, single: single.rps, templated: templated.map((r) => ({ ...r, ratio: r.rps / templated[0].rps })) },
        'BENCH_ONLY: template sends measured',
      );
      await service.stop();
      return null;
    }
    if (ONLY) {
      log.info({ base: base.rps, single, ratio: single.rps / base.rps }, 'BENCH_ONLY: single sends measured');
      await service.stop();
      return null;
    }
    log.info({ mode }, 'POST /emails/batch (100 items)');
    const batch = await load(`${service.url}/api/v1/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY);
    const [{ n: backlog }] = await service.db.orm.em
      .fork()
      .getConnection()
      .execute(`select count(*)::int as n from emails where status = 'queued'`);
    await service.stop();
    return { single, batch, templated, backlog: backlog as number };
  };
  const runAudience = async (): Promise<{ upsert: Result; reads: AudienceResult }> => {
    const service = await startBenchService('bench_service_audience');
    const org = await benchOrganization(service.db.orm, 'Bench audience');
    const tokens: string[] = [];
    for (let i = 0; i < SINGLE_CONCURRENCY; i++)
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `bench-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
    log.info('POST /contacts (a new contact per request)');
    await load(`${service.url}/api/v1/contacts`, tokens, UPSERT_BODY, SINGLE_CONCURRENCY);
    const upsert = await load(`${service.url}/api/v1/contacts`, tokens, UPSERT_BODY, SINGLE_CONCURRENCY);
    log.info({ contacts: AUDIENCE_CONTACTS }, 'segments and lists over a seeded audience');
    const reads = await benchAudienceReads(service);
    await service.stop();
    return { upsert, reads };
  };
  const runWebhooks = async (): Promise<WebhookBenchResult> => {
    const service = await startBenchService('bench_service_webhooks');
    const r = await benchWebhooks(service, log, { deliveries: WEBHOOK_DELIVERIES, rate: WEBHOOK_RATE, seconds: SECONDS });
    await service.stop();
    return r;
  };
  /** Messages per second through the SMTP relay on one connection and on ten (STARTTLS, one key per connection). */
  const runRelay = async (): Promise<{ one: Result; ten: Result }> => {
    const service = await startBenchService('bench_service_relay');
    const org = await benchOrganization(service.db.orm, 'Bench relay');
    await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
    const tokens: string[] = [];
    for (let i = 0; i < 10; i++)
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `relay-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
    const port = service.relay!.port;
    log.info('SMTP relay, 1 connection');
    await smtpLoad(port, tokens, message, 1); // warm-up run discarded
    const one = await smtpLoad(port, tokens, message, 1);
    log.info('SMTP relay, 10 connections');
    await smtpLoad(port, tokens, message, 10);
    const ten = await smtpLoad(port, tokens, message, 10);
    await service.stop();
    return { one, ten };
  };
  /** Parking and release behind a spent cap, then transactional pickup behind a bulk backlog. */
  const runCaps = async (): Promise<{ park: ParkResult; pickup: PickupResult }> => {
    const clock = new BenchClock();
    const parkService = await startBenchService('bench_service_caps', { clock });
    const park = await benchPark(parkService, clock, log, PARKED);
    await parkService.stop();
    const streamService = await startBenchService('bench_service_streams');
    const pickup = await benchPickup(streamService, log, BULK_BACKLOG, PICKUP_SENDS);
    await streamService.stop();
    return { park, pickup };
  };
  /** A backlog drained to a counting sink, beside what a pooled nodemailer client gets from the same sink. */
  const drainTo = async (sink: CountingSink, database: string): Promise<DrainResult> => {
    const connections = readConfig({}).workerConcurrency;
    log.info({ messages: DRAIN_MESSAGES, connections }, 'drain: the ceiling (pooled nodemailer to the counting sink)');
    // A discarded round first: the ceiling is not measured on code the JIT has not optimized yet.
    await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
    const ceilingBefore = await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
    const service = await startBenchService(database, { smtpPort: sink.port, sendRatePerSecond: 100_000 });
    const drained = await benchDrain(service, sink, log, DRAIN_MESSAGES);
    await service.stop();
    const ceilingAfter = await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
    return { ...drained, ceilingBefore, ceilingAfter, ceilingPerSecond: (ceilingBefore + ceilingAfter) / 2 };
  };
  const runDrain = async (): Promise<DrainResult & { sinkThread: DrainResult; pickup: PickupResult }> => {
    const sink = await countingSink();
    const r = await drainTo(sink, 'bench_service_drain');
    // The same again against a sink on a thread of its own (bench/sink.ts): the stricter view.
    log.info('drain: again, the sink on its own thread');
    const threaded = await countingSink({ thread: true });
    const sinkThread = await drainTo(threaded, 'bench_service_drain_thread');
    await threaded.close();
    // Transactional pickup while a bulk backlog drains as fast as the sink takes it (the rate lifted).
    const pickupService = await startBenchService('bench_service_drain_pickup', { smtpPort: sink.port, sendRatePerSecond: 100_000 });
    const pickup = await benchPickup(pickupService, log, BULK_BACKLOG, PICKUP_SENDS);
    await pickupService.stop();
    await sink.close();
    return { ...r, sinkThread, pickup };
  };
  /**
   * Issue "Delivery throughput": SOAK_RATE live messages a second for SOAK_MINUTES to a counting
   * sink with the send rate lifted, memory and table sizes every minute.
   */
  const runSoak = async (): Promise<SoakResult> => {
    const sink = await countingSink();
    const service = await startBenchService('bench_service_soak', {
      smtpPort: sink.port,
      sendRatePerSecond: 100_000,
      engineRetentionHours: SOAK_RETENTION_MINUTES / 60,
    });
    const r = await benchSoak(service, sink, log, { minutes: SOAK_MINUTES, rate: SOAK_RATE, retentionMinutes: SOAK_RETENTION_MINUTES });
    await service.stop();
    await sink.close();
    return r;
  };
  /**
   * A broadcast to BROADCAST_CONTACTS seeded contacts, plain and then with a template rendered per
   * recipient, each on a fresh service whose live mail goes to a counting sink at the platform send
   * rate. The service stops as soon as the fan-out has accepted every recipient: the backlog it
   * leaves would otherwise drain into the phases after it.
   */
  const runBroadcast = async (): Promise<(BroadcastResult & { wallSeconds: number; stopSeconds: number })[]> => {
    const sink = await countingSink();
    const results: (BroadcastResult & { wallSeconds: number; stopSeconds: number })[] = [];
    for (const template of [false, true]) {
      const t0 = performance.now();
      const service = await startBenchService('bench_service_broadcast', { smtpPort: sink.port });
      const r = await benchBroadcast(service, sink, log, { contacts: BROADCAST_CONTACTS, template });
      const t1 = performance.now();
      await service.stop();
      const t2 = performance.now();
      results.push({ ...r, wallSeconds: (t2 - t0) / 1000, stopSeconds: (t2 - t1) / 1000 });
    }
    await sink.close();
    return results;
  };
  /**
   * Issue 17. POST /events beside the baseline: one automation (a one-day delay) started per
   * request, a new event id and a new contact each time. Then, each on a fresh service,
   * SLEEPING_RUNS runs asleep in a delay with the process's memory before and after, and a delay
   * of 0 s timed to its send step.
   */
  const runAutomations = async (): Promise<AutomationsBenchResult> => {
    const service = await startBenchService('bench_service_events');
    const org = await automationsOrg(service, 'Bench events', SINGLE_CONCURRENCY);
    const automationId = await createAutomation(org, 'Bench signed up', EVENT_BODY.name, [{ type: 'delay', duration: 'P1D' }]);
    const near = await startBaseline(await newDb(adminUrl, 'bench_baseline_events'), POOL);
    await load(near.url, ['none'], message, SINGLE_CONCURRENCY).catch(() => undefined); // warm-up run discarded
    const nearBaseline = await load(near.url, ['none'], message, SINGLE_CONCURRENCY);
    await near.stop();
    log.info(
      { baseline: base.rps, nearBaseline: nearBaseline.rps },
      'POST /events (a new event id and a new contact per request, one automation started)',
    );
    await load(`${service.url}/api/v1/events`, org.tokens, EVENT_BODY, SINGLE_CONCURRENCY);
    const before = await runCounts(service, automationId);
    const events = await load(`${service.url}/api/v1/events`, org.tokens, EVENT_BODY, SINGLE_CONCURRENCY);
    const after = await runCounts(service, automationId);
    log.info({ events, ...after }, 'automations: POST /events measured');
    // The same, for an automation whose runs start on the engine at once (its first step is no delay).
    const engineBody = { ...EVENT_BODY, name: 'engine_signed_up', email: 'g-__SEQ__@events.bench', id: 'eg-__SEQ__' };
    await createAutomation(org, 'Bench signed up, engine first', engineBody.name, [
      { type: 'update_contact', properties: { welcomed: true } },
      { type: 'delay', duration: 'P1D' },
    ]);
    await load(`${service.url}/api/v1/events`, org.tokens, engineBody, SINGLE_CONCURRENCY);
    const eventsEngine = await load(`${service.url}/api/v1/events`, org.tokens, engineBody, SINGLE_CONCURRENCY);
    log.info({ eventsEngine }, 'automations: POST /events measured (runs starting on the engine)');
    await service.stop();
    const sleepService = await startBenchService('bench_service_automations');
    const sleepOrg = await automationsOrg(sleepService, 'Bench automations', SINGLE_CONCURRENCY);
    const sleeping = await benchSleepingRuns(sleepService, sleepOrg, log, {
      runs: SLEEPING_RUNS,
      warmup: SLEEPING_WARMUP,
      concurrency: SINGLE_CONCURRENCY,
      seconds: SLEEPING_SECONDS,
    });
    await sleepService.stop();
    // Its own service: runs the dispatcher has not started yet would be ahead of these in its outbox.
    const delayService = await startBenchService('bench_service_delay_zero');
    const delayOrg = await automationsOrg(delayService, 'Bench delay zero', SINGLE_CONCURRENCY);
    const delayZero = await benchDelayZero(delayService, delayOrg, log, { events: DELAY_ZERO_EVENTS, intervalMs: DELAY_ZERO_INTERVAL_MS });
    await delayService.stop();
    return {
      events,
      nearBaseline,
      eventsEngine,
      eventRuns: after.runs - before.runs,
      runsTotal: after.runs,
      unstarted: after.unstarted,
      sleeping,
      delayZero,
    };
  };
  /** Issue 35: the drains and automation runs on the embedded engine and on Temporal, against one ceiling. */
  const runTemporal = (): Promise<TemporalBenchResult> =>
    benchTemporal({ log, startService: startBenchService, dataDir, messages: DRAIN_MESSAGES, concurrency: SINGLE_CONCURRENCY });
  if (ONLY === 'temporal') {
    const t = await runTemporal();
    log.info({ base: base.rps, goals: TEMPORAL_GOALS, ...t }, 'BENCH_ONLY: temporal measured');
    process.stdout.write(temporalSection(t) + '\n');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'automations') {
    const a = await runAutomations();
    log.info({ base: base.rps, ...a, ratio: a.events.rps / a.nearBaseline.rps }, 'BENCH_ONLY: automations measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'broadcast') {
    const b = await runBroadcast();
    log.info({ base: base.rps, broadcast: b }, 'BENCH_ONLY: broadcast measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'drain') {
    const d = await runDrain();
    log.info(
      {
        base: base.rps,
        ...d,
        liveOfCeiling: d.livePerSecond / d.ceilingPerSecond,
        seededOfCeiling: d.seededPerSecond / d.ceilingPerSecond,
        sinkThreadLiveOfCeiling: d.sinkThread.livePerSecond / d.sinkThread.ceilingPerSecond,
        sinkThreadSeededOfCeiling: d.sinkThread.seededPerSecond / d.sinkThread.ceilingPerSecond,
      },
      'BENCH_ONLY: drain measured',
    );
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'soak') {
    const r = await runSoak();
    log.info({ base: base.rps, ...r, samples: undefined }, 'BENCH_ONLY: soak measured');
    process.stdout.write(soakSection(r) + '\n');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'caps') {
    const c = await runCaps();
    log.info({ base: base.rps, ...c }, 'BENCH_ONLY: caps measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'relay') {
    const r = await runRelay();
    log.info({ base: base.rps, ...r }, 'BENCH_ONLY: relay measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'webhooks') {
    const w = await runWebhooks();
    log.info({ base: base.rps, ...w }, 'BENCH_ONLY: webhooks measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  if (ONLY === 'audience') {
    const a = await runAudience();
    log.info({ base: base.rps, ...a, ratio: a.upsert.rps / base.rps }, 'BENCH_ONLY: audience measured');
    await relay.close();
    if (pg) await pg.stop();
    return;
  }

  const live = ONLY?.startsWith('test-') ? null : await runService('live');
  const test = ONLY?.startsWith('live-') || ONLY === 'template' ? null : await runService('test');
  const audience = ONLY ? null : await runAudience();
  const webhooks = ONLY ? null : await runWebhooks();
  const smtpRelay = ONLY ? null : await runRelay();
  const caps = ONLY ? null : await runCaps();
  const drain = ONLY ? null : await runDrain();
  const temporal = ONLY ? null : await runTemporal();
  const soak = ONLY ? null : await runSoak();
  const broadcasts = ONLY ? null : await runBroadcast();
  const automations = ONLY ? null : await runAutomations();
  if (!live || !test || !audience || !webhooks || !smtpRelay || !caps || !drain || !temporal || !soak || !broadcasts || !automations) {
    await relay.close();
    if (pg) await pg.stop();
    return;
  }
  await relay.close();
  const { single, batch } = live;
  if (pg) await pg.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });

  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const pgVersion = process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded-postgres 17';
  const ratio = single.rps / base.rps;
  const batchMsgs = batch.rps * 100;
  const f = (n: number, d = 1) => n.toFixed(d);
  const row = (name: string, r: Result, msgs: number) =>
    `| ${name} | ${f(r.rps)} | ${f(msgs)} | ${f(r.p50)} | ${f(r.p99)} | ${r.requests} | ${r.errors} |`;
  const md = `# Benchmarks

Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB,
Node ${process.version}, PostgreSQL ${pgVersion} on the same machine. Load comes from a separate process over
loopback keep-alive connections, ${SECONDS} s per phase after a discarded warm-up of the same length.
Pool size ${POOL} for both the baseline and the service.

| Scenario | Requests/s | Accepted messages/s | p50 ms | p99 ms | Requests | Errors |
|---|---|---|---|---|---|---|
${row(`Baseline: bare Koa route, one INSERT (concurrency ${SINGLE_CONCURRENCY})`, base, base.rps)}
${row(`POST /emails, live key (concurrency ${SINGLE_CONCURRENCY})`, single, single.rps)}
${row(`POST /emails/batch, 100 items, live key (concurrency ${BATCH_CONCURRENCY})`, batch, batchMsgs)}
${row(`POST /emails, test key (concurrency ${SINGLE_CONCURRENCY})`, test.single, test.single.rps)}
${row(`POST /emails/batch, 100 items, test key (concurrency ${BATCH_CONCURRENCY})`, test.batch, test.batch.rps * 100)}
${row(`POST /emails, live key, in turn with the three rows below (concurrency ${SINGLE_CONCURRENCY})`, live.templated[0], live.templated[0].rps)}
${row(`POST /emails, live key, the first template's rendered subject, html and text sent plain (concurrency ${SINGLE_CONCURRENCY})`, live.templated[1], live.templated[1].rps)}
${TEMPLATES.map((t, i) => row(`POST /emails with a template: ${t.label}, live key (concurrency ${SINGLE_CONCURRENCY})`, live.templated[i + 2], live.templated[i + 2].rps)).join('\n')}
${row('SMTP relay, 1 connection (STARTTLS, one message per transaction)', smtpRelay.one, smtpRelay.one.rps)}
${row('SMTP relay, 10 connections (STARTTLS, one key each)', smtpRelay.ten, smtpRelay.ten.rps)}
${row(`POST /contacts, a new contact with properties and a topic per request (concurrency ${SINGLE_CONCURRENCY})`, audience.upsert, 0).replace(/\| [\d.]+ \| ([\d.]+ \| [\d.]+ \| \d+ \| \d+ \|)$/, '| – | $1')}

- Live single sends run at **${f(ratio * 100, 0)}%** of the baseline's request rate (goal ≥ 40%); test-key single sends at ${f((test.single.rps / base.rps) * 100, 0)}%.
- Single sends with a template run at **${TEMPLATES.map((t, i) => `${f((live.templated[i + 2].rps / live.templated[0].rps) * 100, 0)}% (${t.label})`).join(', ')}** of plain live single sends measured in turn with them (${INTERLEAVED_ROUNDS} rounds of ${f(ROUND_SECONDS, 0)} s each, goal ≥ 80%); the same content sent plain runs at ${f((live.templated[1].rps / live.templated[0].rps) * 100, 0)}%: the gap between that row and a templated one is what templating costs, the rest is the larger message.
- Live batches accept **${f(batchMsgs, 0)}** messages per second (goal ≥ 2,000); test-key batches ${f(test.batch.rps * 100, 0)}.
- The SMTP relay accepts **${f(smtpRelay.one.rps, 0)}** messages per second on one connection and **${f(smtpRelay.ten.rps, 0)}** on ten (${f((smtpRelay.ten.rps / single.rps) * 100, 0)}% of live single sends over HTTP); each message is one \`POST /emails\` through the same store statement, after MAIL FROM's domain check, RCPT and DATA on the connection.
- Contact upserts run at **${f((audience.upsert.rps / base.rps) * 100, 0)}%** of the baseline's request rate (goal ≥ 40%).
- Still queued when each run ended (the engine's backlog): live ${live.backlog}, test ${test.backlog}.
${single.errors + batch.errors + base.errors > 0 ? `- First error seen: ${single.firstError || batch.firstError || base.firstError}\n` : ''}
Every request runs the whole acceptance path: validation, then the store statement, which
authenticates the key, charges its rate window, checks the sender domain and the suppression list,
and stores the message with its recipients and \`queued\` events in the outbox, committed before
the answer. Concurrent single sends share one such statement (group commit); a batch has its own.
The outbox starts the messages in SendBatch runs of up to 100 (a DBOS queue entry each) as the engine's queue
has room, in the same process and during the load. Live mail leaves through a real SMTP server on
loopback (it discards) at the platform send rate (12/s, the spec's worker send rate), so during a
burst the live backlog waits in the outbox and drains afterwards. Test-key mail is not rate
limited: its workflows run during the burst and compete for the same two cores and PostgreSQL.
See "What limits throughput" in docs/architecture.md.

## Audience reads

${AUDIENCE_CONTACTS.toLocaleString('en-US')} contacts and 5 topics in one organization (seeded by \`INSERT ... SELECT generate_series\` in ${f(audience.reads.seedSeconds)} s; ${audience.reads.subscriptionRows.toLocaleString('en-US')} explicit subscription rows), measured over HTTP
one request at a time, authentication included. Query plans: docs/audience.md.

| Request | Result | Runs | p50 ms | p95 ms | max ms | Goal |
|---|---|---|---|---|---|---|
${audience.reads.segments
  .map(
    (s) =>
      `| \`GET /segments/:id\` (${s.name}) | contact_count ${s.contactCount} | ${s.timings.runs} | ${f(s.timings.p50)} | ${f(s.timings.p95)} | ${f(s.timings.max)} | < 100 ms |`,
  )
  .join('\n')}
${audience.reads.lists
  .map(
    (l) =>
      `| \`GET /contacts?${l.query}\`, pages of 25 following next_cursor | | ${l.timings.runs} | ${f(l.timings.p50)} | ${f(l.timings.p95)} | ${f(l.timings.max)} | p95 < 20 ms |`,
  )
  .join('\n')}

## Webhook deliveries

One endpoint on a loopback receiver that answers 200 at once, signed as in production, on the
embedded engine: first attempts in WebhookFirstAttempts batches (one run per dispatcher pass). Burst: ${webhooks.burst.deliveries.toLocaleString('en-US')} \`email.queued\` events written in
one statement (the fan-out trigger adds the deliveries), timed from the events to the last arrival. Steady: one
send per ${f(1000 / webhooks.steady.rate, 0)} ms for ${SECONDS} s, each timed from its event's \`created_at\` to its POST's arrival.

| Measure | Result | Goal |
|---|---|---|
| Deliveries per second (burst) | ${f(webhooks.burst.perSecond)} (${f(webhooks.burst.seconds)} s) | ≥ 500 |
| Event → first attempt p50 at ${webhooks.steady.rate}/s | ${f(webhooks.steady.p50, 0)} ms | < 1,000 ms |
| Event → first attempt p99 at ${webhooks.steady.rate}/s | ${f(webhooks.steady.p99, 0)} ms | < 3,000 ms |
| Event → first attempt, slowest | ${f(webhooks.steady.max, 0)} ms | |

## Daily caps and stream isolation

Parking: ${caps.park.messages.toLocaleString('en-US')} live messages (seeded in SQL) behind an organization cap already spent, parked by the
outbox's reserve statement, one per message. Release: the simulated clock turns the UTC day and the release step
wakes them all in pages of 1,000. Pickup: ${caps.pickup.backlog.toLocaleString('en-US')} bulk messages queued (seeded), then one transactional
send every 250 ms through the API, each timed from acceptance to its \`sent\` event, at the platform send rate (12/s).

| Measure | Result | Goal |
|---|---|---|
| Parking rate | ${f(caps.park.parkedPerSecond, 0)} messages/s (${f(caps.park.parkSeconds)} s) | |
| Row updates on \`emails\` per parked message | ${f(caps.park.updatesPerMessage, 2)} | ≤ 1 |
| Release rate at the day turn | ${f(caps.park.releasedPerSecond, 0)} messages/s (${f(caps.park.releaseSeconds)} s) | |
| Process RSS before the release → peak during it | ${f(caps.park.rssBeforeMiB, 0)} → ${f(caps.park.rssPeakMiB, 0)} MiB | flat |
| Transactional pickup p50 behind ${caps.pickup.backlog.toLocaleString('en-US')} bulk | ${f(caps.pickup.p50, 0)} ms | |
| Transactional pickup p99 behind ${caps.pickup.backlog.toLocaleString('en-US')} bulk | ${f(caps.pickup.p99, 0)} ms | < 1,000 ms |
| Transactional pickup, slowest | ${f(caps.pickup.max, 0)} ms | |
| Bulk messages sent meanwhile (the backlog drains at the send rate) | ${caps.pickup.bulkSent} | |

## Delivery drain

${drain.messages.toLocaleString('en-US')} messages accepted through \`POST /emails/batch\` by four keys at once (a key admits 1,000 a second) from a separate
process (as every phase's load), timed from the first acceptance until the last left, with \`SEND_RATE_PER_SECOND\` lifted; live mail to a loopback
SMTP sink in the service's process that only counts, test mail to its final status. The ceiling: the same sink filled by one pooled nodemailer
transport with as many connections (${readConfig({}).workerConcurrency}) as \`WORKER_CONCURRENCY\`, ${drain.messages.toLocaleString('en-US')} messages after a discarded round of as many,
measured before the drains and again after them; each drain is compared with the mean. Likewise the service drains a discarded backlog of
2,000 messages before the measured ones. The service delivers in SendBatch runs of up to 100 messages, its SMTP client on a thread of its own
(docs/architecture.md, "Delivering a backlog"). Then a fresh service with ${BULK_BACKLOG.toLocaleString('en-US')} bulk messages seeded in SQL drains them to the same sink
while transactional sends arrive every 250 ms.

| Measure | Result | Goal (issue 20) |
|---|---|---|
| Ceiling: pooled nodemailer to the sink, mean of before and after the drains | ${f(drain.ceilingPerSecond, 0)} messages/s (${f(drain.ceilingBefore, 0)} before, ${f(drain.ceilingAfter, 0)} after) | |
| Live drain | ${f(drain.livePerSecond, 1)} messages/s (${f(drain.liveSeconds)} s; the last batch accepted after ${f(drain.liveAcceptSeconds)} s), ${f((drain.livePerSecond / drain.ceilingPerSecond) * 100, 0)}% of the ceiling | ≥ 80% and ≥ 300/s |
| Test-mode drain | ${f(drain.testPerSecond, 1)} messages/s (${f(drain.testSeconds)} s; the last batch accepted after ${f(drain.testAcceptSeconds)} s) | ≥ 1,000/s |
| Live drain of a backlog seeded in SQL (delivery alone: no API accepting in the same process meanwhile) | ${f(drain.seededPerSecond, 1)} messages/s (${f(drain.seededSeconds)} s), ${f((drain.seededPerSecond / drain.ceilingPerSecond) * 100, 0)}% of the ceiling | |
| Transactional pickup (accepted → handed to the sink) while ${drain.pickup.backlog.toLocaleString('en-US')} bulk messages drain, ${drain.pickup.sends} sends 250 ms apart | p50 ${f(drain.pickup.p50, 0)} ms, **p99 ${f(drain.pickup.p99, 0)} ms**, max ${f(drain.pickup.max, 0)} ms; ${drain.pickup.bulkSent.toLocaleString('en-US')} bulk messages left meanwhile | p99 < 1 s |

The same measured again on a fresh service with the sink on a thread of its own (\`bench/sink.ts\`), as a relay on another machine: it no
longer shares an event loop with the client it measures, so the ceiling's client and sink each have a core, while the service's API, engine,
SMTP client and PostgreSQL share the same two with the sink. The stricter comparison:

| Measure, sink on its own thread | Result |
|---|---|
| Ceiling | ${f(drain.sinkThread.ceilingPerSecond, 0)} messages/s (${f(drain.sinkThread.ceilingBefore, 0)} before, ${f(drain.sinkThread.ceilingAfter, 0)} after) |
| Live drain | ${f(drain.sinkThread.livePerSecond, 1)} messages/s (${f(drain.sinkThread.liveSeconds)} s; accepted after ${f(drain.sinkThread.liveAcceptSeconds)} s), ${f((drain.sinkThread.livePerSecond / drain.sinkThread.ceilingPerSecond) * 100, 0)}% of the ceiling |
| Test-mode drain | ${f(drain.sinkThread.testPerSecond, 1)} messages/s |
| Live drain of a backlog seeded in SQL | ${f(drain.sinkThread.seededPerSecond, 1)} messages/s, ${f((drain.sinkThread.seededPerSecond / drain.sinkThread.ceilingPerSecond) * 100, 0)}% of the ceiling |

${temporalSection(temporal)}
${soakSection(soak)}

## Broadcast fan-out

${BROADCAST_CONTACTS.toLocaleString('en-US')} subscribed contacts (first name and a \`plan\` property) seeded by \`INSERT ... SELECT generate_series\` in ${f(broadcasts[0].seedSeconds)} s,
a segment of every subscribed contact and a verified bulk-stream domain; one \`POST /broadcasts\` (ADMIN key), timed until the fan-out cursor
(\`broadcasts.enqueued\`, polled every 100 ms) reached the frozen recipient count: the audience frozen into \`broadcast_recipients\`, then
pages of 1,000 through the accept path, each message an \`emails\` row. Resident memory of the process (the service runs in it) sampled every
100 ms (the second broadcast runs in the same process after the first, so it starts from where the first left it). Live mail leaves meanwhile to a loopback counting sink at the platform send rate (12/s); the service stops when the last recipient is
accepted. Each broadcast on a fresh database: plain subject, html and text, then a published template rendering \`{{first_name}}\` and \`{{plan}}\` per recipient.

| Measure | ${broadcasts.map((b) => (b.template ? 'Template per recipient' : 'Plain content')).join(' | ')} | Goal |
|---|${broadcasts.map(() => '---|').join('')}---|
| Recipients enqueued per second | ${broadcasts.map((b) => `**${f(b.perSecond, 0)}** (${b.recipients.toLocaleString('en-US')} in ${f(b.seconds)} s)`).join(' | ')} | ≥ 5,000 |
| POST → audience frozen (of it, created → freeze started) | ${broadcasts.map((b) => `${f(b.freezeSeconds, 2)} s (${f(b.dispatchSeconds, 2)} s)`).join(' | ')} | |
| Audience frozen → last recipient accepted | ${broadcasts.map((b) => `${f(b.pagesSeconds)} s`).join(' | ')} | |
| Process RSS at the POST → peak → end | ${broadcasts.map((b) => `${f(b.rssStartMiB, 0)} → ${f(b.rssPeakMiB, 0)} → ${f(b.rssEndMiB, 0)} MiB`).join(' | ')} | flat |
| Messages stored / delivered to the sink meanwhile | ${broadcasts.map((b) => `${b.stored.toLocaleString('en-US')} / ${b.delivered}`).join(' | ')} | |
| Wall time: service start, seeding, broadcast, stop (of it, the stop) | ${broadcasts.map((b) => `${f(b.wallSeconds)} s (${f(b.stopSeconds)} s)`).join(' | ')} | |

## Events and automations

The baseline is measured again just before this phase (it runs last, long after the run's first baseline). \`POST /events\` (live SEND keys at the highest cap, used in turn) at concurrency ${SINGLE_CONCURRENCY} for ${SECONDS} s after a discarded warm-up of the same
length, each request a new event id and a new contact (so each also inserts a contact), matching one enabled automation whose only step is a
one-day delay: each answer has committed the contact, the run (written parked in its delay: no workflow runs until the day is over) and the
day's quota row. Then the same load for an automation \`[update_contact, delay 1 day]\`, whose runs the dispatcher starts on the embedded engine
meanwhile, in the same process, each running its update and parking in the delay. Sleeping runs: on a fresh service, an automation
\`[update_contact, delay 1 day]\` (every run goes through the engine and then parks), ${automations.sleeping.warmupRuns} runs as a warm-up, then
the events of ${automations.sleeping.target.toLocaleString('en-US')} more (posted by a separate process, ${SINGLE_CONCURRENCY} at a time, a new contact each),
waited for until every run was in its delay (its entry in \`history\`; at most ${SLEEPING_SECONDS} s from the first event); the process's
resident memory (the service runs in it) and V8 heap sampled after a full GC before and after, per 1,000 runs in their delay. Delay of 0 s:
on another fresh service, an automation \`[delay 0, send_email]\` (a published template, the verified domain, live mail to the loopback relay),
${automations.delayZero.events} events one every ${automations.delayZero.intervalMs} ms (${f(1000 / automations.delayZero.intervalMs, 0)} a second, a new contact each), each run timed in the database from its
\`created_at\` (the event's statement) to its send_email history entry's \`finished_at\` (the message accepted).

| Measure | Result | Goal |
|---|---|---|
| Baseline again, just before this phase (the same bare Koa route and INSERT, concurrency ${SINGLE_CONCURRENCY}) | ${f(automations.nearBaseline.rps)} (the run's first: ${f(base.rps)}) | |
| \`POST /events\`, requests/s (one run started per request) | **${f(automations.events.rps)}**, **${f((automations.events.rps / automations.nearBaseline.rps) * 100, 0)}%** of the baseline beside it (${f((automations.events.rps / base.rps) * 100, 0)}% of the run's first) | ≥ 40% of the baseline |
| \`POST /events\`, runs starting on the engine at once (\`[update_contact, delay]\`) | ${f(automations.eventsEngine.rps)}, ${f((automations.eventsEngine.rps / automations.nearBaseline.rps) * 100, 0)}% of the baseline beside it (p99 ${f(automations.eventsEngine.p99)} ms) | |
| \`POST /events\` p50 / p99 | ${f(automations.events.p50)} / ${f(automations.events.p99)} ms | |
| \`POST /events\` requests / errors | ${automations.events.requests} / ${automations.events.errors}${automations.events.errors ? ` (first: ${automations.events.firstError.replaceAll('|', '\\|')})` : ''} | |
| Runs created during the measured load / due but not started yet at its end (of ${automations.runsTotal.toLocaleString('en-US')}) | ${automations.eventRuns.toLocaleString('en-US')} / ${automations.unstarted.toLocaleString('en-US')} | |
| Sleeping runs: events posted / runs in their delay | ${automations.sleeping.posted.toLocaleString('en-US')} in ${f(automations.sleeping.postSeconds)} s / ${automations.sleeping.runs.toLocaleString('en-US')} of ${automations.sleeping.target.toLocaleString('en-US')} after ${f(automations.sleeping.startSeconds)} s${automations.sleeping.complete ? '' : ` (time allowed ran out: ${automations.sleeping.started.toLocaleString('en-US')} started, ${automations.sleeping.unstarted.toLocaleString('en-US')} not started yet)`} | 10,000 |
| Process RSS before → after (peak) | ${f(automations.sleeping.rssBeforeMiB, 0)} → ${f(automations.sleeping.rssAfterMiB, 0)} MiB (${f(automations.sleeping.rssPeakMiB, 0)}) | flat |
| RSS per 1,000 sleeping runs | **${f(automations.sleeping.rssPerThousandMiB, 2)} MiB** | flat |
| V8 heap before → after, per 1,000 sleeping runs | ${f(automations.sleeping.heapBeforeMiB, 0)} → ${f(automations.sleeping.heapAfterMiB, 0)} MiB, ${f(automations.sleeping.heapPerThousandMiB, 2)} MiB | |
| Delay 0 s: event → send step p50 / p99 (${automations.delayZero.sent} of ${automations.delayZero.events} runs) | ${f(automations.delayZero.p50, 0)} / **${f(automations.delayZero.p99, 0)} ms** | p99 < 1,000 ms |
| Delay 0 s: slowest | ${f(automations.delayZero.max, 0)} ms | |
| Delay 0 s: of it, event → the delay step begun (dispatch, the run's start) p50 / p99 | ${f(automations.delayZero.toDelayP50, 0)} / ${f(automations.delayZero.toDelayP99, 0)} ms | |
`;
  fs.writeFileSync(path.join(__dirname, '..', 'BENCHMARKS.md'), md);
  process.stdout.write(md);
}

/** BENCHMARKS.md's "Soak" section (also printed by BENCH_ONLY=soak). */
function soakSection(soak: SoakResult): string {
  const f = (n: number, d = 1) => n.toFixed(d);
  const n = (x: number) => x.toLocaleString('en-US');
  // Rounded first: a slope of -0.2 rows a minute reads 0, not -0.
  const whole = (x: number) => f(Math.round(x) + 0, 0);
  const last = soak.samples[soak.samples.length - 1];
  const half = Math.floor(soak.minutes / 2);
  return `## Soak

${n(soak.ratePerSecond)} live messages a second for ${soak.minutes} minutes through \`POST /emails/batch\` (each second's messages in batches of up to
100, sent at the start of that second), to a loopback SMTP sink that only counts, with \`SEND_RATE_PER_SECOND\` lifted and
\`ENGINE_RETENTION_HOURS\` at ${f(soak.retentionMinutes)} minutes (a tenth of the soak, so the engine's tables reach their bound early). Every minute:
the process's resident memory and V8 heap after a full GC (the service runs in it), the messages accepted and delivered to the sink so far,
and the rows of DBOS's \`workflow_status\` (one per workflow; of them active: running, queued or delayed, which retention never
touches) and \`operation_outputs\` (one per step) and of \`emails\`.

| Minute | RSS MiB | Heap MiB | Accepted | Delivered | \`workflow_status\` (active) | \`operation_outputs\` | \`emails\` |
|---|---|---|---|---|---|---|---|
${soak.samples.map((s) => `| ${s.minute} | ${f(s.rssMiB, 0)} | ${f(s.heapMiB, 0)} | ${n(s.accepted)} | ${n(s.delivered)} | ${n(s.workflows)} (${n(s.active)}) | ${n(s.steps)} | ${n(s.emails)} |`).join('\n')}

| Measure (second half: minutes ${half}–${soak.minutes}, least-squares slopes) | Result | Goal |
|---|---|---|
| RSS growth | **${f(soak.rssSlopeMiBPerMinute, 2)} MiB/minute** | flat |
| V8 heap growth | ${f(soak.heapSlopeMiBPerMinute, 2)} MiB/minute | flat |
| Finished workflows (\`workflow_status\` rows not active) | ${whole(soak.finishedSlopePerMinute)}/minute; highest ${n(soak.firstHalfMax.finished)} in the first half, ${n(soak.secondHalfMax.finished)} in the second | bounded |
| \`operation_outputs\` rows | ${whole(soak.stepsSlopePerMinute)}/minute; highest ${n(soak.firstHalfMax.steps)} in the first half, ${n(soak.secondHalfMax.steps)} in the second | bounded |
| Engine rows bounded: finished workflows and steps (second half's highest ≤ ${BOUND_RATIO} × the first half's) | **${soak.engineBounded ? 'yes' : 'no'}** | yes |
| Active workflows (the engine's backlog: started, not finished) | ${whole(soak.activeSlopePerMinute)}/minute | |
| Delivered / accepted at the end | ${n(last.delivered)} / ${n(last.accepted)} (${f((last.delivered / Math.max(1, last.accepted)) * 100, 0)}%) | |
| Seconds sent more than a second late / batches refused | ${soak.lateSeconds} / ${soak.errors}${soak.errors ? ` (first: ${soak.firstError.replaceAll('|', '\\|')})` : ''} | 0 / 0 |
`;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
