import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { closeUnconfirmedBatch, countUnconfirmed } from '../../db/sql/unconfirmed';
import { insertEmail, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';
import { Gate } from '../support/db-fixtures-rz';

describe('db/sql/unconfirmed: live mail still at `sent` past a cutoff, counted or closed', function () {
  let orm: Orm;
  let a: EmailOwner;
  let b: EmailOwner;
  const cutoff = new Date('2031-06-01T00:00:00.000Z');
  const ago = (minutes: number) => new Date(cutoff.getTime() - minutes * 60_000);

  before(async () => {
    orm = await openTestDb('db_unconfirmed');
    a = (await insertSender(orm)).owner;
    b = (await insertSender(orm)).owner;
  });
  after(async () => orm.close());
  // The statements serve every organization when none is named: each test starts with nothing at `sent`.
  beforeEach(async () => {
    await sql(orm, `update emails set status = 'delivered' where status = 'sent'`);
  });

  const sent = (owner: EmailOwner, sentAt: Date, over: Record<string, unknown> = {}) =>
    insertEmail(orm, owner, { status: 'sent', sent_at: sentAt, enqueued_at: sentAt, ...over });
  const statusOf = async (id: string) => (await sql(orm, 'select status from emails where id = $1', [id]))[0].status;
  const audits = (orgId: string) =>
    sql(
      orm,
      `select target_type, target_id, details, api_key_id from audit_log where organization_id = $1 and action = 'email.closed_unconfirmed' order by created_at`,
      [orgId],
    );

  it('counts live messages at `sent` before the cutoff, with the oldest time; scoped to one organization when named', async () => {
    await sent(a, ago(30));
    await sent(a, ago(10));
    await sent(b, ago(60));
    await sent(a, ago(-5)); // after the cutoff
    await sent(a, ago(40), { mode: 'test' });
    await sent(a, ago(50), { status: 'delivered' });
    assert.deepEqual(await countUnconfirmed(orm, { cutoff, organizationId: null }), { count: 3, oldestSentAt: ago(60) });
    assert.deepEqual(await countUnconfirmed(orm, { cutoff, organizationId: a.organizationId }), { count: 2, oldestSentAt: ago(30) });
    assert.deepEqual(await countUnconfirmed(orm, { cutoff: ago(100), organizationId: null }), { count: 0, oldestSentAt: null });
  });

  it('closes the oldest first, up to the limit, with one audit entry per organization of the batch', async () => {
    const a1 = await sent(a, ago(30));
    const a2 = await sent(a, ago(20));
    const a3 = await sent(a, ago(10));
    const b1 = await sent(b, ago(25));
    const closed = await closeUnconfirmedBatch(orm, { cutoff, organizationId: null, limit: 3 });
    assert.deepEqual(closed.map((c) => c.id).sort(), [a1.id, b1.id, a2.id].sort());
    assert.deepEqual(closed.find((c) => c.id === b1.id)?.organizationId, b.organizationId);
    assert.equal(await statusOf(a3.id), 'sent', 'the newest waits for the next batch');
    for (const id of [a1.id, a2.id, b1.id]) assert.equal(await statusOf(id), 'unconfirmed');
    const [auditA] = await audits(a.organizationId);
    assert.equal(auditA.target_type, 'email_batch');
    assert.equal(auditA.api_key_id, null);
    assert.deepEqual(auditA.details.email_ids, [a1.id, a2.id].sort());
    assert.equal(auditA.details.count, 2);
    assert.equal(ms(auditA.details.cutoff), cutoff.getTime());
    assert.equal((await audits(b.organizationId)).at(-1)?.details.count, 1);
  });

  it('scoped to one organization, never closes another’s; test mail and newer mail stay', async () => {
    const theirs = await sent(b, ago(30));
    const test = await sent(a, ago(30), { mode: 'test' });
    const newer = await sent(a, ago(-1));
    const mine = await sent(a, ago(20));
    const closed = await closeUnconfirmedBatch(orm, { cutoff, organizationId: a.organizationId, limit: 10 });
    assert.deepEqual(closed, [{ id: mine.id, organizationId: a.organizationId }]);
    assert.equal(await statusOf(theirs.id), 'sent');
    assert.equal(await statusOf(test.id), 'sent');
    assert.equal(await statusOf(newer.id), 'sent');
  });

  /**
   * The race with a late bounce or complaint: the event's transaction moves the message off
   * `sent` while the close runs. The close skips the row it holds, and the event's status stays.
   */
  it('race: a message a late event holds is skipped, and the event’s status stays', async () => {
    const held = await sent(a, ago(30));
    const free = await sent(a, ago(20));
    const gate = await Gate.hold(orm, [`update emails set status = 'bounced' where id = $1`, [held.id]]);
    let closed;
    try {
      closed = await closeUnconfirmedBatch(orm, { cutoff, organizationId: a.organizationId, limit: 10 });
    } finally {
      await gate.commit();
    }
    assert.deepEqual(
      closed.map((c) => c.id),
      [free.id],
    );
    assert.equal(await statusOf(held.id), 'bounced');
  });

  /** Two operators (or a retried command) closing at once: each message is closed, and audited, once. */
  it('race: concurrent closes close each message once, and audit it once', async () => {
    const ids = [];
    for (let i = 0; i < 12; i++) ids.push((await sent(i % 2 ? a : b, ago(100 - i))).id);
    const batches = await Promise.all(
      Array.from({ length: 4 }, () => closeUnconfirmedBatch(orm, { cutoff, organizationId: null, limit: 4 })),
    );
    const closed = batches.flat().map((c) => c.id);
    assert.equal(new Set(closed).size, closed.length, 'no message closed twice');
    const left = await closeUnconfirmedBatch(orm, { cutoff, organizationId: null, limit: 100 });
    assert.deepEqual([...closed, ...left.map((c) => c.id)].sort(), ids.sort());
    const audited = [...(await audits(a.organizationId)), ...(await audits(b.organizationId))].flatMap(
      (r) => r.details.email_ids as string[],
    );
    for (const id of ids) assert.equal(audited.filter((x) => x === id).length, 1, `${id} audited once`);
  });
});
