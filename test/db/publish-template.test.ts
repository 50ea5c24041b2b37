import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { publishTemplate } from '../../db/sql/publish-template';
import {
  concurrently,
  insertOrganization,
  insertTemplate,
  lockWaiters,
  ms,
  openTestDb,
  openTransaction,
  sql,
  type Row,
} from '../support/db-fixtures';

describe("db/sql/publish-template: a template's checked draft becomes its next version, numbered in turn", function () {
  let orm: Orm;
  let org: Row;
  const at = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_publish_template');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  const publish = (t: Row, over: Partial<{ organizationId: string; draftRevision: number }> = {}) =>
    publishTemplate(orm.em.fork(), {
      templateId: t.id,
      organizationId: over.organizationId ?? org.id,
      draftRevision: over.draftRevision ?? t.draft_revision,
      versionId: randomUUID(),
      at,
    });
  const versionsOf = (templateId: string) =>
    sql(orm, 'select version, subject, html, text, variables from template_versions where template_id = $1 order by version', [templateId]);

  it('freezes the draft as version 1, then 2; the template counts them', async () => {
    const t = await insertTemplate(orm, org.id, { subject: 'Hi {{name}}', html: '<b>x</b>', text: 'x', draft_revision: 3 });
    const v1 = await publish(t);
    assert.equal(v1?.version, 1);
    assert.equal(ms(v1!.published_at), at.getTime());
    assert.equal((await publish(t))?.version, 2);
    const versions = await versionsOf(t.id);
    assert.deepEqual(
      versions.map((v) => [v.version, v.subject, v.html, v.text]),
      [
        [1, 'Hi {{name}}', '<b>x</b>', 'x'],
        [2, 'Hi {{name}}', '<b>x</b>', 'x'],
      ],
    );
    assert.deepEqual(versions[0].variables, t.variables);
    assert.equal((await sql(orm, 'select latest_version from templates where id = $1', [t.id]))[0].latest_version, 2);
  });

  it('a draft changed since the caller checked it is not published (null), nor is a template of another organization or none', async () => {
    const t = await insertTemplate(orm, org.id, { draft_revision: 5 });
    assert.equal(await publish(t, { draftRevision: 4 }), null);
    const other = await insertOrganization(orm);
    assert.equal(await publish(t, { organizationId: other.id }), null);
    assert.equal(await publish({ id: randomUUID(), draft_revision: 0 }), null);
    assert.deepEqual(await versionsOf(t.id), []);
    assert.equal((await sql(orm, 'select latest_version from templates where id = $1', [t.id]))[0].latest_version, 0);
  });

  it("runs in the caller's transaction: rolled back with it, the number is not used up", async () => {
    const t = await insertTemplate(orm, org.id);
    await assert.rejects(
      orm.em.fork().transactional(async (em) => {
        await publishTemplate(em, { templateId: t.id, organizationId: org.id, draftRevision: 0, versionId: randomUUID(), at });
        throw new Error('audit failed');
      }),
      /audit failed/,
    );
    assert.equal((await publish(t))?.version, 1);
  });

  it('race: concurrent publishes of one draft number 1..n, each once', async () => {
    const t = await insertTemplate(orm, org.id);
    const rows = await concurrently(8, () => publish(t));
    assert.deepEqual(
      rows.map((r) => r?.version).sort((a, b) => a! - b!),
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
    assert.equal((await versionsOf(t.id)).length, 8);
  });

  it('race: a publish blocked behind a draft edit that commits publishes nothing', async () => {
    const t = await insertTemplate(orm, org.id, { draft_revision: 1 });
    const edit = await openTransaction(orm);
    await edit.query("update templates set subject = 'edited', draft_revision = draft_revision + 1 where id = $1", [t.id]);
    const publishing = publish(t);
    // The publish waits for the edit's row lock, then finds the revision it checked gone.
    await lockWaiters(orm, 1);
    await edit.commit();
    assert.equal(await publishing, null);
    assert.deepEqual(await versionsOf(t.id), []);
  });
});
