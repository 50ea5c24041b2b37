import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import type { Orm } from '../../db/orm';
import { createActivities, type Activities } from '../../activities';
import type { Mailer, OutgoingMessage, SendOutcome } from '../../activities/mailer';
import { createDnsResolver } from '../../core/domains/dns';
import { createReturnPaths } from '../../core/bounces/verp';
import { createSecrets } from '../../core/secrets';
import { createWebhookHttp } from '../../activities/webhook-http';
import { insertSender, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';
import { sleep, waitFor } from '../support/wait';

/**
 * A relay over 8 connections (a pool, as WORKER_CONCURRENCY's default), each transaction answered
 * after 1–3 ms; the Message-IDs in `hold` are never answered (a crash mid-transaction).
 */
class Relay implements Mailer {
  readonly finalDestination = false;
  /** Message-ID of each transaction, in the order handed over. */
  sent: string[] = [];
  hold = new Set<string>();
  private free = 8;
  private queue: (() => void)[] = [];
  async send(m: OutgoingMessage): Promise<SendOutcome> {
    if (this.free === 0) await new Promise<void>((resolve) => this.queue.push(resolve));
    else this.free -= 1;
    this.sent.push(m.messageId);
    if (this.hold.has(m.messageId)) return new Promise(() => undefined);
    await sleep(1 + Math.random() * 2);
    const next = this.queue.shift();
    if (next) next();
    else this.free += 1;
    return { accepted: m.envelope.to.map((a) => a.toLowerCase()), rejected: [] };
  }
  close() {}
}

/** Statements sent to PostgreSQL by this process while `fn` runs, by prepared statement name (or text). */
async function countStatements<T>(fn: () => Promise<T>): Promise<{ result: T; total: number; byName: Map<string, number> }> {
  const byName = new Map<string, number>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const a = args[0] as { name?: string; text?: string } | string;
    const name = typeof a === 'string' ? a.trim().slice(0, 40) : (a.name ?? a.text?.trim().slice(0, 40) ?? '?');
    byName.set(name, (byName.get(name) ?? 0) + 1);
    return query.apply(this, args);
  };
  try {
    const result = await fn();
    return { result, total: [...byName.values()].reduce((a, b) => a + b, 0), byName };
  } finally {
    proto.query = query;
  }
}

/**
 * Issue 43: each message's outcome is durable once the relay answers it, group-committed across the
 * passes of the process, and a pass run again (an engine retry after a crash) hands over only the
 * messages whose outcome is not recorded. Statements per message are counted here.
 */
