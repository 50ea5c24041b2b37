import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { recordEngagement } from '../../db/sql/record-engagement';
import { insertEmail, insertRecipient, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';

// An insert of one event row: nothing to decide between concurrent calls (every open or click is
// recorded; no uniqueness). Its rule: tracked mail only, its first unsuppressed recipient.
describe('db/sql/record-engagement: an open or a click of tracked mail', function () {
  let orm: Orm;
  let owner: EmailOwner;
  const at = new Date('2031-05-06T07:08:09.000Z');

  before(async () => {
    orm = await openTestDb('db_record_engagement');
    owner = (await insertSender(orm)).owner;
  });
  after(async () => orm.close());

  const events = (emailId: string) =>
    sql(orm, `select organization_id, type, recipient, at, detail, url from email_events where email_id = $1 order by id`, [emailId]);

  it('records an open of a message that asked for open tracking, for its first unsuppressed recipient', async () => {
    const e = await insertEmail(orm, owner, { track_opens: true });
    // Ids in this order; inserted in another, so the first by id is not the first written.
    const [a, b, c] = [uuidv7(), uuidv7(), uuidv7()];
    await insertRecipient(orm, e.id, 'second@example.com', { id: c });
    await insertRecipient(orm, e.id, 'suppressed@example.com', { id: a, state: 'suppressed' });
    await insertRecipient(orm, e.id, 'first@example.com', { id: b });
    assert.equal(await recordEngagement(orm, { emailId: e.id, type: 'opened', at, machine: true, url: null }), true);
    const rows = await events(e.id);
    assert.deepEqual(
      rows.map((r) => ({ ...r, at: ms(r.at) })),
      [
        {
          organization_id: owner.organizationId,
          type: 'opened',
          recipient: 'first@example.com',
          at: at.getTime(),
          detail: 'machine',
          url: null,
        },
      ],
    );
  });

  it('records a click with its URL (click tracking alone is enough); a repeat is another event', async () => {
    const e = await insertEmail(orm, owner, { track_clicks: true });
    await insertRecipient(orm, e.id, 'to@example.com');
    const click = { emailId: e.id, type: 'clicked' as const, at, machine: false, url: 'https://example.com/a' };
    assert.equal(await recordEngagement(orm, click), true);
    assert.equal(await recordEngagement(orm, click), true);
    const rows = await events(e.id);
    assert.deepEqual(
      rows.map((r) => [r.type, r.detail, r.url]),
      [
        ['clicked', null, 'https://example.com/a'],
        ['clicked', null, 'https://example.com/a'],
      ],
    );
  });

  it('records nothing for untracked mail, a message gone, or one whose every recipient was suppressed', async () => {
    const untracked = await insertEmail(orm, owner);
    await insertRecipient(orm, untracked.id, 'to@example.com');
    const allSuppressed = await insertEmail(orm, owner, { track_opens: true });
    await insertRecipient(orm, allSuppressed.id, 'to@example.com', { state: 'suppressed' });
    for (const emailId of [untracked.id, allSuppressed.id, uuidv7()]) {
      assert.equal(await recordEngagement(orm, { emailId, type: 'opened', at, machine: false, url: null }), false);
    }
    assert.deepEqual(await events(untracked.id), []);
    assert.deepEqual(await events(allSuppressed.id), []);
  });
});
