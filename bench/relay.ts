/**
 * The relay phase of `npm run bench` (BENCH_ONLY=relay): messages per second through the service's
 * SMTP relay on one connection and on ten (STARTTLS, one key per connection; bench/smtp-load.ts).
 * It has no section of its own: its rows and note are in BENCHMARKS.md's first table (bench/sends.ts).
 */
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, loadRow, MESSAGE, smtpLoad, type LoadResult, type Phase } from './phase';

export interface RelayResult {
  one: LoadResult;
  ten: LoadResult;
}

/** The relay's rows of the first table. */
export function relayRows(r: RelayResult): string[] {
  return [
    loadRow('SMTP relay, 1 connection (STARTTLS, one message per transaction)', r.one, r.one.rps),
    loadRow('SMTP relay, 10 connections (STARTTLS, one key each)', r.ten, r.ten.rps),
  ];
}

/** The relay's note under the first table, against live single sends over HTTP. */
export function relayNote(r: RelayResult, single: LoadResult): string {
  return `- The SMTP relay accepts **${f(r.one.rps, 0)}** messages per second on one connection and **${f(r.ten.rps, 0)}** on ten (${f((r.ten.rps / single.rps) * 100, 0)}% of live single sends over HTTP); each message is one \`POST /emails\` through the same store statement, after MAIL FROM's domain check, RCPT and DATA on the connection.`;
}

export const relayPhase: Phase<'relay'> = {
  name: 'relay',
  async run({ log, startService }) {
    const service = await startService('bench_service_relay');
    const org = await benchOrganization(service.db.orm, 'Bench relay');
    await createDomain(service.db.orm, org.id, 'bench.test', { verified: true, warmup: false });
    const tokens: string[] = [];
    for (let i = 0; i < 10; i++)
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `relay-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
    const port = service.relay!.port;
    log.info('SMTP relay, 1 connection');
    await smtpLoad(port, tokens, MESSAGE, 1); // warm-up run discarded
    const one = await smtpLoad(port, tokens, MESSAGE, 1);
    log.info('SMTP relay, 10 connections');
    await smtpLoad(port, tokens, MESSAGE, 10);
    const ten = await smtpLoad(port, tokens, MESSAGE, 10);
    await service.stop();
    return { one, ten };
  },
  section: () => '',
};