describe('Activities: outcomes durable per message, group-committed across passes', function () {
  this.timeout(60_000);
  let orm: Orm;
  let owner: EmailOwner;
  let domainName: string;
  let relay: Relay;

  before(async () => {
    orm = await openTestDb('svc_durable_outcomes', 20);
    const s = await insertSender(orm, { domain: { return_path_host: 'rp.example.test' } });
    owner = s.owner;
    domainName = s.domain.name;
  });
  after(async () => orm.close());

  const activities = (mailer: Mailer, sendSlots = 16): Activities =>
    createActivities({
      orm,
      mailer,
      clock: { now: () => new Date() },
      log: pino({ level: 'silent' }),
      dns: createDnsResolver(undefined),
      secrets: createSecrets(randomBytes(32)),
      returnPaths: createReturnPaths(randomBytes(32)),
      webhooks: createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 }),
      sendSlots,
    });

  /** `n` queued live messages, `perMessage` recipients each; their ids in creation order. */
  async function seed(n: number, perMessage = 1): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      orm,
      `with e as (
         insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, text, mode, stream,
                             status, message_id, created_at, updated_at)
         select s.id, $1, $2, $3, 'app@${domainName}',
                to_jsonb(array(select 'r' || s.g || '-' || k || '@example.com' from generate_series(1, $5::int) k)),
                's', 't', 'live', 'transactional', 'queued', '<' || s.id || '@example.test>', now(), now()
           from (select gen_random_uuid() as id, g from generate_series(1, $4::int) g) s
         returning id, to_addresses, created_at
       ), r as (
         insert into recipients (id, email_id, address, field, state)
         select gen_random_uuid(), e.id, a, 'to', 'pending' from e, jsonb_array_elements_text(e.to_addresses) a
       )
       select id from e order by id`,
      [owner.organizationId, owner.apiKeyId, owner.domainId, n, perMessage],
    );
    return rows.map((r) => r.id);
  }

  const statuses = async (ids: string[]) =>
    Object.fromEntries(
      (
        await sql<{ status: string; n: number }>(orm, 'select status, count(*)::int as n from emails where id = any($1) group by status', [
          ids,
        ])
      ).map((r) => [r.status, r.n]),
    );

  it('four passes of 100 at once: every message sent, in few statements per message', async () => {
    relay = new Relay();
    const acts = activities(relay);
    const ids = await seed(400);
    const chunks = [0, 1, 2, 3].map((k) => ids.slice(k * 100, (k + 1) * 100));
    for (const [k, chunk] of chunks.entries()) assert.equal((await acts.claimBatch(`run-${k}`, chunk)).length, 100);
    const { result, total, byName } = await countStatements(() => Promise.all(chunks.map((c) => acts.deliverBatch(c))));
    for (const r of result) assert.deepEqual(r, { retry: [], failed: [] });
    assert.deepEqual(await statuses(ids), { sent: 400 });
    assert.equal(relay.sent.length, 400);
    const perMessage = total / ids.length;
    if (process.env.TEST_REPORT)
      process.stdout.write(`      (${total} statements for 400 messages, ${perMessage.toFixed(3)} each: ${JSON.stringify([...byName])})\n`);
    // Per pass: the read, the in-flight mark, the sender identities; the outcomes of all passes
    // group-committed (a flush every few ms, many messages each).
    assert.ok(perMessage <= 0.25, `${perMessage} statements per message`);
  });

  it('a pass run again after a crash hands over only the messages whose outcome is not recorded', async () => {
    relay = new Relay();
    const ids = await seed(100);
    const held = new Set([ids[3], ids[40], ids[77]].map((id) => `<${id}@example.test>`));
    relay.hold = held;
    const first = activities(relay);
    assert.equal((await first.claimBatch('run-crash', ids)).length, 100);
    // The first pass never ends: three of its transactions are never answered.
    void first.deliverBatch(ids);
    await waitFor(async () => (await statuses(ids)).sent === 97, '97 outcomes recorded while the pass is still running', 20_000, 20);

    // The process starts again: a new pass over the same messages (the engine's retry of the step).
    const again = new Relay();
    const second = activities(again);
    assert.deepEqual(await second.deliverBatch(ids), { retry: [], failed: [] });
    assert.deepEqual(new Set(again.sent), held, 'only the three whose outcome was not recorded');
    assert.equal(again.sent.length, 3);
    assert.deepEqual(await statuses(ids), { sent: 100 });
    const events = await sql<{ n: number }>(orm, `select count(*)::int as n from email_events where email_id = any($1) and type = 'sent'`, [
      ids,
    ]);
    assert.equal(events[0].n, 100, 'one sent event each');
  });

  it('a message with several recipients (one transaction each): a re-run sends only to the recipients not recorded', async () => {
    const ids = await seed(1, 3);
    const recipients = await sql<{ address: string }>(orm, 'select address from recipients where email_id = $1 order by address', [ids[0]]);
    // Its second transaction is never answered; the first is recorded meanwhile.
    let n = 0;
    const stuck: Mailer = {
      finalDestination: false,
      send: async (m) => (++n === 2 ? new Promise(() => undefined) : { accepted: m.envelope.to, rejected: [] }),
      close() {},
    };
    const first = activities(stuck);
    await first.claimBatch('run-multi', ids);
    void first.deliverBatch(ids);
    await waitFor(
      async () => (await sql(orm, `select 1 from recipients where email_id = $1 and state = 'sent'`, [ids[0]])).length === 1,
      'the first recipient recorded',
      10_000,
      20,
    );
    const again = new Relay();
    await activities(again).deliverBatch(ids);
    assert.equal(again.sent.length, 2, 'the two recipients not recorded');
    assert.deepEqual(await statuses(ids), { sent: 1 });
    const states = await sql<{ state: string }>(orm, 'select state from recipients where email_id = $1', [ids[0]]);
    assert.deepEqual(
      states.map((s) => s.state),
      ['sent', 'sent', 'sent'],
    );
    assert.equal(recipients.length, 3);
  });
});
