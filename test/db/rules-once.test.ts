import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { effectiveState, effectiveStateIs, explicitRow, topicsWithRows } from '../../db/sql/topic-state';
import { WEBHOOK_FUNCTIONS } from '../../db/sql/webhook-payloads';
import { insertContact, insertOrganization, insertSubscription, insertTopic, openTestDb, sql, type Row } from '../support/db-fixtures';

/**
 * Rules written once in db/sql/ (issue 36): each form a rule takes agrees with the others, and
 * what the migrations installed in the database is the module's text.
 */
describe('db/sql: rules written once', function () {
  let orm: Orm;
  before(async () => {
    orm = await openTestDb('db_rules_once');
  });
  after(async () => orm.close());

  it('topic-state.ts: the effective state read from a topic row and the probe for a known default agree, for every case', async () => {
    const org = await insertOrganization(orm);
    const states = ['subscribed', 'unsubscribed'] as const;
    for (const defaultOptIn of [true, false]) {
      const topic = await insertTopic(orm, org.id, { default_opt_in: defaultOptIn });
      for (const explicit of [null, ...states]) {
        const contact: Row = await insertContact(orm, org.id);
        if (explicit) await insertSubscription(orm, contact.id, topic.id, explicit);
        const [read] = await sql(
          orm,
          `select ${effectiveState('t.default_opt_in', 's.state')} as state from ${topicsWithRows('$1')} where t.id = $2`,
          [contact.id, topic.id],
        );
        assert.equal(read.state, explicit ?? (defaultOptIn ? 'subscribed' : 'unsubscribed'), `default ${defaultOptIn}, row ${explicit}`);
        for (const state of states) {
          const { row, present } = effectiveStateIs(defaultOptIn, state);
          const [probe] = await sql(orm, `select ${present ? '' : 'not'} ${explicitRow('$1', '$2', '$3')} as holds`, [
            topic.id,
            row,
            contact.id,
          ]);
          assert.equal(probe.holds, read.state === state, `default ${defaultOptIn}, row ${explicit}, asked ${state}`);
        }
      }
    }
  });

  it('webhook-payloads.ts: the database holds each fan-out function as the module writes it (a change needs a migration)', async () => {
    const rows = await sql(orm, `select proname, prosrc from pg_proc where proname = any($1::text[])`, [
      WEBHOOK_FUNCTIONS.map((f) => f.name),
    ]);
    const inDb = new Map(rows.map((r) => [r.proname, r.prosrc]));
    for (const f of WEBHOOK_FUNCTIONS) assert.equal(inDb.get(f.name), f.body, `${f.name}: run WEBHOOK_FUNCTIONS again in a new migration`);
  });
});
