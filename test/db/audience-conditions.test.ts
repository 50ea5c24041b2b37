import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { audienceConditions, type AudienceCondition } from '../../db/sql/audience-conditions';
import { insertContact, insertOrganization, insertSubscription, insertTopic, openTestDb, type Row } from '../support/db-fixtures';

describe('db/sql/audience-conditions: conditions on a contact, a topic condition on its effective state', function () {
  let orm: Orm;
  let org: Row;
  /** subscribed: an explicit `subscribed` row; unsubscribed: an explicit `unsubscribed` row; none: no row. */
  const contacts: Record<'subscribed' | 'unsubscribed' | 'none' | 'bounced', Row> = {} as never;
  let optIn: Row;
  let optOut: Row;

  before(async () => {
    orm = await openTestDb('db_audience_conditions');
    org = await insertOrganization(orm);
    optIn = await insertTopic(orm, org.id, { default_opt_in: true });
    optOut = await insertTopic(orm, org.id, { default_opt_in: false });
    const other = await insertTopic(orm, org.id, { default_opt_in: false });
    contacts.subscribed = await insertContact(orm, org.id);
    contacts.unsubscribed = await insertContact(orm, org.id);
    contacts.none = await insertContact(orm, org.id);
    contacts.bounced = await insertContact(orm, org.id, { status: 'bounced' });
    for (const t of [optIn, optOut]) {
      await insertSubscription(orm, contacts.subscribed.id, t.id, 'subscribed');
      await insertSubscription(orm, contacts.unsubscribed.id, t.id, 'unsubscribed');
    }
    // A row of another topic decides nothing for these two.
    await insertSubscription(orm, contacts.none.id, other.id, 'subscribed');
  });
  after(async () => orm.close());

  /** The names of the organization's contacts meeting every condition. */
  async function matching(conditions: AudienceCondition[]): Promise<string[]> {
    const params: unknown[] = [org.id];
    const where = ['c.organization_id = ?', ...audienceConditions(conditions, params)];
    const rows = await orm.em.fork().execute(`select c.id from contacts c where ${where.join(' and ')}`, params);
    const ids = new Set(rows.map((r: Row) => r.id));
    return Object.entries(contacts)
      .filter(([, c]) => ids.has(c.id))
      .map(([name]) => name)
      .sort();
  }
  const topic = (t: Row, state: 'subscribed' | 'unsubscribed'): AudienceCondition => ({
    topicId: t.id,
    defaultOptIn: t.default_opt_in,
    state,
  });

  it('a default-in topic: subscribed is everyone without an explicit unsubscribe; unsubscribed only the explicit ones', async () => {
    assert.deepEqual(await matching([topic(optIn, 'subscribed')]), ['bounced', 'none', 'subscribed']);
    assert.deepEqual(await matching([topic(optIn, 'unsubscribed')]), ['unsubscribed']);
  });

  it('a default-out topic: subscribed only the explicit ones; unsubscribed everyone without an explicit subscribe', async () => {
    assert.deepEqual(await matching([topic(optOut, 'subscribed')]), ['subscribed']);
    assert.deepEqual(await matching([topic(optOut, 'unsubscribed')]), ['bounced', 'none', 'unsubscribed']);
  });

  it('a status condition and topic conditions combine with and, their parameters in order', async () => {
    const params: unknown[] = [];
    const sql = audienceConditions([{ status: 'bounced' }, topic(optOut, 'subscribed')], params);
    assert.deepEqual(params, ['bounced', optOut.id, 'subscribed']);
    assert.equal(sql.length, 2);
    assert.deepEqual(await matching([{ status: 'subscribed' }, topic(optIn, 'subscribed')]), ['none', 'subscribed']);
    assert.deepEqual(await matching([{ status: 'bounced' }]), ['bounced']);
  });

  it('a topic that no longer exists (topicId null) matches no contact, whatever the state asked', async () => {
    for (const state of ['subscribed', 'unsubscribed'] as const)
      for (const defaultOptIn of [true, false]) assert.deepEqual(await matching([{ topicId: null, defaultOptIn, state }]), []);
  });

  it('no condition: every contact of the organization', async () => {
    assert.deepEqual(await matching([]), ['bounced', 'none', 'subscribed', 'unsubscribed']);
  });
});
