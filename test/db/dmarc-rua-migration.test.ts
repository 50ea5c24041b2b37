import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { DMARC_RUA_UPDATE } from '../../db/migrations/Migration20261218000000_dmarc_rua';
import { insertDomain, insertOrganization, openTestDb, unique, type Row } from '../support/db-fixtures';

/**
 * Issue 51: domains made before the fix suggest `rua=mailto:dmarc@<domain>`, an address nobody
 * reads. The migration's statement points them at `dmarc-reports@<return-path host>`, where the
 * inbound listener takes reports, and leaves every other record as it was.
 */
describe('db/migrations: the DMARC record’s rua= moves to where reports are read', function () {
  let orm: Orm;
  let org: Row;
  before(async () => {
    orm = await openTestDb('db_dmarc_rua');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  const records = (name: string, dmarc: string) => [
    {
      purpose: 'dkim',
      type: 'TXT',
      name: `s._domainkey.${name}`,
      value: 'v=DKIM1; k=rsa; p=AAA',
      required: true,
      observed: null,
      status: 'verified',
    },
    { purpose: 'dmarc', type: 'TXT', name: `_dmarc.${name}`, value: dmarc, required: false, observed: null, status: 'pending' },
  ];
  const read = async (id: string) =>
    (await orm.em.fork().getConnection().execute(`select records from domains where id = ?`, [id]))[0].records as {
      purpose: string;
      value: string;
    }[];

  it('rewrites the old suggestion, keeps records an operator changed and domains without a return path', async () => {
    const name = `${unique('old')}.example.test`;
    const old = await insertDomain(orm, org.id, {
      name,
      return_path_host: `bounces.${name}`,
      records: records(name, `v=DMARC1; p=none; rua=mailto:dmarc@${name}`),
    });
    const mine = `${unique('mine')}.example.test`;
    const changed = await insertDomain(orm, org.id, {
      name: mine,
      return_path_host: `bounces.${mine}`,
      records: records(mine, 'v=DMARC1; p=reject; rua=mailto:me@elsewhere.example'),
    });
    const bare = `${unique('bare')}.example.test`;
    const noHost = await insertDomain(orm, org.id, {
      name: bare,
      records: records(bare, `v=DMARC1; p=none; rua=mailto:dmarc@${bare}`),
    });

    await orm.em.fork().getConnection().execute(DMARC_RUA_UPDATE);

    const after = await read(old.id);
    assert.deepEqual(
      after.map((r) => r.purpose),
      ['dkim', 'dmarc'],
      'the records keep their order',
    );
    assert.equal(after[1].value, `v=DMARC1; p=none; rua=mailto:dmarc-reports@bounces.${name}`);
    assert.deepEqual(after[0], records(name, '')[0]);
    assert.equal((await read(changed.id))[1].value, 'v=DMARC1; p=reject; rua=mailto:me@elsewhere.example');
    assert.equal((await read(noHost.id))[1].value, `v=DMARC1; p=none; rua=mailto:dmarc@${bare}`);
  });
});
