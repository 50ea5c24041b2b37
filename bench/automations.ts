/**
 * The automations phase of `npm run bench` (issue 17). bench/run.ts loads `POST /events` beside the
 * baseline with the organization and automation made here; this file measures the rest on a service
 * of its own:
 * - sleeping runs: 10,000 events of an automation whose first step is a one-day delay, each run
 *   started and in its delay, with the process's resident memory (the service runs in it) before
 *   and after;
 * - a delay of 0 s: events spaced a few ms apart, each run timed from its `created_at` (the event)
 *   to its send step's `finished_at` (the message accepted), read from the database.
 * Events are posted by this file run as its own process (see the end), so the poster's memory and
 * CPU are not the service's.
 */
import { spawn } from 'node:child_process';
import { fullGc, mib } from './memory';
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';

/** `__SEQ__` becomes a number unique to each request (bench/load.ts): a new event id and a new contact per request. */
export const EVENT_BODY = { name: 'signed_up', email: 'e-__SEQ__@events.bench', id: 'ev-__SEQ__' };

export interface AutomationsOrg {
  organizationId: string;
  /** SEND keys (live) at the highest cap, used in turn. */
  tokens: string[];
  /** An ADMIN-key request; throws on anything but 2xx. */
  call: (method: 'GET' | 'POST', path: string, body?: unknown) => Promise<any>;
}

export interface SleepingResult {
  /** Runs started before the first sample (warm-up), and the events posted after it. */
  warmupRuns: number;
  target: number;
  /** Of the target's runs when sampled: started (a workflow in the engine), and of those in their delay. */
  started: number;
  runs: number;
  /** Whether every run of the events was in its delay before the time allowed ran out (if not, `runs` is what was). */
  complete: boolean;
  /** Of the target's runs, not started yet (the dispatcher's outbox) when sampled. */
  unstarted: number;
  /** Seconds the events took to post (a separate process, `concurrency` at a time; it stops at the bound). */
  postSeconds: number;
  /** Events posted for the measured runs (answered 200), and how many answered something else. */
  posted: number;
  postErrors: number;
  /** From the first event posted until every run was started and in its delay (or the time allowed ran out). */
  startSeconds: number;
  /** Resident memory and V8 heap in use (after a full GC each time), MiB, before the measured runs and after. */
  rssBeforeMiB: number;
  rssAfterMiB: number;
  rssPeakMiB: number;
  heapBeforeMiB: number;
  heapAfterMiB: number;
  /** (after − before) / (runs / 1,000). */
  rssPerThousandMiB: number;
  heapPerThousandMiB: number;
}

export interface DelayZeroResult {
  events: number;
  intervalMs: number;
  /** Runs whose send step was reached (should be `events`). */
  sent: number;
  postErrors: number;
  /** Run `created_at` → send_email entry's `finished_at` (the message accepted), ms. */
  p50: number;
  p99: number;
  max: number;
  /** Of that, `created_at` → the delay entry's `started_at` (dispatch, the workflow's start, its first step), p50 and p99, ms. */
  toDelayP50: number;
  toDelayP99: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sampleMemory = async () => {
  fullGc();
  await sleep(200);
  fullGc();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed };
};

/**
 * An organization with both event quotas lifted (the defaults refuse after 1,000 new contacts and
 * 5,000 runs a day), the verified domain bench.test, an ADMIN key and `sendKeys` live SEND keys.
 */
