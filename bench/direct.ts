/**
 * The direct-delivery phase of `npm run bench` (BENCH_ONLY=direct, issue 40): messages handed
 * straight to recipients' MX, ten loopback sites each with its own, against what a pooled
 * nodemailer client gets from one counting sink in the same run; and whether any site saw more
 * connections at once, or more messages on one connection, than its limits allow.
 */
import type { Logger } from 'pino';
import { createDirectMailer } from '../activities/delivery/direct-mailer';
import type { StsPolicies } from '../activities/delivery/mta-sts-source';
import type { Mailer, OutgoingMessage } from '../activities/mailer';
import { SendGate } from '../activities/send-gate';
import { systemClock } from '../core/clock';
import { DEFAULT_SHAPING, siteFor } from '../core/delivery/shaping';
import { startSites, type Sites } from './direct-sites';
import { smtpCeiling } from './drain';
import { f, n, type Phase } from './phase';
import { countingSink } from './sink';

/** One site as the measured rounds left it. */
export interface DirectSite {
  domain: string;
  /** Of all measured rounds. */
  messages: number;
  maxConnections: number;
  maxPerConnection: number;
  /** Its limits (the shaping's default row: no named site matches .bench). */
  connectionCap: number;
  perConnectionCap: number;
}

export interface DirectPhaseResult {
  /** Messages of each round. */
  messages: number;
  sites: number;
  /** Sends in flight at once (the delivery pass's send gate). */
  inFlight: number;
  /** Direct rounds' messages/s, each between two ceiling rounds. */
  rounds: number[];
  /** The mean of the rounds. */
  perSecond: number;
  /** Of all direct rounds. */
  seconds: number;
  accepted: number;
  /** Recipients refused or deferred, and the first such answer. */
  refused: number;
  firstRefusal: string;
  /** Connections of the ceiling's pooled client: as many as the direct mailer may hold at once. */
  ceilingConnections: number;
  /** Ceiling rounds' messages/s: one before each direct round and one after the last. */
  ceilingRounds: number[];
  /**
   * The ceiling while each direct round ran (the mean of the ceiling rounds either side of it),
   * averaged over the direct rounds: drift in the machine's speed counts against both sides alike.
   */
  ceilingPerSecond: number;
  perSite: DirectSite[];
}

/** Each measured round: messages round-robin over the sites. */
const MESSAGES = 5_000;
/**
 * Measured direct rounds, interleaved with ceiling rounds: one round is a few seconds, so a
 * busy moment of the machine would otherwise decide the ratio.
 */
const ROUNDS = 3;
const SITES = 10;
/** As the delivery pass's send gate bounds SMTP transactions in flight. */
const IN_FLIGHT = 64;

const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
/** The ceiling around each direct round: the mean of the ceiling rounds before and after it. */
const around = (ceilings: number[]) => ceilings.slice(1).map((c, k) => (ceilings[k] + c) / 2);

/** No MTA-STS for .bench: every domain answers "no policy", and nothing is reported. */
const noPolicies: StsPolicies = {
  policyFor: async () => null,
  refresh: async () => null,
  report: () => undefined,
  flush: async () => undefined,
};

function message(i: number, round: string): OutgoingMessage {
  const to = `r${i}@site${i % SITES}.bench`;
  return {
    messageId: `<${round}-${i}@bench.test>`,
    from: { name: 'Bench', address: 'bench@bench.test' },
    to: [{ name: null, address: to }],
    cc: [],
    bcc: [],
    replyTo: null,
    subject: 'Direct',
    html: '<p>hello</p>',
    text: 'hello',
    headers: {},
    attachments: [],
    envelope: { from: 'bench@bench.test', to: [to] },
    date: new Date(),
  };
}

function directMailer(sites: Sites, log: Logger): Mailer {
  return createDirectMailer({
    dns: sites.resolver,
    port: sites.port,
    allowPrivateMx: true,
    heloName: 'bench.test',
    sourceIps: [],
    shaping: DEFAULT_SHAPING,
    policies: noPolicies,
    clock: systemClock,
    log,
  });
}

/** `count` messages through a fresh mailer, `IN_FLIGHT` at once; timed from the first send until every one settled. */
async function deliver(sites: Sites, log: Logger, count: number, round: string) {
  const mailer = directMailer(sites, log);
  const gate = new SendGate(IN_FLIGHT);
  let accepted = 0;
  let refused = 0;
  let firstRefusal = '';
  const refuse = (what: string) => {
    refused += 1;
    firstRefusal ||= what;
  };
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      gate.run(false, async () => {
        try {
          const out = await mailer.send(message(i, round));
          accepted += out.accepted.length;
          for (const r of out.rejected) refuse(`${r.code ?? 'no reply'} ${r.response}`);
        } catch (e) {
          refuse((e as Error).message);
        }
      }),
    ),
  );
  const seconds = (Date.now() - t0) / 1000;
  mailer.close();
  // The next round's mailer starts with no connection, and a site's count of connections at once is never two mailers' sum.
  await sites.quiet();
  return { seconds, accepted, refused, firstRefusal };
}

const pct = (x: number) => `${f(x * 100, 0)}%`;
const list = (xs: number[]) => xs.map((x) => f(x, 0)).join(', ');

