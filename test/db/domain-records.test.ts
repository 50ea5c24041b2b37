import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { writeCheckedRecords } from '../../db/sql/domain-records';
import { insertDomain, insertOrganization, ms, openTestDb, sql } from '../support/db-fixtures';

/**
 * db/sql/domain-records: a DNS check's write. Its rule, "a verified domain stays verified", is the
 * statement's: a check that read the domain `pending`, raced by one that verified it (the loop
 * beside "verify now"), wrote `pending` back and mail from the domain was refused (422).
 */
describe('db/sql/domain-records: a check writes what it observed; a verified domain stays verified', function () {
  let orm: Orm;
  let organizationId: string;
  const at = new Date('2030-01-01T12:00:00Z');
  const records = [{ purpose: 'dkim', type: 'TXT', name: 'x._domainkey.d', value: 'v=DKIM1', required: true, status: 'missing' }];

  before(async () => {
    orm = await openTestDb('db_domain_records');
    organizationId = (await insertOrganization(orm)).id;
  });
  after(async () => orm.close());

  const write = (domainId: string, status: 'pending' | 'verified', from: unknown[] = []) =>
    orm.em.fork().transactional((em) => writeCheckedRecords(em, { domainId, from: from as never, records: records as never, at, status }));
  const row = async (id: string) =>
    (await sql(orm, 'select status, records, verified_at, last_checked_at from domains where id = $1', [id]))[0];

  it('a pending check over a domain verified meanwhile keeps it verified, and still records what it observed', async () => {
    const d = await insertDomain(orm, organizationId, { status: 'pending', records: [] });
    // Verified by another check (or "verify now") after this one read it.
    await sql(orm, `update domains set status = 'verified', verified_at = $2 where id = $1`, [d.id, at]);
    assert.equal(await write(d.id, 'pending'), true);
    const r = await row(d.id);
    assert.equal(r.status, 'verified');
    assert.equal(r.records[0].status, 'missing', 'what the check observed is written');
    assert.equal(ms(r.last_checked_at), at.getTime());
  });

  it('a matching check verifies a pending domain once, with its time; one that does not leaves it pending', async () => {
    const d = await insertDomain(orm, organizationId, { status: 'pending', records: [] });
    assert.equal(await write(d.id, 'pending'), true);
    assert.equal((await row(d.id)).status, 'pending');
    assert.equal(await write(d.id, 'verified', records), true);
    const r = await row(d.id);
    assert.deepEqual([r.status, ms(r.verified_at)], ['verified', at.getTime()]);
  });

  it('writes nothing when the records changed since the check read them (it looks again)', async () => {
    const d = await insertDomain(orm, organizationId, { status: 'pending', records: [] });
    assert.equal(await write(d.id, 'verified', [{ other: true }]), false);
    assert.equal((await row(d.id)).status, 'pending');
  });
});
