/**
 * The automations phase's delay of 0 s (bench/automations.ts): events of an automation
 * `[delay 0, send_email]` spaced a few ms apart, each run timed from its `created_at` (the event)
 * to its send step's `finished_at` (the message accepted), read from the database.
 */
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createAutomation, type AutomationsOrg } from './automations-org';
import { postEvents } from './automations-poster';

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
    sql.execute<{ ms: string; to_delay: string }[]>(
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
