/**
 * The automations phase of `npm run bench` (issue 17; BENCH_ONLY=automations), automationsPhase:
 * - `POST /events` under load beside the baseline (measured again just before it), each request a
 *   new contact and one run of an automation whose only step is a one-day delay, then the same for
 *   an automation whose runs start on the engine at once;
 * - sleeping runs: 10,000 events of an automation whose first step is a one-day delay, each run
 *   started and in its delay, with the process's resident memory (the service runs in it) before
 *   and after;
 * - a delay of 0 s: events spaced a few ms apart, each run timed from its `created_at` (the event)
 *   to its send step's `finished_at` (the message accepted), read from the database.
 * Events are posted by bench/automations-poster.ts run as its own process, so the poster's memory
 * and CPU are not the service's. The organization and its automations: bench/automations-org.ts;
 * the sleeping runs: bench/automations-sleeping.ts; the delay of 0 s: bench/automations-delay-zero.ts.
 */
import { benchDelayZero, type DelayZeroResult } from './automations-delay-zero';
import { automationsOrg, createAutomation, runCounts } from './automations-org';
import { benchSleepingRuns, type SleepingResult } from './automations-sleeping';
import { f, load, n, SECONDS, SINGLE_CONCURRENCY, type LoadResult, type Measured, type Phase } from './phase';

/** `__SEQ__` becomes a number unique to each request (bench/load.ts): a new event id and a new contact per request. */
export const EVENT_BODY = { name: 'signed_up', email: 'e-__SEQ__@events.bench', id: 'ev-__SEQ__' };

/** BENCH_SLEEPING_RUNS: runs put to sleep in a one-day delay for the memory measurement, after a warm-up of SLEEPING_WARMUP. */
const SLEEPING_RUNS = Number(process.env.BENCH_SLEEPING_RUNS || 10_000);
const SLEEPING_WARMUP = 200;
/** BENCH_SLEEPING_SECONDS: the bound of the sleeping runs' measurement, from the first event: memory is sampled then if not every run is in its delay yet. */
const SLEEPING_SECONDS = Number(process.env.BENCH_SLEEPING_SECONDS || 240);
/** BENCH_DELAY_ZERO_EVENTS: events of the delay-0 automation, one every BENCH_DELAY_ZERO_INTERVAL_MS. */
const DELAY_ZERO_EVENTS = Number(process.env.BENCH_DELAY_ZERO_EVENTS || 200);
const DELAY_ZERO_INTERVAL_MS = Number(process.env.BENCH_DELAY_ZERO_INTERVAL_MS || 50);

export interface AutomationsPhaseResult {
  /** POST /events under load (after a discarded warm-up of the same length). */
  events: LoadResult;
  /**
   * The baseline measured again just before the events load: the phase runs last, tens of minutes
   * after the run's first baseline, on a PostgreSQL that has taken every phase since.
   */
  nearBaseline: LoadResult;
  /** The same load for an automation whose first step runs on the engine (an update, then the delay). */
  eventsEngine: LoadResult;
  /** Runs created during the measured load, all of the automation's runs at its end, and of those not started yet. */
  eventRuns: number;
  runsTotal: number;
  unstarted: number;
  sleeping: SleepingResult;
  delayZero: DelayZeroResult;
}

