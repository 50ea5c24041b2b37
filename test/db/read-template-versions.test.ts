import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { readTemplateVersions } from '../../db/sql/read-template-versions';
import { uuidv7 } from '../../db/ids';
import { insertOrganization, insertRow, insertTemplate, openTestDb } from '../support/db-fixtures';

// Published versions are immutable and found by their (unguessable, already resolved) id: the
// statement has no organization scope of its own (resolve-templates.ts scopes the ids) and no
// race. Its rule: exactly the versions asked for, with their content.
describe('db/sql/read-template-versions: published versions by id', function () {
  let orm: Orm;
  before(async () => {
    orm = await openTestDb('db_read_template_versions');
  });
  after(async () => orm.close());

  async function version(templateId: string, n: number, over: Record<string, unknown> = {}) {
    return insertRow(orm, 'template_versions', {
      id: uuidv7(),
      template_id: templateId,
      version: n,
      subject: `Subject v${n}`,
      html: `<p>v${n}</p>`,
      text: null,
      variables: [{ key: 'name', type: 'string', fallback: `v${n}` }],
      published_at: new Date(),
      ...over,
    });
  }

  it('answers the versions asked for with their content, and not the others', async () => {
    const org = await insertOrganization(orm);
    const t = await insertTemplate(orm, org.id);
    const v1 = await version(t.id, 1);
    const v2 = await version(t.id, 2, { html: null, text: 'plain' });
    await version(t.id, 3);
    const rows = await readTemplateVersions(orm, [v2.id, v1.id, uuidv7()]);
    assert.deepEqual(
      rows.sort((a, b) => a.subject.localeCompare(b.subject)),
      [
        { id: v1.id, subject: 'Subject v1', html: '<p>v1</p>', text: null, variables: [{ key: 'name', type: 'string', fallback: 'v1' }] },
        { id: v2.id, subject: 'Subject v2', html: null, text: 'plain', variables: [{ key: 'name', type: 'string', fallback: 'v2' }] },
      ],
    );
  });

  it('answers nothing for no ids', async () => {
    assert.deepEqual(await readTemplateVersions(orm, []), []);
  });
});