export async function automationsOrg(service: Service, name: string, sendKeys: number): Promise<AutomationsOrg> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, name);
  await orm.em
    .fork()
    .getConnection()
    .execute('update organizations set event_contact_quota = 100000000, event_run_quota = 100000000 where id = ?', [org.id]);
  await createDomain(orm, org.id, 'bench.test', { verified: true, warmup: false });
  const admin = (await createKey(orm, org.id, { name: 'bench-admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const tokens: string[] = [];
  for (let i = 0; i < sendKeys; i++)
    tokens.push((await createKey(orm, org.id, { name: `bench-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token);
  const call = async (method: 'GET' | 'POST', p: string, body?: unknown) => {
    const res = await fetch(`${service.url}/api/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  return { organizationId: org.id, tokens, call };
}

/** An enabled automation triggered by `event`; its id. */
export async function createAutomation(org: AutomationsOrg, name: string, event: string, steps: unknown[]): Promise<string> {
  return (await org.call('POST', '/automations', { name, trigger: { event }, steps })).id;
}

/** Runs of an automation: all, not started yet (the outbox), and started with a delay entry in their history. */
export async function runCounts(service: Service, automationId: string): Promise<{ runs: number; unstarted: number; delaying: number }> {
  const [row] = await service.db.orm.em
    .fork()
    .getConnection()
    .execute<{ runs: number; unstarted: number; delaying: number }[]>(
      `select count(*)::int as runs,
              (count(*) filter (where started_at is null and coalesce(resume_at, created_at) <= now()))::int as unstarted,
              (count(*) filter (where status = 'running' and history @> '[{"type": "delay"}]'))::int as delaying
         from automation_runs where automation_id = ?`,
      [automationId],
    );
  return row;
}

export interface PostArgs {
  url: string;
  tokens: string[];
  name: string;
  /** Emails and event ids are `<prefix>-<i>`. */
  prefix: string;
  events: number;
  /** Requests in flight at once (back to back), or, with `intervalMs`, one request started every intervalMs. */
  concurrency: number;
  intervalMs?: number;
  /** No request is started after this moment (epoch ms). */
  untilEpochMs?: number;
}
export interface PostResult {
  posted: number;
  errors: number;
  firstError: string;
  runs: number;
}

/** Posts events from a process of its own (this file, below). */
export function postEvents(args: PostArgs): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', __filename, JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`event poster exited ${code}`))));
  });
}

/** Waits until `until` holds (true) or the deadline passes (false). */
async function waitForRuns(
  service: Service,
  log: Logger,
  automationId: string,
  until: (c: { runs: number; unstarted: number; delaying: number }) => boolean,
  what: string,
  deadline: number,
): Promise<boolean> {
  let lastLog = Date.now();
  for (;;) {
    const c = await runCounts(service, automationId);
    if (until(c)) return true;
    if (Date.now() > deadline) {
      log.warn(c, `automations: ${what} not reached in the time allowed`);
      return false;
    }
    if (Date.now() - lastLog > 5000) {
      log.info({ ...c, rssMiB: Math.round(mib(process.memoryUsage().rss)) }, `automations: waiting for ${what}`);
      lastLog = Date.now();
    }
    await sleep(100);
  }
}

/**
 * `runs` runs asleep in a one-day delay: a warm-up of `warmup` runs of the same automation first,
 * then the memory sampled, the runs' events posted, and the memory sampled again once each run is
 * in its delay, or when `seconds` have passed since the first event (the bound of the phase).
 */
export async function benchSleepingRuns(
  service: Service,
  org: AutomationsOrg,
  log: Logger,
  opts: { runs: number; warmup: number; concurrency: number; seconds: number },
): Promise<SleepingResult> {
  // Not a delay first: every run starts on the engine, takes a step and parks (a first delay would be written parked).
  const automationId = await createAutomation(org, 'Bench sleeping', 'sleep', [
    { type: 'update_contact', properties: { sleeping: true } },
    { type: 'delay', duration: 'P1D' },
  ]);
  const post = (prefix: string, events: number, untilEpochMs?: number) =>
    postEvents({ url: service.url, tokens: org.tokens, name: 'sleep', prefix, events, concurrency: opts.concurrency, untilEpochMs });
  const inDelay = (n: number) => (c: { runs: number; unstarted: number; delaying: number }) =>
    c.runs >= n && c.unstarted === 0 && c.delaying >= n;

  log.info({ warmup: opts.warmup }, 'automations: sleeping runs, warm-up');
  const w = await post('warm', opts.warmup);
  if (w.errors) throw new Error(`automations: warm-up events refused: ${w.firstError}`);
  if (!(await waitForRuns(service, log, automationId, inDelay(opts.warmup), 'the warm-up runs in their delay', Date.now() + 60_000)))
    throw new Error('automations: the warm-up runs were not all in their delay after 60 s');
  await sleep(2000);
  const before = await sampleMemory();
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 100);

  log.info({ runs: opts.runs, rssMiB: Math.round(mib(before.rss)) }, 'automations: posting the events of the sleeping runs');
  const t0 = performance.now();
  const deadline = Date.now() + opts.seconds * 1000;
  const r = await post('sleep', opts.runs, deadline);
  const postSeconds = (performance.now() - t0) / 1000;
  if (r.errors) log.warn({ errors: r.errors, firstError: r.firstError }, 'automations: events of the sleeping runs refused');
  log.info({ posted: r.posted, postSeconds, ...(await runCounts(service, automationId)) }, 'automations: events posted');
  const complete = await waitForRuns(service, log, automationId, inDelay(opts.warmup + r.posted), 'every run in its delay', deadline);
  const startSeconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const c = await runCounts(service, automationId);
  const after = await sampleMemory();
  const measured = c.delaying - opts.warmup;
  const perThousand = (d: number) => mib(d) / (measured / 1000);
  log.info({ ...c, complete, rssMiB: Math.round(mib(after.rss)), startSeconds }, 'automations: sleeping runs measured');
  return {
    warmupRuns: opts.warmup,
    target: opts.runs,
    started: c.runs - c.unstarted - opts.warmup,
    runs: measured,
    complete,
    unstarted: c.unstarted,
    postSeconds,
    posted: r.posted,
    postErrors: r.errors,
    startSeconds,
    rssBeforeMiB: mib(before.rss),
    rssAfterMiB: mib(after.rss),
    rssPeakMiB: mib(Math.max(peak, after.rss)),
    heapBeforeMiB: mib(before.heap),
    heapAfterMiB: mib(after.heap),
    rssPerThousandMiB: perThousand(after.rss - before.rss),
    heapPerThousandMiB: perThousand(after.heap - before.heap),
  };
}

/**
 * `[delay 0, send_email]` with a published template: `events` events, one every `intervalMs`,
 * each run timed from its creation (the event's statement) to its message accepted.
 */
export async function benchDelayZero(
  service: Service,
  org: AutomationsOrg,
  log: Logger,
  opts: { events: number; intervalMs: number },
): Promise<DelayZeroResult> {
  await org.call('POST', '/templates', {
    name: 'Bench welcome',
    slug: 'bench-welcome',
    subject: 'Welcome, {{first_name}}',
    html: '<h1>Welcome, {{first_name}}</h1><p>Glad to have you.</p>',
    variables: [{ key: 'first_name', type: 'string', fallback: 'there' }],
  });
  await org.call('POST', '/templates/bench-welcome/publish', {});
  const automationId = await createAutomation(org, 'Bench delay 0', 'welcome', [
    { type: 'delay', duration: 0 },
    { type: 'send_email', from: 'Bench <bench@bench.test>', template: { slug: 'bench-welcome' } },
  ]);
  const sql = service.db.orm.em.fork().getConnection();
  const sent = async () =>
    sql.execute<{ ms: number; to_delay: number }[]>(
      `select extract(epoch from ((s ->> 'finished_at')::timestamptz - r.created_at)) * 1000 as ms,
              extract(epoch from ((d ->> 'started_at')::timestamptz - r.created_at)) * 1000 as to_delay
         from automation_runs r
         join lateral (select h from jsonb_array_elements(r.history) h where h ->> 'type' = 'send_email' limit 1) x(s) on true
         join lateral (select h from jsonb_array_elements(r.history) h where h ->> 'type' = 'delay' limit 1) y(d) on true
        where r.automation_id = ? and s ->> 'finished_at' is not null`,
      [automationId],
    );

  log.info(opts, 'automations: delay 0 then send_email, events spaced');
  const r = await postEvents({
    url: service.url,
    tokens: org.tokens,
    name: 'welcome',
    prefix: 'welcome',
    events: opts.events,
    concurrency: 1,
    intervalMs: opts.intervalMs,
  });
  if (r.errors) log.warn({ errors: r.errors, firstError: r.firstError }, 'automations: delay-0 events refused');
  const expected = r.posted;
  const deadline = Date.now() + 60_000;
  let rows = await sent();
  while (rows.length < expected && Date.now() < deadline) {
    await sleep(200);
    rows = await sent();
  }
  const ms = rows.map((x) => Number(x.ms));
  const toDelay = rows.map((x) => Number(x.to_delay)).sort((a, b) => a - b);
  if (ms.length < expected) {
    const [c] = await sql.execute<{ status: string; n: number }[]>(
      `select string_agg(status || ':' || n, ', ') as status from (select status, count(*)::int as n from automation_runs where automation_id = ? group by status) s`,
      [automationId],
    );
    log.warn({ sent: ms.length, expected, statuses: c?.status }, 'automations: not every delay-0 run reached its send step within 60 s');
  }
  ms.sort((a, b) => a - b);
  const pct = (p: number, xs = ms) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
  return {
    events: opts.events,
    intervalMs: opts.intervalMs,
    sent: ms.length,
    postErrors: r.errors,
    p50: pct(50),
    p99: pct(99),
    max: ms[ms.length - 1] ?? NaN,
    toDelayP50: pct(50, toDelay),
    toDelayP99: pct(99, toDelay),
  };
}

/** Run as a process: posts the events of PostArgs (argv[2]) and writes a PostResult. */
async function posterMain(a: PostArgs): Promise<void> {
  let posted = 0;
  let errors = 0;
  let runs = 0;
  let firstError = '';
  const open = () => a.untilEpochMs === undefined || Date.now() < a.untilEpochMs;
  const one = async (i: number) => {
    try {
      const res = await fetch(`${a.url}/api/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.tokens[i % a.tokens.length]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: a.name, email: `${a.prefix}-${i}@events.bench`, id: `${a.prefix}-${i}` }),
      });
      const text = await res.text();
      if (res.status === 200) {
        posted++;
        runs += (JSON.parse(text) as { runs: number }).runs;
      } else {
        errors++;
        firstError ||= `${res.status} ${text.slice(0, 200)}`;
      }
    } catch (e) {
      errors++;
      firstError ||= (e as Error).message;
    }
  };
  if (a.intervalMs) {
    const inFlight: Promise<void>[] = [];
    const t0 = performance.now();
    for (let i = 0; i < a.events && open(); i++) {
      // On a schedule (not after the previous answer): one event every intervalMs.
      const wait = t0 + i * a.intervalMs - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(one(i));
    }
    await Promise.all(inFlight);
  } else {
    let next = 0;
    await Promise.all(
      Array.from({ length: a.concurrency }, async () => {
        while (next < a.events && open()) await one(next++);
      }),
    );
  }
  process.stdout.write(JSON.stringify({ posted, errors, firstError, runs } satisfies PostResult) + '\n');
}

if (require.main === module) {
  posterMain(JSON.parse(process.argv[2]) as PostArgs).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
