import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { eventType, insertEvents, persistEvent, UNSUBSCRIBED_ONCE } from '../../db/sql/email-events';
import { concurrently, insertEmail, insertSender, ms, openTestDb, sql, type EmailOwner, type Row } from '../support/db-fixtures';

describe('db/sql/email-events: how a message event row is written; an unsubscribe once per message and recipient', function () {
  let orm: Orm;
  let owner: EmailOwner;
  let email: Row;
  const at = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_email_events');
    ({ owner } = await insertSender(orm));
    email = await insertEmail(orm, owner);
  });
  after(async () => orm.close());

  const eventsOf = (emailId: string) =>
    sql(orm, 'select type, recipient, at, bounce_type, detail, url, organization_id from email_events where email_id = $1 order by id', [
      emailId,
    ]);

  it('insertEvents writes the columns given, leaves the others null, in the order of its `order by`', async () => {
    const e = await insertEmail(orm, owner);
    await sql(
      orm,
      insertEvents(
        { emailId: '$1::uuid', organizationId: '$2::uuid', type: 'u.type', recipient: 'u.r', at: '$3::timestamptz', url: 'u.url' },
        `from unnest($4::text[], $5::text[], $6::text[]) with ordinality as u(type, r, url, n) order by u.n desc`,
      ),
      [e.id, owner.organizationId, at, ['sent', 'clicked'], ['a@example.com', 'b@example.com'], [null, 'https://x.example/']],
    );
    assert.deepEqual(
      (await eventsOf(e.id)).map((r) => [r.type, r.recipient, ms(r.at), r.bounce_type, r.detail, r.url, r.organization_id]),
      [
        ['clicked', 'b@example.com', at.getTime(), null, null, 'https://x.example/', owner.organizationId],
        ['sent', 'a@example.com', at.getTime(), null, null, null, owner.organizationId],
      ],
    );
  });

  it('race: concurrent unsubscribes of one recipient of one message write one event (UNSUBSCRIBED_ONCE); another recipient has its own', async () => {
    const e = await insertEmail(orm, owner);
    const unsubscribe = (recipient: string) =>
      sql(
        orm,
        `${insertEvents(
          { emailId: '$1::uuid', organizationId: '$2::uuid', type: eventType('unsubscribed'), recipient: '$3::text', at: 'now()' },
          UNSUBSCRIBED_ONCE,
        )} returning 1`,
        [e.id, owner.organizationId, recipient],
      );
    const written = await concurrently(6, () => unsubscribe('a@example.com'));
    assert.equal(written.filter((rows) => rows.length === 1).length, 1);
    await unsubscribe('b@example.com');
    assert.deepEqual(
      (await eventsOf(e.id)).map((r) => [r.type, r.recipient]),
      [
        ['unsubscribed', 'a@example.com'],
        ['unsubscribed', 'b@example.com'],
      ],
    );
  });

  it("persistEvent adds a row to the caller's unit of work, written at its flush", async () => {
    const em = orm.em.fork();
    persistEvent(em, {
      emailId: email.id,
      organizationId: owner.organizationId,
      type: 'bounced',
      recipient: 'a@example.com',
      at,
      bounceType: 'hard',
    });
    assert.deepEqual(await eventsOf(email.id), [], 'nothing before the flush');
    await em.flush();
    assert.deepEqual(
      (await eventsOf(email.id)).map((r) => [r.type, r.bounce_type, r.detail, r.url, ms(r.at)]),
      [['bounced', 'hard', null, null, at.getTime()]],
    );
  });
});
