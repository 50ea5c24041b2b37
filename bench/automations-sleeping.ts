/**
 * The automations phase's sleeping runs (bench/automations.ts): events of an automation
 * `[update_contact, delay 1 day]`, each run started and in its delay, with the process's resident
 * memory (the service runs in it) and V8 heap before and after.
 */
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createAutomation, runCounts, type AutomationsOrg } from './automations-org';
import { postEvents } from './automations-poster';
import { fullGc, mib } from './memory';

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sampleMemory = async () => {
  fullGc();
  await sleep(200);
  fullGc();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed };
};

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
