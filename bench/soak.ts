import { Client } from 'pg';
import { fullGc, mib } from './memory';
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, n, type Phase } from './phase';
import { countingSink } from './sink';

/** One minute's mark of the soak. */
export interface SoakSample {
  minute: number;
  /** Of the process (the service runs in it), after a full GC. */
  rssMiB: number;
  heapMiB: number;
  /** Messages the API accepted so far, and messages the counting sink received so far. */
  accepted: number;
  delivered: number;
  /** Rows in the engine's tables and in the service's `emails`; `active` are the workflows not finished (PENDING, ENQUEUED, DELAYED), which retention never touches. */
  workflows: number;
  active: number;
  steps: number;
  emails: number;
}

export interface SoakResult {
  minutes: number;
  ratePerSecond: number;
  /** ENGINE_RETENTION_HOURS of the service, in minutes. */
  retentionMinutes: number;
  samples: SoakSample[];
  /** Least-squares slopes over the second half of the samples (from minute ⌊minutes/2⌋), per minute. */
  rssSlopeMiBPerMinute: number;
  heapSlopeMiBPerMinute: number;
  finishedSlopePerMinute: number;
  activeSlopePerMinute: number;
  stepsSlopePerMinute: number;
  /**
   * The highest counts of finished workflows and of steps in each half; bounded when the second
   * half's are at most BOUND_RATIO times the first's. Active workflows are the backlog, not retention's.
   */
  firstHalfMax: { finished: number; steps: number };
  secondHalfMax: { finished: number; steps: number };
  engineBounded: boolean;
  /** Seconds whose batches were sent more than a second late (the sender fell behind the pace). */
  lateSeconds: number;
  /** Batches refused (after retries on 429) and the first refusal. */
  errors: number;
  firstError: string;
}

/**
 * Growth at a steady rate doubles a count between the first half's end and the second's; a count
 * held by retention stays within its first half's peak (noise of the sweeps aside).
 */
export const BOUND_RATIO = 1.25;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Least-squares slope of y over x. */
export function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0) / sxx;
}

/**
 * Issue "Delivery throughput": `rate` live messages a second for `minutes`, through
 * `POST /emails/batch` (each second's messages in batches of up to 100, sent at the start of that
 * second), to a counting sink with SEND_RATE_PER_SECOND lifted, on a service whose engine
 * retention is `retentionMinutes`. Every minute: the process's memory, what was accepted and
 * delivered, and the row counts of the engine's tables and of `emails`.
 */
