import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { listEmails, type ListEmailsFilter } from '../../db/sql/list-emails';
import { insertDomain, insertEmail, insertRecipient, insertSender, openTestDb, type EmailOwner, type Row } from '../support/db-fixtures';

// A read: no race of its own (keyset pages are stable under inserts, tested below).
describe("db/sql/list-emails: a page of an organization's messages, newest first, filtered, walked by keyset", function () {
  let orm: Orm;
  let owner: EmailOwner;
  let otherDomain: Row;
  /** Newest first. */
  const emails: Row[] = [];
  const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));

  before(async () => {
    orm = await openTestDb('db_list_emails');
    ({ owner } = await insertSender(orm));
    otherDomain = await insertDomain(orm, owner.organizationId);
    const specs: Row[] = [
      { status: 'delivered', kind: 'receipt' },
      { status: 'queued', mode: 'test' },
      { status: 'delivered', domain_id: otherDomain.id },
      { status: 'bounced', kind: 'receipt', subject: 'Bounced one', source: 'smtp' },
      { status: 'delivered' },
    ];
    for (let i = 0; i < specs.length; i++) emails.unshift(await insertEmail(orm, owner, { created_at: at(i * 10), ...specs[i] }));
    await insertRecipient(orm, emails[1].id, 'cc-person@example.com', { field: 'cc' });
    await insertRecipient(orm, emails[3].id, 'to-person@example.com');
    const { owner: stranger } = await insertSender(orm);
    await insertEmail(orm, stranger, { created_at: at(100) });
  });
  after(async () => orm.close());

  const list = async (f: Partial<ListEmailsFilter> = {}) =>
    (await listEmails(orm, { organizationId: owner.organizationId, domainIds: null, limit: 100, ...f })).map((r) => r.id);
  const ids = (...i: number[]) => i.map((n) => emails[n].id);

  it("answers the organization's messages newest first, limit + 1 rows, with the summary fields", async () => {
    assert.deepEqual(await list(), ids(0, 1, 2, 3, 4));
    assert.deepEqual(await list({ limit: 2 }), ids(0, 1, 2));
    const [row] = await listEmails(orm, { organizationId: owner.organizationId, domainIds: null, status: 'bounced', limit: 10 });
    assert.deepEqual(
      [row.id, row.subject, row.status, row.mode, row.source, row.kind, row.to_addresses],
      [emails[1].id, 'Bounced one', 'bounced', 'live', 'smtp', 'receipt', ['to@example.com']],
    );
  });

  it('each filter narrows: domains of a restricted key, status, kind, mode, created since/until, any recipient', async () => {
    assert.deepEqual(await list({ domainIds: [otherDomain.id] }), ids(2));
    assert.deepEqual(await list({ domainIds: [owner.domainId] }), ids(0, 1, 3, 4));
    assert.deepEqual(await list({ domainIds: [] }), []);
    assert.deepEqual(await list({ status: 'delivered' }), ids(0, 2, 4));
    assert.deepEqual(await list({ kind: 'receipt' }), ids(1, 4));
    assert.deepEqual(await list({ mode: 'test' }), ids(3));
    assert.deepEqual(await list({ since: at(10), until: at(30) }), ids(2, 3), 'since inclusive, until exclusive');
    assert.deepEqual(await list({ to: 'cc-person@example.com' }), ids(1));
    assert.deepEqual(await list({ to: 'to-person@example.com' }), ids(3));
    assert.deepEqual(await list({ status: 'delivered', kind: 'receipt' }), ids(4));
  });

  it('walks pages by keyset: a message stored during the walk does not shift the next page', async () => {
    const page1 = (await listEmails(orm, { organizationId: owner.organizationId, domainIds: null, limit: 2 })).slice(0, 2);
    await insertEmail(orm, owner, { created_at: at(1000) });
    const last = page1[1];
    const page2 = await list({ after: { createdAt: new Date(last.created_at), id: last.id }, limit: 2 });
    assert.deepEqual(page2, ids(2, 3, 4));
  });
});
