import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { freezeAudience, lockBroadcast } from '../../db/sql/freeze-broadcast';
import type { AudienceCondition } from '../../db/sql/audience-conditions';
import {
  insertBroadcast,
  insertContact,
  insertSender,
  insertSubscription,
  insertSuppression,
  insertTopic,
  ms,
  openTestDb,
  sql,
  type EmailOwner,
  type Row,
} from '../support/db-fixtures';

describe("db/sql/freeze-broadcast: a broadcast's audience is frozen once, from its organization's mailable members", function () {
  let orm: Orm;
  let owner: EmailOwner;
  let org: Row;
  const now = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_freeze_broadcast');
    ({ owner, organization: org } = await insertSender(orm));
  });
  after(async () => orm.close());

  const recipientsOf = (broadcastId: string) =>
    sql(orm, 'select position, contact_id, email from broadcast_recipients where broadcast_id = $1 order by position', [broadcastId]);

  /** What the fan-out does: lock, and freeze if still queued; answers the count, or null when it found the broadcast frozen. */
  const freezeOnce = (broadcastId: string, conditions: AudienceCondition[], topic: AudienceCondition | null = null) =>
    orm.em.fork().transactional(async (em) => {
      const state = await lockBroadcast(em, broadcastId);
      if (state?.status !== 'queued') return null;
      return freezeAudience(em, { broadcastId, organizationId: owner.organizationId, conditions, topic, now });
    });

  it('lockBroadcast answers the state (null for no such broadcast) and holds the row until the transaction ends', async () => {
    const b = await insertBroadcast(orm, owner, { status: 'queued', enqueued: 0 });
    assert.equal(await orm.em.fork().transactional((em) => lockBroadcast(em, randomUUID())), null);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: (row: unknown) => void;
    const lockedRow = new Promise((r) => (locked = r));
    const holder = orm.em.fork().transactional(async (em) => {
      locked(await lockBroadcast(em, b.id));
      await held;
    });
    assert.deepEqual(await lockedRow, { status: 'queued', recipients: null, enqueued: 0 });
    await assert.rejects(
      orm.em.fork().transactional(async (em) => {
        await em.execute('set local lock_timeout = 100');
        await lockBroadcast(em, b.id);
      }),
      /lock timeout/,
    );
    release();
    await holder;
  });

  it('freezes subscribed, unsuppressed contacts of the organization meeting the conditions, numbered from 0 in id order', async () => {
    const { owner: strangerOwner } = await insertSender(orm);
    const topic = await insertTopic(orm, org.id, { default_opt_in: false });
    const members: Row[] = [];
    for (let i = 0; i < 3; i++) members.push(await insertContact(orm, org.id));
    const unsubscribed = await insertContact(orm, org.id, { status: 'unsubscribed' });
    const suppressed = await insertContact(orm, org.id);
    await insertSuppression(orm, org.id, suppressed.email);
    // Suppressed in another organization only: still a member here.
    const suppressedElsewhere = await insertContact(orm, org.id);
    await insertSuppression(orm, strangerOwner.organizationId, suppressedElsewhere.email);
    members.push(suppressedElsewhere);
    await insertContact(orm, strangerOwner.organizationId);
    for (const c of [...members, unsubscribed, suppressed]) await insertSubscription(orm, c.id, topic.id, 'subscribed');
    const notInTopic = await insertContact(orm, org.id);

    const b = await insertBroadcast(orm, owner);
    const cond: AudienceCondition = { topicId: topic.id, defaultOptIn: false, state: 'subscribed' };
    assert.equal(await freezeOnce(b.id, [cond]), members.length);
    const frozen = await recipientsOf(b.id);
    const expected = [...members].sort((x, y) => (x.id < y.id ? -1 : 1));
    assert.deepEqual(
      frozen.map((r) => [r.position, r.contact_id, r.email]),
      expected.map((c, i) => [i, c.id, c.email]),
    );
    assert.ok(!frozen.some((r) => r.contact_id === notInTopic.id));
    const [row] = await sql(orm, 'select status, recipients, started_at from broadcasts where id = $1', [b.id]);
    assert.deepEqual([row.status, row.recipients, ms(row.started_at)], ['sending', members.length, now.getTime()]);
  });

  it("a broadcast's topic narrows the audience to contacts whose effective state for it is subscribed", async () => {
    const { owner: o2, organization: org2 } = await insertSender(orm);
    const topic = await insertTopic(orm, org2.id, { default_opt_in: true });
    const stays = await insertContact(orm, org2.id);
    const left = await insertContact(orm, org2.id);
    await insertSubscription(orm, left.id, topic.id, 'unsubscribed');
    const b = await insertBroadcast(orm, o2);
    const n = await orm.em.fork().transactional((em) =>
      freezeAudience(em, {
        broadcastId: b.id,
        organizationId: org2.id,
        conditions: [],
        topic: { topicId: topic.id, defaultOptIn: true, state: 'subscribed' },
        now,
      }),
    );
    assert.equal(n, 1);
    assert.deepEqual(
      (await recipientsOf(b.id)).map((r) => r.contact_id),
      [stays.id],
    );
  });

  it('race: two fan-outs freezing one broadcast at once: one freezes, the other finds it frozen; the audience is not doubled', async () => {
    const { owner: o3, organization: org3 } = await insertSender(orm);
    for (let i = 0; i < 5; i++) await insertContact(orm, org3.id);
    const b = await insertBroadcast(orm, o3);
    const freeze = () =>
      orm.em.fork().transactional(async (em) => {
        const state = await lockBroadcast(em, b.id);
        if (state?.status !== 'queued') return null;
        return freezeAudience(em, { broadcastId: b.id, organizationId: org3.id, conditions: [], topic: null, now });
      });
    const results = await Promise.all([freeze(), freeze(), freeze()]);
    assert.deepEqual(
      results.filter((r) => r !== null),
      [5],
    );
    assert.equal((await recipientsOf(b.id)).length, 5);
  });
});
