import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { SENDING_RATES, hourlySending, listOrganizations, sendingRates, waitingMail } from '../../db/sql/console-overview';
import { closeUnconfirmedBatch, closeUnconfirmedIds, listUnconfirmed } from '../../db/sql/unconfirmed';
import { insertEmail, insertSender, insertRow, openTestDb, openTransaction, sql, type EmailOwner } from '../support/db-fixtures';
import { Gate } from '../support/db-fixtures-rz';

/** The console's statements: organizations by today's use, waiting mail, rates, the hourly series, the unconfirmed list and close. */
describe('db/sql/console-overview and the console close of db/sql/unconfirmed', function () {
  let orm: Orm;
  let a: EmailOwner;
  let b: EmailOwner;
  const now = new Date('2031-06-01T12:00:00.000Z');
  const ago = (minutes: number) => new Date(now.getTime() - minutes * 60_000);

  before(async () => {
    orm = await openTestDb('db_console_overview');
    a = (await insertSender(orm, { organization: { name: 'Alpha' } })).owner;
    b = (await insertSender(orm, { organization: { name: 'beta' } })).owner;
  });
  after(async () => orm.close());

  const sent = (owner: EmailOwner, minutesAgo: number, status = 'delivered', over: Record<string, unknown> = {}) =>
    insertEmail(orm, owner, { status, sent_at: ago(minutesAgo), enqueued_at: ago(minutesAgo), created_at: ago(minutesAgo + 1), ...over });

  it('lists organizations by today’s use (busiest first) or by name, one more row than the page, or only one', async () => {
    await insertRow(orm, 'send_counters', { scope: 'organization', scope_id: b.organizationId, day: '2031-06-01', used: 7 });
    await insertRow(orm, 'send_counters', { scope: 'organization', scope_id: a.organizationId, day: '2031-05-31', used: 99 });
    const busy = await listOrganizations(orm, { day: '2031-06-01', organizationId: null, byUsage: true, limit: 1, offset: 0 });
    assert.deepEqual(
      busy.map((o) => [o.id, o.used_today]),
      [
        [b.organizationId, 7],
        [a.organizationId, 0],
      ],
    );
    const byName = await listOrganizations(orm, { day: '2031-06-01', organizationId: null, byUsage: false, limit: 5, offset: 0 });
    assert.deepEqual(
      byName.map((o) => o.name),
      ['Alpha', 'beta'],
    );
    const one = await listOrganizations(orm, { day: '2031-06-01', organizationId: a.organizationId, byUsage: true, limit: 5, offset: 0 });
    assert.deepEqual(
      one.map((o) => o.id),
      [a.organizationId],
    );
  });

  it('counts queued live mail not yet handed over, by why: a cap, scheduled, or in the outbox', async () => {
    await insertEmail(orm, a, { waiting_reason: 'domain_daily_cap' });
    await insertEmail(orm, a, { waiting_reason: 'domain_daily_cap' });
    await insertEmail(orm, a, { waiting_reason: 'organization_daily_cap' });
    await insertEmail(orm, a, { scheduled_at: new Date(now.getTime() + 3_600_000), created_at: ago(5) });
    await insertEmail(orm, a, { created_at: ago(5) });
    await insertEmail(orm, a, { mode: 'test', created_at: ago(5) });
    await insertEmail(orm, a, { status: 'canceled', created_at: ago(5) });
    await insertEmail(orm, a, { enqueued_at: ago(5), created_at: ago(5) });
    await insertEmail(orm, b, { waiting_reason: 'platform_daily_cap' });
    const rows = await waitingMail(orm, [a.organizationId], now);
    const got = Object.fromEntries(rows.map((r) => [r.reason, r.count]));
    assert.deepEqual(got, { domain_daily_cap: 2, organization_daily_cap: 1, scheduled: 1, outbox: 1 });
    assert.deepEqual(await waitingMail(orm, [], now), []);
  });

  it('rates: live mail sent in the last hour, 24 hours and 7 days, by what became of it; test mail and older mail never count', async () => {
    await sent(a, 10, 'delivered');
    await sent(a, 20, 'sent');
    await sent(a, 30, 'bounced');
    await sent(a, 120, 'complained');
    await sent(a, 120, 'delivered');
    await sent(a, 3 * 24 * 60, 'bounced');
    await sent(a, 8 * 24 * 60, 'bounced'); // older than 7 days
    await sent(a, 10, 'bounced', { mode: 'test' });
    await sent(a, -10, 'delivered'); // after `now`
    await sent(b, 10, 'delivered');
    const rates = await sendingRates(orm, null, now);
    assert.deepEqual(rates.get(a.organizationId), {
      lastHour: { sent: 3, delivered: 1, bounced: 1, complained: 0 },
      lastDay: { sent: 5, delivered: 3, bounced: 1, complained: 1 },
      lastWeek: { sent: 6, delivered: 3, bounced: 2, complained: 1 },
    });
    assert.equal(rates.get(b.organizationId)?.lastHour.sent, 1);
    const onlyB = await sendingRates(orm, b.organizationId, now);
    assert.deepEqual([...onlyB.keys()], [b.organizationId]);
  });

  it('the hourly series has 24 hours counted back from now, oldest first, each with its outcomes', async () => {
    const hours = await hourlySending(orm, a.organizationId, now);
    assert.equal(hours.length, 24);
    assert.equal(hours[23].hour, ago(60).toISOString());
    assert.equal(hours[0].hour, ago(24 * 60).toISOString());
    assert.deepEqual(hours[23], { hour: ago(60).toISOString(), sent: 3, delivered: 1, bounced: 1, complained: 0 });
    assert.deepEqual(hours[21], { hour: ago(180).toISOString(), sent: 2, delivered: 2, bounced: 0, complained: 1 });
    assert.equal(
      hours.reduce((n, h) => n + h.sent, 0),
      5,
    );
    const all = await hourlySending(orm, null, now);
    assert.equal(all[23].sent, 4);
  });

  it('the rates read emails_live_sent_idx alone (an index-only scan, no table)', async () => {
    const tx = await openTransaction(orm);
    try {
      await tx.query('set local enable_seqscan = off');
      await tx.query('set local enable_bitmapscan = off');
      let n = 0;
      const text = SENDING_RATES.replace(/\?/g, () => `$${++n}`);
      const plan = (await tx.query(`explain ${text}`, [now, now, now, now, null, null])).map((r) => r['QUERY PLAN']).join('\n');
      assert.match(plan, /Index Only Scan using emails_live_sent_idx/, plan);
    } finally {
      await tx.rollback();
    }
  });

  describe('the unconfirmed list and the console’s close', () => {
    const cutoff = ago(72 * 60);
    beforeEach(async () => {
      await sql(orm, `update emails set status = 'delivered' where status = 'sent'`);
    });
    const statusOf = async (id: string) => (await sql(orm, 'select status from emails where id = $1', [id]))[0].status;

    it('lists live `sent` mail past the cutoff oldest first, with its organization, in keyset pages', async () => {
      const old1 = await sent(a, 100 * 60, 'sent');
      const old2 = await sent(b, 90 * 60, 'sent');
      const old3 = await sent(a, 80 * 60, 'sent');
      await sent(a, 60 * 60, 'sent'); // newer than the cutoff
      await sent(a, 100 * 60, 'sent', { mode: 'test' });
      const first = await listUnconfirmed(orm, { cutoff, organizationId: null, limit: 2 });
      assert.deepEqual(
        first.map((r) => r.id),
        [old1.id, old2.id, old3.id],
      );
      assert.equal(first[1].organization_name, 'beta');
      const next = await listUnconfirmed(orm, {
        cutoff,
        organizationId: null,
        limit: 2,
        after: { sentAt: new Date(first[1].sent_at), id: first[1].id },
      });
      assert.deepEqual(
        next.map((r) => r.id),
        [old3.id],
      );
      const mine = await listUnconfirmed(orm, { cutoff, organizationId: a.organizationId, limit: 10 });
      assert.deepEqual(
        mine.map((r) => r.id),
        [old1.id, old3.id],
      );
    });

    it('closes exactly the ids named that are still live `sent` past the cutoff, with audit rows naming the actor', async () => {
      const x = await sent(a, 100 * 60, 'sent');
      const y = await sent(a, 90 * 60, 'sent');
      const z = await sent(b, 80 * 60, 'sent');
      const left = await sent(a, 95 * 60, 'sent');
      const fresh = await sent(a, 60, 'sent');
      const test = await sent(a, 100 * 60, 'sent', { mode: 'test' });
      const bounced = await sent(a, 100 * 60, 'bounced');
      const closed = await closeUnconfirmedIds(orm, {
        ids: [x.id, y.id, z.id, fresh.id, test.id, bounced.id],
        cutoff,
        organizationId: null,
        actor: 'console:ops@example.com',
      });
      assert.deepEqual(closed.map((c) => c.id).sort(), [x.id, y.id, z.id].sort());
      for (const id of [x.id, y.id, z.id]) assert.equal(await statusOf(id), 'unconfirmed');
      assert.equal(await statusOf(left.id), 'sent');
      assert.equal(await statusOf(fresh.id), 'sent');
      assert.equal(await statusOf(test.id), 'sent');
      assert.equal(await statusOf(bounced.id), 'bounced');
      const audits = await sql(
        orm,
        `select organization_id, actor, api_key_id, target_type, details from audit_log
          where action = 'email.closed_unconfirmed' and details->'email_ids' ?| $1 order by organization_id`,
        [[x.id, z.id]],
      );
      assert.equal(audits.length, 2, 'one row per organization');
      for (const row of audits) {
        assert.equal(row.actor, 'console:ops@example.com');
        assert.equal(row.api_key_id, null);
        assert.equal(row.target_type, 'email_batch');
      }
      const ofA = audits.find((r) => r.organization_id === a.organizationId)!;
      assert.deepEqual(ofA.details.email_ids, [x.id, y.id].sort());
      assert.equal(ofA.details.count, 2);
      const again = await closeUnconfirmedIds(orm, { ids: [x.id], cutoff, organizationId: null, actor: 'console:ops@example.com' });
      assert.deepEqual(again, [], 'closed once');
    });

    it('scoped to an organization, leaves another’s; the command’s batch still audits with no actor', async () => {
      const theirs = await sent(b, 100 * 60, 'sent');
      const closed = await closeUnconfirmedIds(orm, {
        ids: [theirs.id],
        cutoff,
        organizationId: a.organizationId,
        actor: 'console:x@example.com',
      });
      assert.deepEqual(closed, []);
      assert.equal(await statusOf(theirs.id), 'sent');
      const batch = await closeUnconfirmedBatch(orm, { cutoff, organizationId: b.organizationId, limit: 10 });
      assert.deepEqual(
        batch.map((r) => r.id),
        [theirs.id],
      );
      const [row] = await sql(orm, `select actor from audit_log where action = 'email.closed_unconfirmed' and details->'email_ids' ? $1`, [
        theirs.id,
      ]);
      assert.equal(row.actor, null);
    });

    it('race: a message a late bounce holds is skipped, and the bounce stays', async () => {
      const held = await sent(a, 100 * 60, 'sent');
      const free = await sent(a, 100 * 60, 'sent');
      const gate = await Gate.hold(orm, [`update emails set status = 'bounced' where id = $1`, [held.id]]);
      let closed;
      try {
        closed = await closeUnconfirmedIds(orm, { ids: [held.id, free.id], cutoff, organizationId: null, actor: 'console:x@example.com' });
      } finally {
        await gate.commit();
      }
      assert.deepEqual(
        closed.map((c) => c.id),
        [free.id],
      );
      assert.equal(await statusOf(held.id), 'bounced');
    });
  });
});