export async function benchSoak(
  service: Service,
  sink: { count: () => number; reset: () => void },
  log: Logger,
  opts: { minutes: number; rate: number; retentionMinutes: number },
): Promise<SoakResult> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Bench soak');
  await createDomain(orm, org.id, 'soak.bench.test', { verified: true, warmup: false });
  // A key's window holds 1,000 a second (a batch reserves 100 before its body is read): half of that per key leaves room.
  const keys: string[] = [];
  for (let i = 0; i < Math.ceil(opts.rate / 500); i++)
    keys.push((await createKey(orm, org.id, { name: `soak-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token);
  // Its own connection: the counts must not queue behind the service's pools, nor take from them.
  const db = new Client({ connectionString: service.db.url, application_name: 'bench-soak' });
  await db.connect();
  const count = async (table: string) => Number((await db.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0].n);
  const workflows = async () => {
    const { rows } = await db.query<{ all: string; active: string }>(
      `select count(*) as all, count(*) filter (where status in ('PENDING', 'ENQUEUED', 'DELAYED')) as active from dbos.workflow_status`,
    );
    return { workflows: Number(rows[0].all), active: Number(rows[0].active) };
  };

  let accepted = 0;
  let errors = 0;
  let firstError = '';
  let lateSeconds = 0;
  let batchNo = 0;
  const samples: SoakSample[] = [];
  const sample = async (minute: number) => {
    fullGc();
    const m = process.memoryUsage();
    const s: SoakSample = {
      minute,
      rssMiB: mib(m.rss),
      heapMiB: mib(m.heapUsed),
      accepted,
      delivered: sink.count(),
      ...(await workflows()),
      steps: await count('dbos.operation_outputs'),
      emails: await count('emails'),
    };
    samples.push(s);
    log.info({ ...s, rssMiB: Math.round(s.rssMiB), heapMiB: Math.round(s.heapMiB) }, 'soak: minute');
  };

  const send = async (second: number, items: number) => {
    const key = keys[batchNo++ % keys.length];
    const body = Array.from({ length: items }, (_, i) => ({
      from: 'Soak <bench@soak.bench.test>',
      to: `s${second}-${i}@example.com`,
      subject: 'Soak',
      text: 'hello',
      html: '<p>hello</p>',
    }));
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(`${service.url}/api/v1/emails/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (res.status === 429 && attempt < 20) {
        await res.arrayBuffer();
        await sleep(100);
        continue;
      }
      if (!res.ok) {
        errors++;
        firstError ||= `${res.status} ${(await res.text()).slice(0, 200)}`;
        return;
      }
      const { data } = (await res.json()) as { data: { id?: string }[] };
      accepted += data.filter((d) => d.id).length;
      return;
    }
  };

  log.info(opts, 'soak: steady live sends to the counting sink');
  sink.reset();
  await sample(0);
  const t0 = performance.now();
  const inFlight = new Set<Promise<void>>();
  const pace = (async () => {
    for (let second = 0; second < opts.minutes * 60; second++) {
      const due = t0 + second * 1000;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      else if (wait < -1000) lateSeconds++;
      for (let left = opts.rate; left > 0; left -= 100) {
        const p = send(second, Math.min(100, left)).finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
    }
    await Promise.all(inFlight);
  })();
  const marks = (async () => {
    for (let minute = 1; minute <= opts.minutes; minute++) {
      const wait = t0 + minute * 60_000 - performance.now();
      if (wait > 0) await sleep(wait);
      // The last mark waits for the last second's batches, so its `accepted` holds every message sent.
      if (minute === opts.minutes) await pace;
      await sample(minute);
    }
  })();
  await Promise.all([pace, marks]);
  await db.end();

  const half = Math.floor(opts.minutes / 2);
  const second = samples.filter((s) => s.minute >= half);
  const first = samples.filter((s) => s.minute <= half);
  const fit = (f: (s: SoakSample) => number) => slope(second.map((s) => [s.minute, f(s)]));
  const max = (xs: SoakSample[]) => ({
    finished: Math.max(...xs.map((s) => s.workflows - s.active)),
    steps: Math.max(...xs.map((s) => s.steps)),
  });
  const firstHalfMax = max(first);
  const secondHalfMax = max(second);
  return {
    minutes: opts.minutes,
    ratePerSecond: opts.rate,
    retentionMinutes: opts.retentionMinutes,
    samples,
    rssSlopeMiBPerMinute: fit((s) => s.rssMiB),
    heapSlopeMiBPerMinute: fit((s) => s.heapMiB),
    finishedSlopePerMinute: fit((s) => s.workflows - s.active),
    activeSlopePerMinute: fit((s) => s.active),
    stepsSlopePerMinute: fit((s) => s.steps),
    firstHalfMax,
    secondHalfMax,
    engineBounded: secondHalfMax.finished <= BOUND_RATIO * firstHalfMax.finished && secondHalfMax.steps <= BOUND_RATIO * firstHalfMax.steps,
    lateSeconds,
    errors,
    firstError,
  };
}

/** BENCH_SOAK_MINUTES, BENCH_SOAK_RATE: the soak's live messages a second through POST /emails/batch, for this many minutes. */
const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES || 30);
const SOAK_RATE = Number(process.env.BENCH_SOAK_RATE || 100);
/**
 * The soak's service keeps finished workflows a tenth of the soak (3 minutes of 30), so the engine's
 * tables reach their bound early and the second half shows whether they stay there.
 */
const SOAK_RETENTION_MINUTES = SOAK_MINUTES / 10;

/** BENCHMARKS.md's "Soak" section. */
function soakSection(soak: SoakResult): string {
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

/**
 * The soak phase of `npm run bench` (BENCH_ONLY=soak; issue "Delivery throughput"): SOAK_RATE live
 * messages a second for SOAK_MINUTES to a counting sink with the send rate lifted, memory and table
 * sizes every minute.
 */
export const soakPhase: Phase<'soak'> = {
  name: 'soak',
  async run({ log, startService }) {
    const sink = await countingSink();
    const service = await startService('bench_service_soak', {
      smtpPort: sink.port,
      sendRatePerSecond: 100_000,
      engineRetentionHours: SOAK_RETENTION_MINUTES / 60,
    });
    const r = await benchSoak(service, sink, log, { minutes: SOAK_MINUTES, rate: SOAK_RATE, retentionMinutes: SOAK_RETENTION_MINUTES });
    await service.stop();
    await sink.close();
    return r;
  },
  section: soakSection,
};
