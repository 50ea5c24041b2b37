import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { suppressAddress } from '../../db/sql/suppress-address';
import { insertContact, insertEmail, insertSender, openTestDb, sql, unique, type Row } from '../support/db-fixtures';
import { inTransaction, releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/suppress-address: an address on its organization’s list, a hard bounce’s contact bounced', function () {
  let orm: Orm;
  let sender: Awaited<ReturnType<typeof insertSender>>;
  let other: Awaited<ReturnType<typeof insertSender>>;
  let email: Row;

  before(async () => {
    orm = await openTestDb('db_suppress_address');
    sender = await insertSender(orm);
    other = await insertSender(orm);
    email = await insertEmail(orm, sender.owner);
  });
  after(async () => orm.close());

  const suppress = (address: string, over: { reason?: 'bounce' | 'complaint' | 'manual'; bounceContact?: boolean; org?: string } = {}) =>
    inTransaction(orm, (em) =>
      suppressAddress(em, {
        organizationId: over.org ?? sender.organization.id,
        address,
        reason: over.reason ?? 'bounce',
        emailId: email.id,
        bounceContact: over.bounceContact ?? true,
      }),
    );
  const listed = (org: string, address: string) =>
    sql(orm, 'select reason, source_email_id from suppressions where organization_id = $1 and email = $2', [org, address]);
  const status = async (contactId: string) => (await sql(orm, 'select status from contacts where id = $1', [contactId]))[0].status;

  it('lists the address once: the first reason stays', async () => {
    const address = `${unique('a')}@example.com`;
    assert.deepEqual(await suppress(address, { reason: 'bounce', bounceContact: false }), { added: true, contactBounced: false });
    assert.deepEqual(await suppress(address, { reason: 'complaint', bounceContact: false }), { added: false, contactBounced: false });
    assert.deepEqual(await listed(sender.organization.id, address), [{ reason: 'bounce', source_email_id: email.id }]);
  });

  it('on a hard bounce, sets the organization’s contact of the address to bounced, once; not another organization’s', async () => {
    const address = `${unique('b')}@example.com`;
    const mine = await insertContact(orm, sender.organization.id, { email: address });
    const theirs = await insertContact(orm, other.organization.id, { email: address });
    assert.deepEqual(await suppress(address), { added: true, contactBounced: true });
    assert.equal(await status(mine.id), 'bounced');
    assert.equal(await status(theirs.id), 'subscribed');
    assert.deepEqual(await listed(other.organization.id, address), [], 'the other organization’s list is untouched');
    assert.deepEqual(await suppress(address), { added: false, contactBounced: false }, 'already bounced: no change reported');
  });

  it('without bounceContact (a complaint) the contact keeps its status', async () => {
    const address = `${unique('c')}@example.com`;
    const c = await insertContact(orm, sender.organization.id, { email: address, status: 'unsubscribed' });
    assert.deepEqual(await suppress(address, { reason: 'complaint', bounceContact: false }), { added: true, contactBounced: false });
    assert.equal(await status(c.id), 'unsubscribed');
  });

  it('each organization has its own list', async () => {
    const address = `${unique('d')}@example.com`;
    assert.equal((await suppress(address)).added, true);
    assert.equal((await suppress(address, { org: other.organization.id })).added, true);
    assert.equal((await listed(other.organization.id, address)).length, 1);
  });

  it('commits with the caller’s transaction: rolled back, nothing is listed', async () => {
    const address = `${unique('e')}@example.com`;
    const c = await insertContact(orm, sender.organization.id, { email: address });
    await assert.rejects(
      inTransaction(orm, async (em) => {
        await suppressAddress(em, {
          organizationId: sender.organization.id,
          address,
          reason: 'bounce',
          emailId: email.id,
          bounceContact: true,
        });
        throw new Error('the event failed');
      }),
      /the event failed/,
    );
    assert.deepEqual(await listed(sender.organization.id, address), []);
    assert.equal(await status(c.id), 'subscribed');
  });

  /**
   * The race: bounces of one address arrive at once (several recipients' DSNs, several workers).
   * They queue behind a transaction that holds the same list entry and then rolls back, so they
   * all meet on the insert: exactly one adds it, and exactly one reports the contact bounced.
   */
  it('race: concurrent suppressions of one address, exactly one adds it and one bounces the contact', async () => {
    const address = `${unique('race')}@example.com`;
    const c = await insertContact(orm, sender.organization.id, { email: address });
    const results = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into suppressions (id, organization_id, email, reason) values ($1, $2, $3, 'manual')`,
            [uuidv7(), sender.organization.id, address],
          ],
        ],
        Array.from({ length: 6 }, (_, i) => () => suppress(address, { reason: i % 2 ? 'complaint' : 'bounce', bounceContact: true })),
        'rollback',
      ),
    );
    assert.equal(results.filter((r) => r.added).length, 1, JSON.stringify(results));
    assert.equal(results.filter((r) => r.contactBounced).length, 1, JSON.stringify(results));
    assert.equal((await listed(sender.organization.id, address)).length, 1);
    assert.equal(await status(c.id), 'bounced');
  });
});