/** BENCHMARKS.md's "Direct delivery" section. */
function directSection(d: DirectPhaseResult): string {
  const over = d.perSite.filter((s) => s.maxConnections > s.connectionCap || s.maxPerConnection > s.perConnectionCap);
  const most = Math.max(...d.perSite.map((s) => s.maxConnections));
  const mostCarried = Math.max(...d.perSite.map((s) => s.maxPerConnection));
  const [cap] = d.perSite;
  // Each direct round against the mean of the ceiling rounds either side of it.
  const ratios = around(d.ceilingRounds).map((c, k) => d.rounds[k] / c);
  const refusal = d.firstRefusal ? ` (first: ${d.firstRefusal.replace(/\|/g, '/')})` : '';
  return `## Direct delivery

Rounds of ${n(d.messages)} messages of one recipient each handed straight to recipients' MX by the direct mailer (\`activities/delivery/direct-mailer.ts\`),
round-robin over ${d.sites} loopback sites (site0.bench … site${d.sites - 1}.bench, each its own MX on its own 127.0.0.x, all on one port), found
through a DNS server on loopback; ${d.inFlight} sends in flight at once (the mailer alone: not the outbox, the delivery pass and its policy lookups); the shaping file's default
row as each site's limits (${cap.connectionCap} connections, ${cap.perConnectionCap} messages per connection); no MTA-STS. Each MX is an SMTP server in the bench's
process that only counts. The ceiling: one pooled nodemailer transport with as many connections (${d.ceilingConnections}) filling one such sink with
as many messages. After a discarded round of each, ${d.rounds.length} direct rounds (each through a fresh mailer) alternate with ${d.ceilingRounds.length} ceiling
rounds, and each direct round is compared with the mean of the ceiling rounds either side of it: a round lasts seconds, and alternating spreads
the machine's busy moments over both sides. Each round of either side starts with no connection open.

| Measure | Result | Goal (issue 40) |
|---|---|---|
| Ceiling: pooled nodemailer to one sink, while the direct rounds ran | ${f(d.ceilingPerSecond, 0)} messages/s (rounds: ${list(d.ceilingRounds)}) | |
| Direct delivery to ${d.sites} sites | ${f(d.perSecond, 1)} messages/s (rounds: ${list(d.rounds)}), **${pct(d.perSecond / d.ceilingPerSecond)} of the ceiling** (each round against the ceiling rounds either side: ${ratios.map(pct).join(', ')}); ${n(d.accepted)} accepted, ${n(d.refused)} refused${refusal} | ≥ 70% |
| Most connections at once to one site | ${most} (cap ${cap.connectionCap}) | ≤ the cap |
| Most messages on one connection | ${mostCarried} (cap ${cap.perConnectionCap}) | ≤ the cap |
| Sites whose cap was exceeded | ${over.length ? over.map((s) => s.domain).join(', ') : 'none'} | none |
`;
}

export const directPhase: Phase<'direct'> = {
  name: 'direct',
  async run({ log }) {
    const sites = await startSites(SITES);
    const sink = await countingSink();
    const limits = siteFor(DEFAULT_SHAPING, [sites.sites[0].mx]).limits;
    const ceilingConnections = Math.min(IN_FLIGHT, SITES * limits.connections);
    const mailerLog = log.child({ phase: 'direct' });
    log.info(
      { messages: MESSAGES, connections: ceilingConnections },
      'direct: discarded rounds (pooled nodemailer to one sink; the direct mailer)',
    );
    await smtpCeiling(sink.port, MESSAGES, ceilingConnections);
    // Discarded rounds first: neither side is measured on code the JIT has not optimized yet.
    await deliver(sites, mailerLog, MESSAGES, 'warmup');
    for (const s of sites.sites) s.reset();

    const ceilingRounds: number[] = [];
    const runs: Awaited<ReturnType<typeof deliver>>[] = [];
    for (let k = 0; k < ROUNDS; k++) {
      ceilingRounds.push(await smtpCeiling(sink.port, MESSAGES, ceilingConnections));
      log.info({ round: k + 1, messages: MESSAGES, sites: SITES, inFlight: IN_FLIGHT }, 'direct: a measured round');
      runs.push(await deliver(sites, mailerLog, MESSAGES, `direct${k}`));
    }
    ceilingRounds.push(await smtpCeiling(sink.port, MESSAGES, ceilingConnections));
    const accepted = runs.reduce((sum, r) => sum + r.accepted, 0);
    if (sites.delivered() !== accepted)
      log.warn({ delivered: sites.delivered(), accepted }, 'direct: the sites counted other than the mailer');
    await sink.close();
    await sites.close();
    const seconds = runs.reduce((sum, r) => sum + r.seconds, 0);
    const rounds = runs.map((r) => r.accepted / r.seconds);
    return {
      messages: MESSAGES,
      sites: SITES,
      inFlight: IN_FLIGHT,
      rounds,
      perSecond: mean(rounds),
      seconds,
      accepted,
      refused: runs.reduce((sum, r) => sum + r.refused, 0),
      firstRefusal: runs.find((r) => r.firstRefusal)?.firstRefusal ?? '',
      ceilingConnections,
      ceilingRounds,
      ceilingPerSecond: mean(around(ceilingRounds)),
      perSite: sites.sites.map((s) => {
        const own = siteFor(DEFAULT_SHAPING, [s.mx]).limits;
        return {
          domain: s.domain,
          messages: s.messages,
          maxConnections: s.maxConnections,
          maxPerConnection: s.maxPerConnection,
          connectionCap: own.connections,
          perConnectionCap: own.messagesPerConnection,
        };
      }),
    };
  },
  section: directSection,
};
