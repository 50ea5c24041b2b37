import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { updateTemplateDraft, type DraftChanges } from '../../db/sql/update-template-draft';
import { insertOrganization, insertTemplate, ms, openTestDb, sql, type Row } from '../support/db-fixtures';
import { releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/update-template-draft: a draft edit bumps the draft revision', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;
  const at = new Date('2031-07-08T09:10:11.000Z');

  before(async () => {
    orm = await openTestDb('db_update_template_draft');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
  });
  after(async () => orm.close());

  const edit = (templateId: string, changes: DraftChanges, organizationId = org.id) =>
    updateTemplateDraft(orm.em.fork(), { templateId, organizationId, changes, at });
  const read = async (id: string) =>
    (
      await sql(
        orm,
        'select name, slug, subject, html, text, variables, draft_revision, latest_version, updated_at from templates where id = $1',
        [id],
      )
    )[0];

  it('writes only the fields given, bumps the revision and the time', async () => {
    const t = await insertTemplate(orm, org.id, { slug: 'welcome', name: 'Welcome' });
    assert.equal(await edit(t.id, { subject: 'New subject', variables: [{ key: 'x', type: 'number' } as never] }), true);
    const row = await read(t.id);
    assert.deepEqual(
      { ...row, updated_at: ms(row.updated_at) },
      {
        name: 'Welcome',
        slug: 'welcome',
        subject: 'New subject',
        html: t.html,
        text: t.text,
        variables: [{ key: 'x', type: 'number' }],
        draft_revision: 1,
        latest_version: 0,
        updated_at: at.getTime(),
      },
    );
  });

  it('null clears a nullable field; an empty change still bumps the revision', async () => {
    const t = await insertTemplate(orm, org.id, { slug: 'clear-me' });
    assert.equal(await edit(t.id, { slug: null, html: null }), true);
    assert.equal(await edit(t.id, {}), true);
    const row = await read(t.id);
    assert.deepEqual([row.slug, row.html, row.text, row.draft_revision], [null, null, t.text, 2]);
  });

  it('false, and nothing written, for another organization’s template or one that is gone', async () => {
    const theirs = await insertTemplate(orm, other.id);
    assert.equal(await edit(theirs.id, { subject: 'hijack' }), false);
    const row = await read(theirs.id);
    assert.deepEqual([row.subject, row.draft_revision], [theirs.subject, 0]);
    assert.equal(await edit(uuidv7(), { subject: 'x' }), false);
  });

  /**
   * The race: edits of one draft at once (two editors; an edit and a publish, publish-template.ts
   * reads the revision). Each bumps the revision from the latest one, so none is lost: N edits,
   * revision N, and every field written by its own edit is kept.
   */
  it('race: concurrent edits of one draft bump the revision once each and keep every field', async () => {
    const t = await insertTemplate(orm, org.id);
    const changes: DraftChanges[] = [{ name: 'n1' }, { subject: 's1' }, { html: '<p>h</p>' }, { text: 't1' }, { slug: 'race-slug' }];
    const results = values(
      await releasedTogether(
        orm,
        [['select 1 from templates where id = $1 for update', [t.id]]],
        changes.map((c) => () => edit(t.id, c)),
      ),
    );
    assert.deepEqual(results, [true, true, true, true, true]);
    const row = await read(t.id);
    assert.deepEqual(
      [row.draft_revision, row.name, row.subject, row.html, row.text, row.slug],
      [5, 'n1', 's1', '<p>h</p>', 't1', 'race-slug'],
    );
  });
});
