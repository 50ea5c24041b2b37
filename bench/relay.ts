/**
 * The relay phase of `npm run bench` (BENCH_ONLY=relay): messages per second through the service's
 * SMTP relay on one connection and on ten (STARTTLS, one key per connection; bench/smtp-load.ts),
 * ten connections measured in alternating rounds with live single sends over HTTP on the same
 * service (bench/rounds.ts), which the relay's goal is a share of.
 * It has no section of its own: its rows and goal are in BENCHMARKS.md's first tables (bench/sends-section.ts).
 */
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, load, MESSAGE, SINGLE_CONCURRENCY, smtpLoad, type Phase } from './phase';
import { goalRow, inTurn, median, once, ownCpu, rateRatios, roundsRow, ROUND_SECONDS, ROUNDS, type Round, type Side } from './rounds';

export interface RelayResult {
  /** One connection, measured once. */
  one: Round[];
  /** Ten connections, in turn with `http`. */
  ten: Round[];
  /** POST /emails with a live key on the relay's service (concurrency as the sends'). */
  http: Round[];
}

/** The relay's rows of the first table. */
export function relayRows(r: RelayResult): string[] {
  return [
    roundsRow(`POST /emails, live key, on the relay's service in turn with the row below (concurrency ${SINGLE_CONCURRENCY})`, r.http),
    roundsRow('SMTP relay, 10 connections (STARTTLS, one key each)', r.ten),
    roundsRow('SMTP relay, 1 connection (STARTTLS, one message per transaction)', r.one),
  ];
}

/** The relay's goal: ten connections against live single sends over HTTP in the same rounds. */
export const relayGoal = (r: RelayResult): string =>
  goalRow('SMTP relay on 10 connections / live single sends over HTTP', r.ten, r.http, 0.4);

/** Median CPU milliseconds a message cost the load generator itself (NaN when it did not say). */
const clientMs = (rounds: Round[]) => median(rounds.map((r) => ((r.clientCpuSeconds ?? NaN) * 1000) / r.messages));

/** The relay's note under the first table. */
export function relayNote(r: RelayResult): string {
  const smtp = clientMs(r.ten);
  const http = clientMs(r.http);
  const clients = Number.isNaN(smtp + http)
    ? ''
    : ` The load generators, on the same cores, cost ${f(smtp, 2)} ms a message themselves (nodemailer over TLS) against ${f(http, 2)} ms (the HTTP client): see docs/performance.md.`;
  return `- Each relayed message is one \`POST /emails\` through the same store statement, after MAIL FROM's domain check, RCPT and DATA on the connection.${clients}`;
}

export const relayPhase: Phase<'relay'> = {
  name: 'relay',
  async run({ log, startService, postgresCpu }) {
    const service = await startService('bench_service_relay');
    const org = await benchOrganization(service.db.orm, 'Bench relay');
    await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
    const tokens: string[] = [];
    for (let i = 0; i < 10; i++)
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `relay-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
    const port = service.relay!.port;
    const smtp = (connections: number): Side => ({
      name: `SMTP relay, ${connections} connection(s)`,
      perRequest: 1,
      cpu: ownCpu,
      load: (seconds, onStart) => smtpLoad(port, tokens, MESSAGE, connections, seconds, onStart),
    });
    const http: Side = {
      name: 'POST /emails',
      perRequest: 1,
      cpu: ownCpu,
      load: (seconds, onStart) => load(`${service.url}/api/v1/emails`, tokens, MESSAGE, SINGLE_CONCURRENCY, seconds, onStart),
    };
    const [ten, overHttp] = await inTurn(
      log,
      'SMTP relay (10 connections) and POST /emails',
      [smtp(10), http],
      postgresCpu,
      ROUNDS,
      ROUND_SECONDS,
    );
    // What the load generators themselves cost a message: nodemailer's SMTP and TLS against an HTTP client, on the same cores.
    log.info(
      { ratio: median(rateRatios(ten, overHttp)), clientCpuMsPerMessage: { smtp: clientMs(ten), http: clientMs(overHttp) } },
      'SMTP relay on 10 connections measured',
    );
    log.info('SMTP relay, 1 connection');
    const one = await once(smtp(1), postgresCpu, ROUND_SECONDS * 2);
    await service.stop();
    return { one, ten, http: overHttp };
  },
  section: () => '',
};
