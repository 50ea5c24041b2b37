import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { resolveTemplates, type ResolvedRow } from '../../db/sql/resolve-templates';
import { insertKey, insertOrganization, insertRow, insertTemplate, openTestDb, sql, unique, type Row } from '../support/db-fixtures';

// A read of immutable versions: no race. Its rule: refs resolved in the organization of the token
// (or the one given), one row per ref, nulls where nothing matches.
describe('db/sql/resolve-templates: the published versions that sends name', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;
  let t: Row;
  let versions: Row[];
  let draftOnly: Row;
  let theirs: Row;

  async function publish(templateId: string, n: number): Promise<Row> {
    const v = await insertRow(orm, 'template_versions', {
      id: uuidv7(),
      template_id: templateId,
      version: n,
      subject: `v${n}`,
      variables: [],
      published_at: new Date(),
    });
    await sql(orm, 'update templates set latest_version = $2 where id = $1', [templateId, n]);
    return v;
  }

  before(async () => {
    orm = await openTestDb('db_resolve_templates');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
    t = await insertTemplate(orm, org.id, { slug: 'welcome' });
    versions = [await publish(t.id, 1), await publish(t.id, 2)];
    draftOnly = await insertTemplate(orm, org.id, { slug: 'draft-only' });
    theirs = await insertTemplate(orm, other.id, { slug: 'theirs' });
    await publish(theirs.id, 1);
  });
  after(async () => orm.close());

  const byI = (rows: ResolvedRow[]) => [...rows].sort((a, b) => a.i - b.i);

  it('by id or slug; a null version is the latest, a number that version', async () => {
    const rows = byI(
      await resolveTemplates(orm, { organizationId: org.id }, [
        { id: t.id, slug: null, version: null },
        { id: null, slug: 'welcome', version: 1 },
        { id: t.id, slug: null, version: 2 },
      ]),
    );
    assert.deepEqual(rows, [
      { organization_id: org.id, i: 0, template_id: t.id, version_id: versions[1].id, version: 2 },
      { organization_id: org.id, i: 1, template_id: t.id, version_id: versions[0].id, version: 1 },
      { organization_id: org.id, i: 2, template_id: t.id, version_id: versions[1].id, version: 2 },
    ]);
  });

  it('nulls where the template is missing, the version does not exist, or the template was never published', async () => {
    const rows = byI(
      await resolveTemplates(orm, { organizationId: org.id }, [
        { id: uuidv7(), slug: null, version: null },
        { id: null, slug: unique('missing'), version: null },
        { id: t.id, slug: null, version: 9 },
        { id: draftOnly.id, slug: null, version: null },
      ]),
    );
    assert.deepEqual(rows, [
      { organization_id: org.id, i: 0, template_id: null, version_id: null, version: null },
      { organization_id: org.id, i: 1, template_id: null, version_id: null, version: null },
      { organization_id: org.id, i: 2, template_id: t.id, version_id: null, version: null },
      { organization_id: org.id, i: 3, template_id: draftOnly.id, version_id: null, version: null },
    ]);
  });

  it('an id wins over a slug given with it', async () => {
    const [row] = await resolveTemplates(orm, { organizationId: org.id }, [{ id: draftOnly.id, slug: 'welcome', version: null }]);
    assert.equal(row.template_id, draftOnly.id);
    assert.equal(row.version_id, null);
  });

  it('never finds another organization’s template, by id or by slug', async () => {
    const rows = byI(
      await resolveTemplates(orm, { organizationId: org.id }, [
        { id: theirs.id, slug: null, version: null },
        { id: null, slug: 'theirs', version: 1 },
      ]),
    );
    assert.deepEqual(
      rows.map((r) => [r.template_id, r.version_id]),
      [
        [null, null],
        [null, null],
      ],
    );
  });

  it('by token: resolves in the key’s organization; an unknown token or a revoked key answers no rows', async () => {
    const key = await insertKey(orm, org.id);
    const theirKey = await insertKey(orm, other.id);
    const ref = [{ id: null, slug: 'welcome', version: null }];
    assert.deepEqual(await resolveTemplates(orm, { tokenHash: key.token_hash }, ref), [
      { organization_id: org.id, i: 0, template_id: t.id, version_id: versions[1].id, version: 2 },
    ]);
    const [viaTheirs] = await resolveTemplates(orm, { tokenHash: theirKey.token_hash }, ref);
    assert.deepEqual([viaTheirs.organization_id, viaTheirs.template_id], [other.id, null], 'their key resolves in their organization');
    assert.deepEqual(await resolveTemplates(orm, { tokenHash: 'e'.repeat(64) }, ref), []);
    await sql(orm, 'update api_keys set revoked_at = now() where id = $1', [key.id]);
    assert.deepEqual(await resolveTemplates(orm, { tokenHash: key.token_hash }, ref), []);
  });
});
