import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { senderDomainAllowed } from '../../db/sql/sender-domain';
import { insertDomain, insertOrganization, openTestDb, unique, type Row } from '../support/db-fixtures';

// A read of one organization's domains: no race to settle. Its rule, case by case.
describe('db/sql/sender-domain: whether a key may send from a domain', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;

  before(async () => {
    orm = await openTestDb('db_sender_domain');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
  });
  after(async () => orm.close());

  it('allows a verified, undeleted domain of the organization, whatever the case of the name asked', async () => {
    const d = await insertDomain(orm, org.id, { name: `${unique('mixed')}.Example.Test` });
    assert.equal(await senderDomainAllowed(orm, org.id, d.name, null), true);
    assert.equal(await senderDomainAllowed(orm, org.id, d.name.toUpperCase(), null), true);
  });

  it('refuses a pending domain, a deleted one, and an unknown name', async () => {
    const pending = await insertDomain(orm, org.id, { status: 'pending' });
    const deleted = await insertDomain(orm, org.id, { deleted_at: new Date() });
    assert.equal(await senderDomainAllowed(orm, org.id, pending.name, null), false);
    assert.equal(await senderDomainAllowed(orm, org.id, deleted.name, null), false);
    assert.equal(await senderDomainAllowed(orm, org.id, `${unique('none')}.example.test`, null), false);
  });

  it('refuses another organization’s verified domain', async () => {
    const theirs = await insertDomain(orm, other.id);
    assert.equal(await senderDomainAllowed(orm, org.id, theirs.name, null), false);
    assert.equal(await senderDomainAllowed(orm, other.id, theirs.name, null), true);
  });

  it('a restricted key may use only the domains it lists', async () => {
    const a = await insertDomain(orm, org.id);
    const b = await insertDomain(orm, org.id);
    assert.equal(await senderDomainAllowed(orm, org.id, a.name, [a.id]), true);
    assert.equal(await senderDomainAllowed(orm, org.id, b.name, [a.id]), false);
    assert.equal(await senderDomainAllowed(orm, org.id, a.name, []), false);
    assert.equal(await senderDomainAllowed(orm, org.id, b.name, [a.id, b.id]), true);
  });
});
