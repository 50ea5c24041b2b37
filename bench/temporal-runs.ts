/**
 * The Temporal phase's automation runs (bench/temporal.ts): runs of `[update_contact]` started by
 * POST /events and completed per second, on whichever engine the service runs.
 */
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { automationsOrg, createAutomation } from './automations-org';
import { postEvents } from './automations-poster';
import type { CpuMeter, CpuUse } from './temporal-cpu';

/** Automation runs measured per engine (after a discarded warm-up of RUNS_WARMUP). */
export const RUNS = Number(process.env.BENCH_TEMPORAL_RUNS || 2000);
export const RUNS_WARMUP = 200;

/** Runs of `[update_contact]` started by POST /events, from the first run's creation to the last one's finish. */
export interface RunsResult {
  runs: number;
  completed: number;
  /** First run created → last run finished (database times). */
  seconds: number;
  perSecond: number;
  /** First run created → last run created: how fast POST /events let them in. */
  postSeconds: number;
  postErrors: number;
  /** From the measured events' first post until the last run finished. */
  cpu: CpuUse;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Automation runs per second: an automation whose only step is update_contact (so each run starts
 * on the engine, takes a step and finishes), RUNS events posted from a separate process at
 * `concurrency`, a new contact each, after RUNS_WARMUP discarded; timed in the database from the
 * first measured run's created_at to the last one's finished_at.
 */
export async function benchRuns(service: Service, log: Logger, concurrency: number, cpu: CpuMeter): Promise<RunsResult> {
  const org = await automationsOrg(service, 'Bench runs', concurrency);
  const automationId = await createAutomation(org, 'Bench run through', 'run_through', [
    { type: 'update_contact', properties: { welcomed: true } },
  ]);
  const sql = service.db.orm.em.fork().getConnection();
  const stats = async (prefix: string) => {
    const [row] = await sql.execute<{ runs: number; completed: number; seconds: number | null; post_seconds: number | null }[]>(
      `select count(*)::int as runs,
              (count(*) filter (where status = 'completed'))::int as completed,
              extract(epoch from max(finished_at) - min(created_at))::float8 as seconds,
              extract(epoch from max(created_at) - min(created_at))::float8 as post_seconds
         from automation_runs where automation_id = ? and email like ?`,
      [automationId, `${prefix}-%`],
    );
    return row;
  };
  const post = async (prefix: string, events: number) => {
    const r = await postEvents({ url: service.url, tokens: org.tokens, name: 'run_through', prefix, events, concurrency });
    if (r.errors) log.warn({ errors: r.errors, firstError: r.firstError }, 'temporal: events refused');
    const deadline = Date.now() + 10 * 60_000;
    for (;;) {
      const s = await stats(prefix);
      if (s.runs >= r.posted && s.completed >= s.runs) return { ...s, postErrors: r.errors };
      if (Date.now() > deadline) {
        log.warn(s, 'temporal: automation runs not all completed in 10 minutes');
        return { ...s, postErrors: r.errors };
      }
      await sleep(100);
    }
  };
  log.info(
    { runs: RUNS, warmup: RUNS_WARMUP, engine: service.engine.name },
    'temporal: automation runs (update_contact), warm-up then measured',
  );
  await post('warm', RUNS_WARMUP);
  const before = cpu.snapshot();
  const s = await post('run', RUNS);
  const used = cpu.since(before);
  const seconds = Number(s.seconds ?? NaN);
  return {
    runs: s.runs,
    completed: s.completed,
    seconds,
    perSecond: s.completed / seconds,
    postSeconds: Number(s.post_seconds ?? NaN),
    postErrors: s.postErrors,
    cpu: used,
  };
}
