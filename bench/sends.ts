/**
 * The sends phase of `npm run bench` (BENCH_ONLY=sends): POST /emails and POST /emails/batch beside
 * the baseline, with a live key (and single sends with templates, in turn with plain ones) and
 * with a test key, each mode on a service of its own. Its section is BENCHMARKS.md's first table,
 * which also shows the rows of the relay and audience phases (bench/relay.ts, bench/audience.ts).
 *
 * Parts, for iterating on one path: BENCH_ONLY=live-single, test-single, live-batch, test-batch, or
 * template (live single sends plain and with templates).
 */
import type { Logger } from 'pino';
import { createDomain, createKey } from '../core/provisioning';
import { compileTemplate, renderTemplate } from '../core/templates/render';
import { parseVariables } from '../core/templates/variables';
import type { Orm } from '../db/orm';
import { benchOrganization } from './org';
import { audienceRow, audienceNote } from './audience';
import { relayRows, relayNote } from './relay';
import {
  f,
  load,
  loadRow,
  MESSAGE,
  SECONDS,
  SINGLE_CONCURRENCY,
  type BenchContext,
  type LoadResult,
  type Measured,
  type Phase,
} from './phase';

/** BENCH_BATCH_CONCURRENCY: POST /emails/batch requests (of 100 messages) at once. */
const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY || 4);
/** Rounds of the interleaved comparison of plain and templated sends. */
const INTERLEAVED_ROUNDS = 4;
/** Each round's phase: the rounds together last as long as one ordinary phase. */
const ROUND_SECONDS = SECONDS / INTERLEAVED_ROUNDS;

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

/** One key mode's service. */
export interface ModeResult {
  single: LoadResult;
  batch: LoadResult;
  /** Live only: plain, the first template's rendering sent plain, then each template (empty in test mode). */
  templated: LoadResult[];
  /** Messages still queued when the service stopped (the engine's backlog). */
  backlog: number;
}

export interface SendsResult {
  live: ModeResult;
  test: ModeResult;
}

const PARTS = ['live-single', 'test-single', 'live-batch', 'test-batch', 'template'] as const;
type Part = (typeof PARTS)[number];

/**
 * Compares request bodies on one service in alternating rounds (A B C, B C A, C A B …, after one
 * discarded warm-up each): on a noisy machine the rate drifts by a third
 * between phases minutes apart, so a ratio of two phases measured in turn says little.
 */
async function interleaved(log: Logger, url: string, tokens: string[], bodies: unknown[]): Promise<LoadResult[]> {
  const sum = bodies.map((): LoadResult => ({ requests: 0, errors: 0, firstError: '', seconds: 0, rps: 0, p50: 0, p99: 0 }));
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
}

/** Publishes the templates the template phases send with, through the API. */
async function publishTemplates(url: string, orgId: string, orm: Orm): Promise<void> {
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
}

/**
 * One mode's service: single sends, (live) the templates in turn with plain sends, then batches.
 * With a part (BENCH_ONLY), measures that part only, logs it and returns null.
 */
