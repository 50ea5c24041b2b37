/**
 * The sends phase of `npm run bench` (BENCH_ONLY=sends): POST /emails and POST /emails/batch, each
 * measured in alternating rounds with its yardstick (bench/rounds.ts): single sends with the bare
 * route and its one INSERT, batches with the batch baseline (bench/baseline.ts), in a process of
 * its own; with a live key (and single sends with templates, in turn with plain ones) and with a
 * test key, each mode on a service of its own. Its section (bench/sends-section.ts) is
 * BENCHMARKS.md's first table and the goals, which also show the relay's and the audience's rows.
 *
 * Parts, for iterating on one path: BENCH_ONLY=live-single, test-single, live-batch, test-batch, or
 * template (live single sends plain and with templates).
 */
import { createDomain, createKey } from '../core/provisioning';
import type { BaselineProcess } from './baseline';
import { benchOrganization } from './org';
import { load, MESSAGE, SINGLE_CONCURRENCY, type BenchContext, type Phase } from './phase';
import { inTurn, median, ownCpu, processCpu, rateRatios, cpuRatios, ROUND_SECONDS, ROUNDS, type Round, type Side } from './rounds';
import { BATCH_CONCURRENCY, sendsSection, TEMPLATE_ROUND_SECONDS, TEMPLATE_ROUNDS, type Compared, type ModeResult } from './sends-section';
import { publishTemplates, TEMPLATE_BODIES } from './sends-templates';

export type { Compared, ModeResult, SendsResult } from './sends-section';

const BATCH = 100;

const PARTS = ['live-single', 'test-single', 'live-batch', 'test-batch', 'template'] as const;
type Part = (typeof PARTS)[number];

/** A load of `body` at `concurrency` on `url`, served by the process whose CPU `cpu` reads. */
function side(
  name: string,
  url: string,
  tokens: string[],
  body: unknown,
  concurrency: number,
  perRequest: number,
  cpu: () => number,
): Side {
  return { name, perRequest, cpu, load: (seconds, onStart) => load(url, tokens, body, concurrency, seconds, onStart) };
}

/** The logged summary of a comparison: medians of the rounds. */
const summary = ({ row, base }: Compared) => ({
  messagesPerSecond: median(row.map((r) => r.messages / r.seconds)),
  baseMessagesPerSecond: median(base.map((r) => r.messages / r.seconds)),
  ratio: median(rateRatios(row, base)),
  cpuRatio: median(cpuRatios(row, base)),
  errors: row.reduce((s, r) => s + r.errors, 0),
  firstError: row.find((r) => r.firstError)?.firstError,
});

/**
 * One mode's service: single sends, (live) the templates in turn with plain sends, then batches.
 * With a part (BENCH_ONLY), measures that part only, logs it and returns null.
 */
async function sendsOf(ctx: BenchContext, baseline: BaselineProcess, mode: 'live' | 'test', part?: Part): Promise<ModeResult | null> {
  const { log, postgresCpu } = ctx;
  const service = await ctx.startService(`bench_service_${mode}`);
  const org = await benchOrganization(service.db.orm, 'Bench');
  await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
  // Keys at the highest cap (1000/s), used in turn: the per-key rate limit is charged on every
  // request, as in production, but must not be what the benchmark measures (a batch costs 100).
  const tokens: string[] = [];
  for (let i = 0; i < SINGLE_CONCURRENCY; i++)
    tokens.push((await createKey(service.db.orm, org.id, { name: `bench-${i}`, permission: 'send', mode, rateLimit: 1000 })).token);
  const api = `${service.url}/api/v1`;
  const baseCpu = processCpu(baseline.pid);
  const pair = async (label: string, row: Side, base: Side): Promise<Compared> => {
    const [r, b] = await inTurn(log, label, [row, base], postgresCpu, ROUNDS, ROUND_SECONDS);
    const compared = { row: r, base: b };
    log.info({ mode, ...summary(compared) }, `${label} measured`);
    return compared;
  };
  const done = async <T>(result: T) => {
    await service.stop();
    return result;
  };

  const none: Compared = { row: [], base: [] };
  let single = none;
  if (!part || part.endsWith('-single'))
    single = await pair(
      `POST /emails (${mode} key) and the baseline`,
      side('POST /emails', `${api}/emails`, tokens, MESSAGE, SINGLE_CONCURRENCY, 1, ownCpu),
      side('baseline', baseline.url, ['none'], MESSAGE, SINGLE_CONCURRENCY, 1, baseCpu),
    );
  if (part?.endsWith('-single')) return done(null);

  let templated: Round[][] = [];
  if (mode === 'live' && (!part || part === 'template')) {
    await publishTemplates(service.url, org.id, service.db.orm);
    const bodies = TEMPLATE_BODIES.map((body, i) => side(`body ${i}`, `${api}/emails`, tokens, body, SINGLE_CONCURRENCY, 1, ownCpu));
    templated = await inTurn(log, 'POST /emails plain and with templates', bodies, postgresCpu, TEMPLATE_ROUNDS, TEMPLATE_ROUND_SECONDS);
    const rates = templated.map((rounds) => median(rounds.map((r) => r.messages / r.seconds)));
    log.info({ rates, ratios: rates.map((r) => r / rates[0]) }, 'template sends measured');
  }
  if (part === 'template') return done(null);

  const batchBody = Array.from({ length: BATCH }, () => MESSAGE);
  const batch = await pair(
    `POST /emails/batch (${mode} key, ${BATCH} items) and the batch baseline`,
    side('POST /emails/batch', `${api}/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY, BATCH, ownCpu),
    side('batch baseline', baseline.batchUrl, ['none'], batchBody, BATCH_CONCURRENCY, BATCH, baseCpu),
  );
  if (part) return done(null);

  const [{ n: backlog }] = await service.db.orm.em
    .fork()
    .getConnection()
    .execute(`select count(*)::int as n from emails where status = 'queued'`);
  return done({ single, batch, templated, backlog: backlog as number });
}

export const sendsPhase: Phase<'sends'> = {
  name: 'sends',
  parts: PARTS,
  async run(ctx, part) {
    const p = part as Part | undefined;
    const baseline = await ctx.spawnBaseline('bench_baseline_sends');
    try {
      // A part measures one mode only: live-*, template on the live service, test-* on the test one.
      const live = p?.startsWith('test-') ? null : await sendsOf(ctx, baseline, 'live', p);
      const test = p?.startsWith('live-') || p === 'template' ? null : await sendsOf(ctx, baseline, 'test', p);
      return live && test ? { live, test } : null;
    } finally {
      await baseline.stop();
    }
  },
  section: sendsSection,
};
