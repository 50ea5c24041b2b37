import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { advanceBroadcast, readBroadcastPage } from '../../db/sql/broadcast-page';
import {
  concurrently,
  insertBroadcast,
  insertBroadcastRecipient,
  insertContact,
  insertSender,
  ms,
  openTestDb,
  sql,
  type EmailOwner,
  type Row,
} from '../support/db-fixtures';

describe("db/sql/broadcast-page: a page of a broadcast's frozen audience; the fan-out cursor moves once per page", function () {
  let orm: Orm;
  let owner: EmailOwner;

  before(async () => {
    orm = await openTestDb('db_broadcast_page');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());

  describe('readBroadcastPage', () => {
    it('answers positions [from, from + limit) in order with the contact data; a deleted contact is marked and renders nothing', async () => {
      const b = await insertBroadcast(orm, owner, { status: 'sending', recipients: 5 });
      const other = await insertBroadcast(orm, owner, { status: 'sending', recipients: 5 });
      const contacts: Row[] = [];
      for (let i = 0; i < 5; i++)
        contacts.push(await insertContact(orm, owner.organizationId, { first_name: `F${i}`, last_name: `L${i}`, properties: { i } }));
      for (let i = 0; i < 5; i++) {
        await insertBroadcastRecipient(orm, b.id, i, contacts[i]);
        await insertBroadcastRecipient(orm, other.id, i, contacts[4 - i]);
      }
      await sql(orm, 'delete from contacts where id = $1', [contacts[2].id]);

      const page = await readBroadcastPage(orm, b.id, 1, 3);
      assert.deepEqual(
        page.map((r) => r.position),
        [1, 2, 3],
      );
      assert.deepEqual(
        page.map((r) => r.contact_id),
        [contacts[1].id, contacts[2].id, contacts[3].id],
      );
      assert.deepEqual(
        page.map((r) => r.email),
        [contacts[1].email, contacts[2].email, contacts[3].email],
        'the address frozen with the audience, even for a deleted contact',
      );
      assert.deepEqual(
        page.map((r) => r.deleted),
        [false, true, false],
      );
      assert.equal(page[0].first_name, 'F1');
      assert.equal(page[0].last_name, 'L1');
      assert.deepEqual(page[0].properties, { i: 1 });
      assert.equal(page[1].first_name, null);
      assert.equal(page[1].properties, null);

      assert.deepEqual(
        (await readBroadcastPage(orm, b.id, 3, 10)).map((r) => r.position),
        [3, 4],
        'the last page is short',
      );
      assert.deepEqual(await readBroadcastPage(orm, b.id, 5, 10), []);
    });
  });

  describe('advanceBroadcast', () => {
    it('moves the cursor from `from` to `next` and adds the render failures, once: a page run again changes nothing', async () => {
      const b = await insertBroadcast(orm, owner, { status: 'sending', recipients: 10, enqueued: 0 });
      const now = new Date('2030-01-01T00:00:00Z');
      assert.equal(await advanceBroadcast(orm, { broadcastId: b.id, from: 0, next: 4, renderFailures: 1, now }), 'sending');
      assert.equal(await advanceBroadcast(orm, { broadcastId: b.id, from: 0, next: 4, renderFailures: 1, now }), 'sending');
      let [row] = await sql(orm, 'select enqueued, render_failures, updated_at from broadcasts where id = $1', [b.id]);
      assert.equal(row.enqueued, 4);
      assert.equal(row.render_failures, 1);
      assert.equal(ms(row.updated_at), now.getTime());
      await advanceBroadcast(orm, { broadcastId: b.id, from: 4, next: 10, renderFailures: 2, now });
      [row] = await sql(orm, 'select enqueued, render_failures from broadcasts where id = $1', [b.id]);
      assert.deepEqual([row.enqueued, row.render_failures], [10, 3]);
    });

    it("answers the broadcast's status when the page is stale (a cancel committed meanwhile)", async () => {
      const b = await insertBroadcast(orm, owner, { status: 'canceled', recipients: 10, enqueued: 4 });
      assert.equal(await advanceBroadcast(orm, { broadcastId: b.id, from: 0, next: 4, renderFailures: 0, now: new Date() }), 'canceled');
      const [row] = await sql(orm, 'select enqueued from broadcasts where id = $1', [b.id]);
      assert.equal(row.enqueued, 4);
    });

    it('race: one page advanced by several runs at once moves the cursor and counts its failures once', async () => {
      const b = await insertBroadcast(orm, owner, { status: 'sending', recipients: 10, enqueued: 0 });
      await concurrently(6, () => advanceBroadcast(orm, { broadcastId: b.id, from: 0, next: 5, renderFailures: 2, now: new Date() }));
      const [row] = await sql(orm, 'select enqueued, render_failures from broadcasts where id = $1', [b.id]);
      assert.deepEqual([row.enqueued, row.render_failures], [5, 2]);
    });
  });
});