async function sendsOf(ctx: BenchContext, mode: 'live' | 'test', part?: Part): Promise<ModeResult | null> {
  const { log, base } = ctx;
  const service = await ctx.startService(`bench_service_${mode}`);
  const org = await benchOrganization(service.db.orm, 'Bench');
  await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
  // Keys at the highest cap (1000/s), used in turn: the per-key rate limit is charged on every
  // request, as in production, but must not be what the benchmark measures (a batch costs 100).
  const tokens: string[] = [];
  for (let i = 0; i < SINGLE_CONCURRENCY; i++)
    tokens.push((await createKey(service.db.orm, org.id, { name: `bench-${i}`, permission: 'send', mode, rateLimit: 1000 })).token);
  const batchBody = Array.from({ length: 100 }, () => MESSAGE);
  if (part?.endsWith('-batch')) {
    await load(`${service.url}/api/v1/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY);
    const batch = await load(`${service.url}/api/v1/emails/batch`, tokens, batchBody, BATCH_CONCURRENCY);
    log.info({ base: base.rps, batch, messagesPerSecond: batch.rps * 100 }, 'BENCH_ONLY: batches measured');
    await service.stop();
    return null;
  }
  log.info({ mode }, 'POST /emails');
  await load(`${service.url}/api/v1/emails`, tokens, MESSAGE, SINGLE_CONCURRENCY);
  const single = await load(`${service.url}/api/v1/emails`, tokens, MESSAGE, SINGLE_CONCURRENCY);
  let templated: LoadResult[] = [];
  if (mode === 'live' && (!part || part === 'template')) {
    await publishTemplates(service.url, org.id, service.db.orm);
    templated = await interleaved(log, service.url, tokens, [
      MESSAGE,
      RENDERED,
      ...TEMPLATES.map((t) => ({ from: MESSAGE.from, to: MESSAGE.to, template: { slug: t.slug, data: TEMPLATE_DATA } })),
    ]);
  }
  if (part === 'template') {
    log.info(
      { base: base.rps, single: single.rps, templated: templated.map((r) => ({ ...r, ratio: r.rps / templated[0].rps })) },
      'BENCH_ONLY: template sends measured',
    );
    await service.stop();
    return null;
  }
  if (part) {
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
}

/** BENCHMARKS.md's first table and its notes (the relay's and the audience's rows when they were measured). */
function sendsSection({ live, test }: SendsResult, measured: Measured): string {
  const { base, relay, audience } = measured;
  const { single, batch } = live;
  const c = SINGLE_CONCURRENCY;
  const rows = [
    loadRow(`Baseline: bare Koa route, one INSERT (concurrency ${c})`, base, base.rps),
    loadRow(`POST /emails, live key (concurrency ${c})`, single, single.rps),
    loadRow(`POST /emails/batch, 100 items, live key (concurrency ${BATCH_CONCURRENCY})`, batch, batch.rps * 100),
    loadRow(`POST /emails, test key (concurrency ${c})`, test.single, test.single.rps),
    loadRow(`POST /emails/batch, 100 items, test key (concurrency ${BATCH_CONCURRENCY})`, test.batch, test.batch.rps * 100),
    loadRow(`POST /emails, live key, in turn with the three rows below (concurrency ${c})`, live.templated[0], live.templated[0].rps),
    loadRow(
      `POST /emails, live key, the first template's rendered subject, html and text sent plain (concurrency ${c})`,
      live.templated[1],
      live.templated[1].rps,
    ),
    ...TEMPLATES.map((t, i) =>
      loadRow(`POST /emails with a template: ${t.label}, live key (concurrency ${c})`, live.templated[i + 2], live.templated[i + 2].rps),
    ),
    ...(relay ? relayRows(relay) : []),
    ...(audience ? [audienceRow(audience)] : []),
  ];
  const templatedPct = TEMPLATES.map((t, i) => `${f((live.templated[i + 2].rps / live.templated[0].rps) * 100, 0)}% (${t.label})`);
  const notes = [
    `- Live single sends run at **${f((single.rps / base.rps) * 100, 0)}%** of the baseline's request rate (goal ≥ 40%); test-key single sends at ${f((test.single.rps / base.rps) * 100, 0)}%.`,
    `- Single sends with a template run at **${templatedPct.join(', ')}** of plain live single sends measured in turn with them (${INTERLEAVED_ROUNDS} rounds of ${f(ROUND_SECONDS, 0)} s each, goal ≥ 80%); the same content sent plain runs at ${f((live.templated[1].rps / live.templated[0].rps) * 100, 0)}%: the gap between that row and a templated one is what templating costs, the rest is the larger message.`,
    `- Live batches accept **${f(batch.rps * 100, 0)}** messages per second (goal ≥ 2,000); test-key batches ${f(test.batch.rps * 100, 0)}.`,
    ...(relay ? [relayNote(relay, single)] : []),
    ...(audience ? [audienceNote(audience, base)] : []),
    `- Still queued when each run ended (the engine's backlog): live ${live.backlog}, test ${test.backlog}.`,
    ...(single.errors + batch.errors + base.errors > 0
      ? [`- First error seen: ${single.firstError || batch.firstError || base.firstError}`]
      : []),
  ];
  return `| Scenario | Requests/s | Accepted messages/s | p50 ms | p99 ms | Requests | Errors |
|---|---|---|---|---|---|---|
${rows.join('\n')}

${notes.join('\n')}

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
`;
}

export const sendsPhase: Phase<'sends'> = {
  name: 'sends',
  parts: PARTS,
  async run(ctx, part) {
    const p = part as Part | undefined;
    // A part measures one mode only: live-*, template on the live service, test-* on the test one.
    const live = p?.startsWith('test-') ? null : await sendsOf(ctx, 'live', p);
    const test = p?.startsWith('live-') || p === 'template' ? null : await sendsOf(ctx, 'test', p);
    return live && test ? { live, test } : null;
  },
  section: sendsSection,
};