/** BENCHMARKS.md's "Events and automations" section. */
function automationsSection(automations: AutomationsPhaseResult, { base }: Measured): string {
  return `## Events and automations

The baseline is measured again just before this phase (it runs last, long after the run's first baseline). \`POST /events\` (live SEND keys at the highest cap, used in turn) at concurrency ${SINGLE_CONCURRENCY} for ${SECONDS} s after a discarded warm-up of the same
length, each request a new event id and a new contact (so each also inserts a contact), matching one enabled automation whose only step is a
one-day delay: each answer has committed the contact, the run (written parked in its delay: no workflow runs until the day is over) and the
day's quota row. Then the same load for an automation \`[update_contact, delay 1 day]\`, whose runs the dispatcher starts on the embedded engine
meanwhile, in the same process, each running its update and parking in the delay. Sleeping runs: on a fresh service, an automation
\`[update_contact, delay 1 day]\` (every run goes through the engine and then parks), ${automations.sleeping.warmupRuns} runs as a warm-up, then
the events of ${n(automations.sleeping.target)} more (posted by a separate process, ${SINGLE_CONCURRENCY} at a time, a new contact each),
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
| Runs created during the measured load / due but not started yet at its end (of ${n(automations.runsTotal)}) | ${n(automations.eventRuns)} / ${n(automations.unstarted)} | |
| Sleeping runs: events posted / runs in their delay | ${n(automations.sleeping.posted)} in ${f(automations.sleeping.postSeconds)} s / ${n(automations.sleeping.runs)} of ${n(automations.sleeping.target)} after ${f(automations.sleeping.startSeconds)} s${automations.sleeping.complete ? '' : ` (time allowed ran out: ${n(automations.sleeping.started)} started, ${n(automations.sleeping.unstarted)} not started yet)`} | 10,000 |
| Process RSS before → after (peak) | ${f(automations.sleeping.rssBeforeMiB, 0)} → ${f(automations.sleeping.rssAfterMiB, 0)} MiB (${f(automations.sleeping.rssPeakMiB, 0)}) | flat |
| RSS per 1,000 sleeping runs | **${f(automations.sleeping.rssPerThousandMiB, 2)} MiB** | flat |
| V8 heap before → after, per 1,000 sleeping runs | ${f(automations.sleeping.heapBeforeMiB, 0)} → ${f(automations.sleeping.heapAfterMiB, 0)} MiB, ${f(automations.sleeping.heapPerThousandMiB, 2)} MiB | |
| Delay 0 s: event → send step p50 / p99 (${automations.delayZero.sent} of ${automations.delayZero.events} runs) | ${f(automations.delayZero.p50, 0)} / **${f(automations.delayZero.p99, 0)} ms** | p99 < 1,000 ms |
| Delay 0 s: slowest | ${f(automations.delayZero.max, 0)} ms | |
| Delay 0 s: of it, event → the delay step begun (dispatch, the run's start) p50 / p99 | ${f(automations.delayZero.toDelayP50, 0)} / ${f(automations.delayZero.toDelayP99, 0)} ms | |
`;
}

/**
 * The automations phase of `npm run bench` (issue 17; BENCH_ONLY=automations): POST /events beside
 * the baseline, one automation (a one-day delay) started per request, a new event id and a new
 * contact each time. Then, each on a fresh service, SLEEPING_RUNS runs asleep in a delay with the
 * process's memory before and after, and a delay of 0 s timed to its send step.
 */
export const automationsPhase: Phase<'automations'> = {
  name: 'automations',
  async run({ log, base, startService, measureBaseline }) {
    const service = await startService('bench_service_events');
    const org = await automationsOrg(service, 'Bench events', SINGLE_CONCURRENCY);
    const automationId = await createAutomation(org, 'Bench signed up', EVENT_BODY.name, [{ type: 'delay', duration: 'P1D' }]);
    const nearBaseline = await measureBaseline('bench_baseline_events');
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
    const sleepService = await startService('bench_service_automations');
    const sleepOrg = await automationsOrg(sleepService, 'Bench automations', SINGLE_CONCURRENCY);
    const sleeping = await benchSleepingRuns(sleepService, sleepOrg, log, {
      runs: SLEEPING_RUNS,
      warmup: SLEEPING_WARMUP,
      concurrency: SINGLE_CONCURRENCY,
      seconds: SLEEPING_SECONDS,
    });
    await sleepService.stop();
    // Its own service: runs the dispatcher has not started yet would be ahead of these in its outbox.
    const delayService = await startService('bench_service_delay_zero');
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
  },
  section: automationsSection,
};
