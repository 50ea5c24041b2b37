/**
 * BENCHMARKS.md's first section (bench/sends.ts): the accept rows measured in rounds with their
 * yardsticks, the goals as same-run ratios, and the relay's and the audience's rows when they were
 * measured (bench/relay.ts, bench/audience.ts).
 */
import { audienceNote, audienceRow } from './audience';
import { f, loadRow, SECONDS, SINGLE_CONCURRENCY, type Measured } from './phase';
import { relayGoal, relayNote, relayRows } from './relay';
import { goalRow, GOALS_HEADER, ROUND_SECONDS, ROUNDS, ROUNDS_HEADER, roundsRow, total, type Round } from './rounds';
import { TEMPLATES } from './sends-templates';

/** BENCH_BATCH_CONCURRENCY: POST /emails/batch requests (of 100 messages) at once. */
export const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY || 4);
/** Rounds of the template comparison (four bodies a round), and each load's length: together as long as one ordinary phase. */
export const TEMPLATE_ROUNDS = 4;
export const TEMPLATE_ROUND_SECONDS = SECONDS / TEMPLATE_ROUNDS;

/** A row measured in turn with its yardstick: the same rounds, side by side. */
export interface Compared {
  row: Round[];
  base: Round[];
}

/** One key mode's service. */
export interface ModeResult {
  /** POST /emails, in turn with the bare route and its one INSERT. */
  single: Compared;
  /** POST /emails/batch (100 items), in turn with the batch baseline. */
  batch: Compared;
  /** Live only: plain, the first template's rendering sent plain, then each template, in turn (empty in test mode). */
  templated: Round[][];
  /** Messages still queued when the service stopped (the engine's backlog). */
  backlog: number;
}

export interface SendsResult {
  live: ModeResult;
  test: ModeResult;
}

const BELOW = 'in turn with the row below';

export function sendsSection({ live, test }: SendsResult, measured: Measured): string {
  const { base, relay, audience } = measured;
  const c = SINGLE_CONCURRENCY;
  const b = BATCH_CONCURRENCY;
  const rows = [
    roundsRow(`Baseline: bare Koa route, one INSERT, ${BELOW} (concurrency ${c})`, live.single.base),
    roundsRow(`POST /emails, live key (concurrency ${c})`, live.single.row),
    roundsRow(`Baseline, ${BELOW} (concurrency ${c})`, test.single.base),
    roundsRow(`POST /emails, test key (concurrency ${c})`, test.single.row),
    roundsRow(
      `Batch baseline: a 100-item JSON array, one INSERT of 100 rows as wide as a message with its recipient and event, ${BELOW} (concurrency ${b})`,
      live.batch.base,
    ),
    roundsRow(`POST /emails/batch, 100 items, live key (concurrency ${b})`, live.batch.row),
    roundsRow(`Batch baseline, ${BELOW} (concurrency ${b})`, test.batch.base),
    roundsRow(`POST /emails/batch, 100 items, test key (concurrency ${b})`, test.batch.row),
    roundsRow(`POST /emails, live key, in turn with the three rows below (concurrency ${c})`, live.templated[0]),
    roundsRow(
      `POST /emails, live key, the first template's rendered subject, html and text sent plain (concurrency ${c})`,
      live.templated[1],
    ),
    ...TEMPLATES.map((t, i) => roundsRow(`POST /emails with a template: ${t.label}, live key (concurrency ${c})`, live.templated[i + 2])),
    ...(relay ? relayRows(relay) : []),
  ];
  const goals = [
    goalRow('Live single sends / the single baseline', live.single.row, live.single.base, 0.75),
    goalRow('Live batches / the batch baseline', live.batch.row, live.batch.base, 0.6),
    goalRow('Test-key single sends / the single baseline', test.single.row, test.single.base, 0.6),
    ...(relay ? [relayGoal(relay)] : []),
    ...TEMPLATES.map((t, i) => goalRow(`Template (${t.label}) / plain live single sends`, live.templated[i + 2], live.templated[0], 0.8)),
  ];
  const others = [
    `| Scenario | Requests/s | Accepted messages/s | p50 ms | p99 ms | Requests | Errors |`,
    `|---|---|---|---|---|---|---|`,
    loadRow(`Baseline: bare Koa route, one INSERT, the run's first (concurrency ${c})`, base, base.rps),
    ...(audience ? [audienceRow(audience)] : []),
  ];
  const firstError = [live.single, live.batch, test.single, test.batch]
    .flatMap(({ row, base: yardstick }) => [row, yardstick])
    .map((rounds) => total(rounds).firstError)
    .find((e) => e);
  const notes = [
    `- Each comparison ran ${ROUNDS} rounds of ${f(ROUND_SECONDS, 0)} s a side (templates: ${TEMPLATE_ROUNDS} rounds of ${f(TEMPLATE_ROUND_SECONDS, 0)} s), after a discarded warm-up of each side; each round one side later. A ratio is taken per round and the goals are judged on the median; the range is over the rounds.`,
    `- CPU per message is user + system time of the process that served the load (the service, or the baseline's own process) and of PostgreSQL's processes, while the load's clients ran, over the messages they got accepted. PostgreSQL's CPU is the whole server's, so background work of a service during its yardstick's rounds (test-key delivery) counts toward the yardstick's. The machine has two cores and other work runs on it: absolute rates move by half or more between runs, and even between rounds seconds apart, so read CPU per message and same-run ratios, not rates of different runs. The inverse CPU ratio (the yardstick's CPU per message over the row's) is shown beside the goals.`,
    ...(relay ? [relayNote(relay)] : []),
    ...(audience ? [audienceNote(audience, base)] : []),
    `- Still queued when each run ended (the engine's backlog): live ${live.backlog}, test ${test.backlog}.`,
    ...(firstError ? [`- First error seen: ${firstError}`] : []),
  ];
  return `${ROUNDS_HEADER}
${rows.join('\n')}

${GOALS_HEADER}
${goals.join('\n')}

${notes.join('\n')}

${others.join('\n')}

Every request runs the whole acceptance path: validation, then the store statement, which
authenticates the key, charges its rate window, checks the sender domain and the suppression list,
and stores the message with its recipients and \`queued\` events in the outbox, committed before
the answer. Concurrent single sends share one such statement (group commit); a batch has its own.
The outbox starts the messages in SendBatch runs of up to 100 (a DBOS queue entry each) as the engine's queue
has room, in the same process and during the load. Live mail leaves through a real SMTP server on
loopback (it discards) at the platform send rate (12/s, the spec's worker send rate), so during a
burst the live backlog waits in the outbox and drains afterwards. Test-key mail is not rate
limited: its workflows run during the burst and compete for the same two cores and PostgreSQL
(their CPU counts in the test rows' CPU per message). Where a goal is missed, docs/performance.md
has the profile and what was tried. See "What limits throughput" in docs/architecture.md.
`;
}
