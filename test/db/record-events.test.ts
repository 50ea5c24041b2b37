import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { recordEvents, type EventRequest, type RecordedEvent } from '../../db/sql/record-events';
import {
  insertAutomation,
  insertAutomationRun,
  insertContact,
  insertDomain,
  insertKey,
  insertOrganization,
  ms,
  openTestDb,
  sql,
  unique,
  type KeyRow,
  type Row,
} from '../support/db-fixtures';
import { releasedTogether, typed, values } from '../support/db-fixtures-rz';

/** The run id the statement derives: md5(automation, contact, dedupe key) as a UUID. */
function runId(automationId: string, contactId: string, key: string): string {
  const h = createHash('md5').update(`${automationId}:${contactId}:${key}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

describe('db/sql/record-events: POST /events, a group in one statement', function () {
  let orm: Orm;
  const now = new Date('2031-06-15T10:00:00.000Z');

  before(async () => {
    orm = await openTestDb('db_record_events');
  });
  after(async () => orm.close());

  /** An organization with a live key and an enabled automation on `signed_up`. */
  async function setup(orgOver: Row = {}): Promise<{ org: Row; key: KeyRow; automation: Row }> {
    const org = await insertOrganization(orm, orgOver);
    const key = await insertKey(orm, org.id, { rate_limit: 1000 });
    const automation = await insertAutomation(orm, org.id, key.id, { trigger_event: 'signed_up' });
    return { org, key, automation };
  }
  const event = (k: KeyRow, email: string, over: Partial<EventRequest> = {}): EventRequest => ({
    tokenHash: k.token_hash,
    email,
    newContactId: uuidv7(),
    set: {},
    remove: [],
    name: 'signed_up',
    eventId: unique('ev'),
    ...over,
  });
  const record = async (e: EventRequest, at = now): Promise<RecordedEvent> => (await recordEvents(orm, [e], at))[0];
  const runsOf = (contactId: string) =>
    sql(
      orm,
      'select id, automation_id, dedupe_key, trigger, data, status from automation_runs where contact_id = $1 order by created_at, id',
      [contactId],
    );
  const contactRow = async (orgId: string, email: string) =>
    (await sql(orm, 'select * from contacts where organization_id = $1 and email = $2', [orgId, email]))[0];
  const quota = async (orgId: string) =>
    (await sql(orm, 'select contacts, runs from event_quotas where organization_id = $1 and day = $2', [orgId, '2031-06-15']))[0];
  const address = () => `${unique('e')}@example.com`;

  it('a new contact: created with the event’s data, and one run per automation on the event’s name', async () => {
    const { org, key, automation } = await setup();
    await insertAutomation(orm, org.id, key.id, { trigger_event: 'other_event' });
    const e = event(key, address(), { set: { plan: 'pro' } });
    const r = await record(e);
    assert.deepEqual(r, {
      req: 0,
      known: true,
      admitted: true,
      mode: 'live',
      rate_limit: 1000,
      contact_id: e.newContactId,
      created: true,
      runs: 1,
      resumed: 0,
    });
    assert.deepEqual((await contactRow(org.id, e.email)).properties, { plan: 'pro' });
    const [run] = await runsOf(e.newContactId);
    assert.deepEqual(
      [run.id, run.automation_id, run.dedupe_key, run.trigger, run.data, run.status],
      [
        runId(automation.id, e.newContactId, `event:${e.eventId}`),
        automation.id,
        `event:${e.eventId}`,
        { type: 'event', event: 'signed_up', event_id: e.eventId },
        { plan: 'pro' },
        'running',
      ],
    );
    assert.deepEqual(await quota(org.id), { contacts: 1, runs: 1 });
  });

  it('the same event id again starts nothing; another event id starts another run', async () => {
    const { key } = await setup();
    const e = event(key, address());
    const first = await record(e);
    assert.equal((await record({ ...e, newContactId: uuidv7() })).runs, 0);
    assert.equal((await record({ ...e, eventId: unique('ev2') })).runs, 1);
    assert.equal((await runsOf(first.contact_id!)).length, 2);
  });

  it('an event with nothing new writes no contact row; one with new data merges it', async () => {
    const { org, key } = await setup();
    const c = await insertContact(orm, org.id, { properties: { a: 1, b: 2 } });
    const same = await record(event(key, c.email, { set: { a: 1 } }), new Date(now.getTime() + 1000));
    assert.deepEqual([same.contact_id, same.created], [c.id, false]);
    assert.equal(ms((await contactRow(org.id, c.email)).updated_at), ms(c.updated_at), 'not written');
    await record(event(key, c.email, { set: { c: 3 }, remove: ['a'] }), new Date(now.getTime() + 2000));
    const row = await contactRow(org.id, c.email);
    assert.deepEqual([row.properties, ms(row.updated_at)], [{ b: 2, c: 3 }, now.getTime() + 2000]);
  });

  it('contact.created automations start for a contact the event created, with an unrestricted key only', async () => {
    const { org, key } = await setup();
    const welcome = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
    const created = await record(event(key, address(), { name: 'nothing_listens' }));
    assert.deepEqual(
      (await runsOf(created.contact_id!)).map((r) => [r.automation_id, r.dedupe_key]),
      [[welcome.id, 'contact.created']],
    );
    const d = await insertDomain(orm, org.id);
    const restricted = await insertKey(orm, org.id, { domain_ids: [d.id] });
    const viaRestricted = await record(event(restricted, address(), { name: 'nothing_listens' }));
    assert.equal(viaRestricted.created, true);
    assert.deepEqual(await runsOf(viaRestricted.contact_id!), []);
    const existing = await insertContact(orm, org.id);
    await record(event(key, existing.email, { name: 'nothing_listens', set: { x: 1 } }));
    assert.deepEqual(await runsOf(existing.id), [], 'an existing contact is not created');
  });

  it('starts no run for a disabled or deleted automation, nor for another organization’s', async () => {
    const { org, key } = await setup();
    await sql(orm, 'update automations set enabled = false where organization_id = $1', [org.id]);
    await insertAutomation(orm, org.id, key.id, { deleted_at: new Date() });
    const other = await setup();
    const r = await record(event(key, address()));
    assert.equal(r.runs, 0);
    assert.deepEqual(await sql(orm, 'select 1 from automation_runs where automation_id = $1', [other.automation.id]), []);
  });

  it('resumes this contact’s runs waiting for the event’s name before their deadline, with the event’s data', async () => {
    const { org, key, automation } = await setup();
    const c = await insertContact(orm, org.id);
    const other = await insertContact(orm, org.id);
    const waiting = (contact: Row, over: Row) =>
      insertAutomationRun(orm, typed(automation), typed(contact), {
        status: 'waiting',
        waiting_event: 'purchased',
        data: { a: 1 },
        ...over,
      });
    const due = await waiting(c, { wait_deadline: new Date(now.getTime() + 60_000) });
    const late = await waiting(c, { wait_deadline: new Date(now.getTime() - 1000) });
    const otherEvent = await waiting(c, { waiting_event: 'refunded', wait_deadline: new Date(now.getTime() + 60_000) });
    const otherContact = await waiting(other, { wait_deadline: new Date(now.getTime() + 60_000) });
    const e = event(key, c.email, { name: 'purchased', set: { amount: 5 } });
    const r = await record(e);
    assert.equal(r.resumed, 1);
    const rows = new Map(
      (
        await sql(orm, 'select id, resumed, data, wake_at from automation_runs where id = any($1)', [
          [due.id, late.id, otherEvent.id, otherContact.id],
        ])
      ).map((x) => [x.id, x]),
    );
    const d = rows.get(due.id)!;
    assert.deepEqual(
      [d.resumed.event, d.resumed.event_id, ms(d.resumed.at), d.data, ms(d.wake_at)],
      ['purchased', e.eventId, now.getTime(), { a: 1, amount: 5 }, now.getTime()],
    );
    for (const id of [late.id, otherEvent.id, otherContact.id]) assert.equal(rows.get(id)!.resumed, null);
  });

  it('a test key or a request past the cap writes nothing; an unknown token is not known', async () => {
    const { org } = await setup();
    const test = await insertKey(orm, org.id, { mode: 'test' });
    const capped = await insertKey(orm, org.id, { rate_limit: 1 });
    const [t, c1, c2, u] = await recordEvents(
      orm,
      [
        event(test, address()),
        event(capped, address()),
        event(capped, address()),
        event({ token_hash: 'c'.repeat(64) } as KeyRow, address()),
      ],
      now,
    );
    assert.deepEqual([t.known, t.admitted, t.mode, t.contact_id], [true, true, 'test', null]);
    assert.deepEqual([c1.admitted, c1.created], [true, true]);
    assert.deepEqual([c2.admitted, c2.contact_id, c2.runs], [false, null, 0]);
    assert.deepEqual([u.known, u.admitted], [false, false]);
    const [n] = await sql(orm, 'select count(*)::int as n from contacts where organization_id = $1', [org.id]);
    assert.equal(n.n, 1);
  });

  it('the day’s quotas: a statement past the run or contact limit fails whole', async () => {
    const { org, key } = await setup({ event_run_quota: 1, event_contact_quota: 10 });
    const first = event(key, address());
    await record(first);
    const second = event(key, address());
    await assert.rejects(record(second), /event_quotas_runs/);
    assert.equal(await contactRow(org.id, second.email), undefined, 'the failed statement created no contact');
    assert.deepEqual(await quota(org.id), { contacts: 1, runs: 1 });
    const c = await setup({ event_contact_quota: 1 });
    await record(event(c.key, address(), { name: 'nothing_listens' }));
    await assert.rejects(record(event(c.key, address(), { name: 'nothing_listens' })), /event_quotas_contacts/);
  });

  /**
   * The race: one event delivered twice at once (a client retry), through two keys so they do not
   * queue on one rate window. They meet on the run's id (behind a transaction holding it, then
   * rolled back): one run starts, and the quota counts one.
   */
  it('race: the same event recorded concurrently starts one run, counted once', async () => {
    const { org, key, automation } = await setup();
    const c = await insertContact(orm, org.id);
    const keys = [key, await insertKey(orm, org.id), await insertKey(orm, org.id)];
    const eventId = unique('race');
    const id = runId(automation.id, c.id, `event:${eventId}`);
    const results = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into automation_runs (id, organization_id, automation_id, version, contact_id, email, dedupe_key, trigger, status, created_at, updated_at)
             values ($1, $2, $3, 1, $4, $5, 'held', '{}', 'running', now(), now())`,
            [id, org.id, automation.id, c.id, c.email],
          ],
        ],
        keys.map((k) => () => record(event(k, c.email, { eventId }))),
        'rollback',
      ),
    );
    assert.deepEqual(results.map((r) => r.runs).sort(), [0, 0, 1]);
    assert.equal((await runsOf(c.id)).length, 1);
    assert.deepEqual(await quota(org.id), { contacts: 0, runs: 1 });
  });

  /**
   * The race on the day's quota: events of one organization at once, each starting a run. They
   * queue on the quota row: exactly the limit succeeds, the others fail, and the count is exact.
   */
  it('race: concurrent events against one quota row admit exactly the limit and count every run', async () => {
    const { org } = await setup({ event_run_quota: 3 });
    await sql(
      orm,
      `insert into event_quotas (organization_id, day, contacts, contacts_limit, runs, runs_limit) values ($1, '2031-06-15', 0, 1000, 0, 3)`,
      [org.id],
    );
    const keys = [];
    for (let i = 0; i < 5; i++) keys.push(await insertKey(orm, org.id));
    const settled = await releasedTogether(
      orm,
      [[`select 1 from event_quotas where organization_id = $1 for update`, [org.id]]],
      keys.map((k) => () => record(event(k, address()))),
    );
    assert.equal(settled.filter((s) => s.status === 'fulfilled').length, 3, JSON.stringify(settled.map((s) => s.status)));
    for (const s of settled) if (s.status === 'rejected') assert.match(String(s.reason), /event_quotas_runs/);
    assert.deepEqual(await quota(org.id), { contacts: 3, runs: 3 });
    const [runs] = await sql(orm, 'select count(*)::int as n from automation_runs where organization_id = $1', [org.id]);
    assert.equal(runs.n, 3);
  });
});
