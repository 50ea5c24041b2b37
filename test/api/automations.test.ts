import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import type { Received } from '../support/sink';
import { waitFor, sleep } from '../support/wait';
import { request } from '../support/http';
import { createKey } from '../../core/provisioning';

/**
 * Issue 17 against the running service (embedded engine): POST /events, the automations API, and
 * each step type of an AutomationRun end to end.
 */
describe('API: events and automations', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let seq = 0;

  before(async () => {
    env = await sharedService();
  });

  const address = (tag: string) => `${tag}-${Date.now()}-${++seq}@people.example`;
  const to = (m: Received) => m.envelopeTo[0];
  const mailTo = (a: string) => env.sink.received.filter((m) => to(m) === a);
  const publishTemplate = async (t: Tenant, subject = 'Hi {{first_name}}', html = '<p>Plan {{plan}}</p>') => {
    const created = await t.call('POST', '/api/v1/templates', {
      as: 'admin',
      body: {
        name: 'Welcome',
        slug: `welcome${++seq}`,
        subject,
        html,
        variables: [
          { key: 'first_name', type: 'string', fallback: 'there' },
          { key: 'plan', type: 'string', fallback: 'none' },
        ],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await t.call('POST', `/api/v1/templates/${created.body.id}/publish`, { as: 'admin' })).status, 201);
    return created.body as { id: string; slug: string };
  };
  const automation = async (t: Tenant, body: object) => {
    const res = await t.call('POST', '/api/v1/automations', { as: 'admin', body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };
  const runsOf = async (t: Tenant, id: string, query = '') => {
    const res = await t.call('GET', `/api/v1/automations/${id}/runs${query}`, { as: 'admin' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data as any[];
  };
  const runSettled = (t: Tenant, automationId: string, statuses: string[]) =>
    waitFor(
      async () => {
        const [run] = await runsOf(t, automationId);
        return run && statuses.includes(run.status) ? run : undefined;
      },
      `a run ${statuses.join('/')}`,
      30_000,
    );

  it('an event starts a run: delay, send (personalised with the event data), wait_for_event resumed by a second event', async () => {
    const t = await newTenant(env);
    const tpl = await publishTemplate(t);
    const a = await automation(t, {
      name: 'Onboarding',
      trigger: { event: 'signed_up' },
      steps: [
        { type: 'delay', duration: 'PT1S' },
        { type: 'send_email', from: `Team <team@${t.domain}>`, template: { slug: tpl.slug } },
        { type: 'wait_for_event', event: 'activated', timeout: 'PT60S' },
        { type: 'update_contact', properties: { onboarded: true } },
      ],
    });
    assert.equal(a.object, 'automation');
    assert.equal(a.version, 1);
    assert.deepEqual(a.trigger, { event: 'signed_up' });
    const email = address('ann');
    const ev = await t.call('POST', '/api/v1/events', { body: { name: 'signed_up', email, data: { first_name: 'Ann', plan: 'pro' } } });
    assert.equal(ev.status, 200, JSON.stringify(ev.body));
    assert.equal(ev.body.runs, 1);
    const mail = await waitFor(async () => mailTo(email)[0], 'the send step');
    assert.equal(mail.parsed.subject, 'Hi Ann');
    assert.ok(String(mail.parsed.html).includes('Plan pro'));
    const waiting = await runSettled(t, a.id, ['waiting']);
    assert.equal(waiting.step, 'steps[2]');
    assert.equal(waiting.waiting_for.event, 'activated');
    const resume = await t.call('POST', '/api/v1/events', { body: { name: 'activated', email } });
    assert.equal(resume.body.runs, 0);
    const done = await runSettled(t, a.id, ['completed']);
    assert.deepEqual(
      done.history.map((h: any) => [h.step, h.type, h.result?.outcome]),
      [
        ['steps[0]', 'delay', 'elapsed'],
        ['steps[1]', 'send_email', 'accepted'],
        ['steps[2]', 'wait_for_event', 'event'],
        ['steps[3]', 'update_contact', 'updated'],
      ],
    );
    // One timestamp format everywhere, the history's too (issue 51: it showed …59.49+00:00).
    const times = done.history.flatMap((h: any) => [h.started_at, h.finished_at].filter((x) => x !== undefined));
    assert.ok(times.length >= 8, JSON.stringify(done.history));
    for (const at of [...times, done.created_at, done.finished_at]) assert.match(at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const contact = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' })).body;
    assert.equal(contact.properties.onboarded, true);
    assert.equal(contact.properties.plan, 'pro');
  });

  const sql = (text: string, values: unknown[] = []) => env.service.db.orm.em.fork().execute(text, values);
  const contactCount = async (t: Tenant) =>
    Number((await sql('select count(*)::int as n from contacts where organization_id = ?', [t.orgId]))[0].n);
  const runCount = async (t: Tenant) =>
    Number((await sql('select count(*)::int as n from automation_runs where organization_id = ?', [t.orgId]))[0].n);
  const quota = async (t: Tenant) =>
    (await sql('select contacts, runs from event_quotas where organization_id = ?', [t.orgId]))[0] as
      { contacts: number; runs: number } | undefined;
  const sleeper = (t: Tenant, event: string) =>
    automation(t, { name: `Sleeps on ${event}`, trigger: { event }, steps: [{ type: 'delay', duration: 'P1D' }] });

  it('POST /events refuses test keys, unknown fields and bad values, writing nothing', async () => {
    const t = await newTenant(env);
    await sleeper(t, 'ping');
    const email = address('refused');
    const test = await t.call('POST', '/api/v1/events', { as: 'test', body: { name: 'ping', email } });
    assert.equal(test.status, 403);
    assert.equal(test.body.error.code, 'test_key_not_allowed');
    for (const body of [
      { name: 'ping', email, extra: 1 },
      { email },
      { name: '', email },
      { name: 'x'.repeat(129), email },
      { name: 'ping', email, id: 'y'.repeat(129) },
      { name: 'ping', email, id: '' },
      { name: 'ping', email: 'two@a.example, three@b.example' },
      { name: 'ping', email, data: { nested: { a: 1 } } },
      { name: 'ping', email, data: [1] },
      { name: 'ping', email, data: { 'bad key!': 1 } },
      { name: 'ping', email, __proto__: { polluted: true }, constructor: 1 },
    ]) {
      const res = await t.call('POST', '/api/v1/events', { body });
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.error.code, 'validation_error');
    }
    assert.equal(await contactCount(t), 0);
    assert.equal(await runCount(t), 0);
    assert.equal(await quota(t), undefined);
  });

  it('the same event id for the same automation and contact starts one run, also when repeated concurrently', async () => {
    const t = await newTenant(env);
    const a = await sleeper(t, 'paid');
    const b = await sleeper(t, 'paid');
    const email = address('dupe');
    const first = await t.call('POST', '/api/v1/events', { body: { name: 'paid', email, id: 'invoice-1' } });
    assert.equal(first.body.runs, 2, 'one run per matching automation');
    assert.equal(first.body.id, 'invoice-1');
    const again = await t.call('POST', '/api/v1/events', { body: { name: 'paid', email, id: 'invoice-1' } });
    assert.equal(again.status, 200);
    assert.equal(again.body.runs, 0);
    const burst = await Promise.all(
      Array.from({ length: 12 }, () => t.call('POST', '/api/v1/events', { body: { name: 'paid', email, id: 'invoice-2' } })),
    );
    assert.deepEqual(
      burst.map((r) => r.status),
      Array(12).fill(200),
    );
    assert.deepEqual(burst.map((r) => r.body.runs).sort(), [...Array(11).fill(0), 2]);
    assert.equal((await runsOf(t, a.id)).length, 2);
    assert.equal((await runsOf(t, b.id)).length, 2);
    // Another contact with the same event id is another occurrence.
    assert.equal(
      (await t.call('POST', '/api/v1/events', { body: { name: 'paid', email: address('other'), id: 'invoice-1' } })).body.runs,
      2,
    );
    // A generated id when none is given: each such event is new.
    const anon = await t.call('POST', '/api/v1/events', { body: { name: 'paid', email } });
    assert.match(anon.body.id, /^[0-9a-f-]{36}$/);
    assert.equal(anon.body.runs, 2);
  });

  it('daily quotas: 1,000 new contacts and 5,000 runs through events; a 429 writes nothing and spends nothing', async () => {
    const t = await newTenant(env);
    const a = await sleeper(t, 'visit');
    const day = new Date().toISOString().slice(0, 10);
    // Existing contacts and events that match nothing spend nothing.
    const known = address('known');
    await t.call('POST', '/api/v1/contacts', { as: 'admin', body: { email: known } });
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'nothing-listens', email: known } })).body.runs, 0);
    assert.equal(await quota(t), undefined);
    // The defaults of the spec, one short of each.
    await sql(
      `insert into event_quotas (organization_id, day, contacts, contacts_limit, runs, runs_limit) values (?, ?, 999, 1000, 4999, 5000)`,
      [t.orgId, day],
    );
    const last = address('last');
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'nothing-listens', email: last } })).status, 200);
    assert.deepEqual(await quota(t), { contacts: 1000, runs: 4999 });
    const contactsBefore = await contactCount(t);
    const over = await t.call('POST', '/api/v1/events', { body: { name: 'nothing-listens', email: address('over') } });
    assert.equal(over.status, 429);
    assert.equal(over.body.error.code, 'contact_quota_exceeded');
    assert.equal(await contactCount(t), contactsBefore, 'the contact was rolled back');
    // Existing contacts still take events; the 5,000th run starts, the next one is refused.
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'visit', email: known, id: 'v1' } })).body.runs, 1);
    assert.deepEqual(await quota(t), { contacts: 1000, runs: 5000 });
    const runs = await t.call('POST', '/api/v1/events', { body: { name: 'visit', email: known, id: 'v2', data: { seen: true } } });
    assert.equal(runs.status, 429);
    assert.equal(runs.body.error.code, 'run_quota_exceeded');
    assert.equal((await runsOf(t, a.id)).length, 1);
    const contact = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(known)}`, { as: 'admin' })).body;
    assert.equal(contact.properties.seen, undefined, 'the data merge was rolled back');
    assert.deepEqual(await quota(t), { contacts: 1000, runs: 5000 });
    // An event still matching nothing for an existing contact goes through.
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'nothing-listens', email: known } })).status, 200);
  });

  it('contact_created fires from POST /contacts and POST /events, not for domain-restricted keys, and only while enabled', async () => {
    const t = await newTenant(env);
    const a = await sleeper(t, 'unused');
    const put = await t.call('PUT', `/api/v1/automations/${a.id}`, {
      as: 'admin',
      body: { name: 'Welcome series', trigger: { contact_created: true }, steps: [{ type: 'delay', duration: 'P1D' }] },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.version, 2);
    const viaContacts = address('viacontacts');
    await t.call('POST', '/api/v1/contacts', { body: { email: viaContacts } });
    const viaEvents = address('viaevents');
    const ev = await t.call('POST', '/api/v1/events', { body: { name: 'anything', email: viaEvents } });
    assert.equal(ev.body.runs, 1, 'the contact_created run counts as started by the event');
    assert.equal((await quota(t))!.runs, 1);
    const restricted = await createKey(env.service.db.orm, t.orgId, {
      name: 'restricted',
      permission: 'send',
      mode: 'live',
      domainIds: [t.domainId],
    });
    const restrictedCall = (path: string, body: object) => request(env.url, 'POST', path, { token: restricted.token, body });
    assert.equal((await restrictedCall('/api/v1/events', { name: 'anything', email: address('restricted-ev') })).body.runs, 0);
    assert.equal((await restrictedCall('/api/v1/contacts', { email: address('restricted-c') })).status, 201);
    // Disabled: contacts created meanwhile are not its concern, even once it is enabled again.
    assert.equal((await t.call('PATCH', `/api/v1/automations/${a.id}`, { as: 'admin', body: { enabled: false } })).body.enabled, false);
    await t.call('POST', '/api/v1/contacts', { body: { email: address('while-off') } });
    await sleep(1500);
    assert.equal((await t.call('PATCH', `/api/v1/automations/${a.id}`, { as: 'admin', body: { enabled: true } })).body.enabled, true);
    await sleep(1500);
    const runs = await waitFor(async () => {
      const r = await runsOf(t, a.id);
      return r.length >= 2 ? r : undefined;
    }, 'two runs');
    await sleep(500);
    assert.deepEqual((await runsOf(t, a.id)).map((r) => r.contact.email).sort(), [viaContacts, viaEvents].sort());
    for (const r of runs) {
      assert.equal(r.trigger.type, 'contact.created');
      assert.equal(r.version, 2);
    }
    const remaining = await sql('select count(*)::int as n from automation_triggers where organization_id = ? and consumed_at is null', [
      t.orgId,
    ]);
    assert.equal(remaining[0].n, 0, 'every trigger row was consumed');
  });

  it('topic_subscribed: each subscription starts a run; a condition picks its branch; an unsubscribed contact ends the run', async () => {
    const t = await newTenant(env);
    const tpl = await publishTemplate(t);
    assert.equal(
      (await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: 'tips', name: 'Tips', default_opt_in: false } })).status,
      201,
    );
    const a = await automation(t, {
      name: 'Tips',
      trigger: { topic_subscribed: 'tips' },
      steps: [
        {
          type: 'condition',
          if: { property: 'plan', equals: 'pro' },
          then: [{ type: 'update_contact', properties: { tier: 'gold' } }],
          else: [
            { type: 'delay', duration: 2 },
            { type: 'send_email', from: `Tips <tips@${t.domain}>`, template: { id: tpl.id } },
          ],
        },
      ],
    });
    const pro = await t.call('POST', '/api/v1/contacts', { body: { email: address('pro'), properties: { plan: 'pro' } } });
    await t.call('POST', `/api/v1/contacts/${pro.body.id}/subscriptions`, { body: { topic: 'tips', state: 'subscribed' } });
    const done = await runSettled(t, a.id, ['completed']);
    assert.equal(done.contact.id, pro.body.id);
    assert.equal(done.trigger.type, 'topic.subscribed');
    assert.equal(done.trigger.topic, 'tips');
    assert.deepEqual(
      done.history.map((h: any) => [h.step, h.type]),
      [
        ['steps[0]', 'condition'],
        ['steps[0].then[0]', 'update_contact'],
      ],
    );
    assert.equal(done.history[0].result.branch, 'then');
    assert.equal((await t.call('GET', `/api/v1/contacts/${pro.body.id}`, { as: 'admin' })).body.properties.tier, 'gold');

    // The else branch sleeps 2 s; the contact unsubscribes meanwhile: the run ends before sending.
    const free = address('free');
    await t.call('POST', '/api/v1/contacts', { body: { email: free, topics: ['tips'] } });
    const sleeping = await waitFor(async () => {
      const r = (await runsOf(t, a.id)).find((x) => x.contact.email === free);
      return r?.step === 'steps[0].else[0]' ? r : undefined;
    }, 'the else branch delay');
    await t.call('POST', '/api/v1/contacts', { body: { email: free, status: 'unsubscribed' } });
    const ended = await waitFor(async () => {
      const r = (await t.call('GET', `/api/v1/automation-runs/${sleeping.id}`, { as: 'admin' })).body;
      return r.status === 'completed' ? r : undefined;
    }, 'the run to end');
    assert.equal(ended.reason, 'contact_unsubscribed');
    assert.equal(mailTo(free).length, 0);
  });

  it('topic_subscribed through the upsert: a run per change to subscribed, none for a repeat, again after leaving; one rule with the subscriptions endpoint, restricted keys too', async () => {
    const t = await newTenant(env);
    const topic = await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: 'news', name: 'News', default_opt_in: false } });
    assert.equal(topic.status, 201, JSON.stringify(topic.body));
    const a = await automation(t, {
      name: 'Welcome to the news',
      trigger: { topic_subscribed: 'news' },
      steps: [{ type: 'update_contact', properties: { welcomed: true } }],
    });
    const restricted = await createKey(env.service.db.orm, t.orgId, {
      name: 'restricted',
      permission: 'send',
      mode: 'live',
      domainIds: [t.domainId],
      rateLimit: 1000,
    });
    const upsert = (body: object, token?: string) =>
      token ? request(env.url, 'POST', '/api/v1/contacts', { token, body }) : t.call('POST', '/api/v1/contacts', { body });
    const subscribe = (id: string, state: string, token?: string) =>
      token
        ? request(env.url, 'POST', `/api/v1/contacts/${id}/subscriptions`, { token, body: { topic: 'news', state } })
        : t.call('POST', `/api/v1/contacts/${id}/subscriptions`, { body: { topic: 'news', state } });
    const runsFor = async (email: string) => (await runsOf(t, a.id, '?limit=100')).filter((r) => r.contact.email === email);
    const oneRun = (email: string) =>
      waitFor(async () => {
        const r = await runsFor(email);
        return r.length ? r : undefined;
      }, `a run for ${email}`);
    // Trigger rows become runs in the order they were written: once a fresh contact's run exists,
    // every trigger written before it has had its run.
    const settled = async () => {
      const sentinel = (await upsert({ email: address('sentinel') })).body;
      assert.equal((await subscribe(sentinel.id, 'subscribed')).status, 200);
      await oneRun(sentinel.email);
    };

    // A new contact subscribed by the upsert: one run, triggered by the topic.
    const ann = address('ann');
    const made = await upsert({ email: ann, topics: ['news'] });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const [first] = await oneRun(ann);
    assert.equal(first.trigger.type, 'topic.subscribed');
    assert.equal(first.trigger.topic, 'news');
    await waitFor(async () => (await t.call('GET', `/api/v1/contacts/${made.body.id}`)).body.properties.welcomed === true, 'the run done');

    // Already subscribed: neither a repeat upsert nor the endpoint starts another.
    assert.equal((await upsert({ email: ann, topics: ['news'], first_name: 'Ann' })).status, 200);
    assert.equal((await subscribe(made.body.id, 'subscribed')).status, 200);
    await settled();
    assert.equal((await runsFor(ann)).length, 1, 'no run for a subscription that did not change');

    // Left through the endpoint, subscribed again through the upsert: a new change, a new run.
    assert.equal((await subscribe(made.body.id, 'unsubscribed')).status, 200);
    assert.equal((await upsert({ email: ann, topics: ['news'] })).status, 200);
    await waitFor(async () => ((await runsFor(ann)).length === 2 ? true : undefined), 'a second run for ann');

    // An existing contact (no row, the topic's default is out) subscribed by the upsert: a run.
    const bea = address('bea');
    assert.equal((await upsert({ email: bea })).status, 201);
    assert.equal((await upsert({ email: bea, topics: ['news'] })).status, 200);
    await oneRun(bea);

    // A domain-restricted key: the same rule on both paths (it holds back contact.created only).
    const cal = address('cal');
    assert.equal((await upsert({ email: cal, topics: ['news'] }, restricted.token)).status, 201);
    const dan = (await upsert({ email: address('dan') }, restricted.token)).body;
    assert.equal((await subscribe(dan.id, 'subscribed', restricted.token)).status, 200);
    await oneRun(cal);
    await oneRun(dan.email);
    await settled();
    assert.equal((await runsFor(cal)).length, 1);
    assert.equal((await runsFor(dan.email)).length, 1);
  });

  it('wait_for_event times out and says so; cancel ends a sleeping run; DELETE cancels the running ones; PUT keeps runs on their version', async () => {
    const t = await newTenant(env);
    const waiter = await automation(t, {
      name: 'Nudge',
      trigger: { event: 'trial' },
      steps: [
        { type: 'wait_for_event', event: 'converted', timeout: 1 },
        { type: 'update_contact', properties: { nudged: true } },
      ],
    });
    const email = address('trial');
    await t.call('POST', '/api/v1/events', { body: { name: 'trial', email } });
    const timedOut = await runSettled(t, waiter.id, ['completed']);
    assert.equal(timedOut.history[0].result.outcome, 'timeout');
    // An event after the wait ended resumes nothing.
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'converted', email } })).status, 200);

    const slow = await sleeper(t, 'slow');
    await t.call('POST', '/api/v1/events', { body: { name: 'slow', email, id: 's1' } });
    await t.call('POST', '/api/v1/events', { body: { name: 'slow', email, id: 's2' } });
    const [r1, r2] = await waitFor(async () => {
      const runs = await runsOf(t, slow.id);
      return runs.length === 2 && runs.every((r) => r.step === 'steps[0]') ? runs : undefined;
    }, 'two sleeping runs');
    const canceled = await t.call('POST', `/api/v1/automation-runs/${r1.id}/cancel`, { as: 'admin' });
    assert.equal(canceled.status, 200);
    assert.equal(canceled.body.status, 'canceled');
    const twice = await t.call('POST', `/api/v1/automation-runs/${r1.id}/cancel`, { as: 'admin' });
    assert.equal(twice.status, 409);
    assert.equal(twice.body.error.code, 'not_cancelable');
    assert.equal((await runsOf(t, slow.id, '?status=canceled')).length, 1);
    assert.equal((await runsOf(t, slow.id, '?status=running')).length, 1);

    // A new version: the run in progress keeps version 1.
    const put = await t.call('PUT', `/api/v1/automations/${slow.id}`, {
      as: 'admin',
      body: { name: 'Slow v2', trigger: { event: 'slow' }, steps: [{ type: 'delay', duration: 'PT1H' }] },
    });
    assert.equal(put.body.version, 2);
    assert.equal((await t.call('GET', `/api/v1/automation-runs/${r2.id}`, { as: 'admin' })).body.version, 1);
    const removed = await t.call('DELETE', `/api/v1/automations/${slow.id}`, { as: 'admin' });
    assert.equal(removed.status, 200);
    assert.equal(removed.body.deleted, true);
    assert.equal(removed.body.canceled_runs, 1);
    assert.equal((await t.call('GET', `/api/v1/automation-runs/${r2.id}`, { as: 'admin' })).body.status, 'canceled');
    assert.equal((await t.call('GET', `/api/v1/automations/${slow.id}`, { as: 'admin' })).status, 404);
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'slow', email, id: 's3' } })).body.runs, 0);
    const audit = await t.call('GET', '/api/v1/audit-log', { as: 'admin' });
    const actions = audit.body.data.map((e: { action: string }) => e.action);
    for (const action of ['automation.created', 'automation.updated', 'automation.deleted', 'automation_run.canceled'])
      assert.ok(actions.includes(action), action);
  });

  it('refuses invalid definitions with the step path, for SEND and test keys too', async () => {
    const t = await newTenant(env);
    const tpl = await publishTemplate(t);
    const from = `A <a@${t.domain}>`;
    const bad = await t.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: {
        name: 'Bad',
        trigger: { event: 'x' },
        steps: [
          { type: 'delay', duration: 'PT1M' },
          { type: 'send_email', from, template: { id: tpl.id } },
          {
            type: 'condition',
            if: { status: 'subscribed' },
            then: [{ type: 'send_email', from, template: { slug: 'no-such-template' } }],
          },
        ],
      },
    });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.code, 'validation_error');
    assert.deepEqual(
      bad.body.error.details.map((d: { field: string }) => d.field),
      ['steps[2].then[0].template'],
    );
    for (const [steps, field] of [
      [[{ type: 'teleport' }], 'steps[0].type'],
      [[{ type: 'delay', duration: 'P2Y' }], 'steps[0].duration'],
      [[{ type: 'delay', duration: 366 * 86400 }], 'steps[0].duration'],
    ] as const) {
      const res = await t.call('POST', '/api/v1/automations', { as: 'admin', body: { name: 'Bad', trigger: { event: 'x' }, steps } });
      assert.equal(res.status, 422, JSON.stringify(steps));
      assert.ok(
        res.body.error.details.some((d: { field: string }) => d.field === field),
        JSON.stringify(res.body.error.details),
      );
    }
    const topic = await t.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: { name: 'Bad', trigger: { topic_subscribed: 'no-such-topic' }, steps: [{ type: 'delay', duration: 1 }] },
    });
    assert.equal(topic.status, 422);
    assert.equal(topic.body.error.details[0].field, 'trigger.topic_subscribed');
    assert.equal((await t.call('POST', '/api/v1/automations', { as: 'send', body: {} })).status, 403);
    const test = await t.call('POST', '/api/v1/automations', { as: 'test', body: {} });
    assert.equal(test.status, 403);
    assert.equal(test.body.error.code, 'test_key_not_allowed');
    const list = await t.call('GET', '/api/v1/automations', { as: 'admin' });
    assert.deepEqual(list.body, { object: 'list', data: [] });
  });

  it('a long delay parks the run (no workflow holds it) and the next segment resumes after it, inside a branch too', async () => {
    const t = await newTenant(env);
    const a = await automation(t, {
      name: 'Long',
      trigger: { event: 'long' },
      steps: [
        {
          type: 'condition',
          if: { status: 'subscribed' },
          then: [
            { type: 'delay', duration: 'PT2H' },
            { type: 'update_contact', properties: { first: true } },
          ],
        },
        { type: 'delay', duration: 'P1D' },
        { type: 'update_contact', properties: { second: true } },
      ],
    });
    const email = address('long');
    await t.call('POST', '/api/v1/events', { body: { name: 'long', email } });
    const parked = await waitFor(async () => {
      const [r] = await sql('select id, resume_at, started_at, segment, step from automation_runs where automation_id = ?', [a.id]);
      return r?.segment === 1 && r.started_at === null ? r : undefined;
    }, 'the run to park');
    assert.equal(parked.step, 'steps[0].then[0]');
    const ahead = new Date(parked.resume_at).getTime() - Date.now();
    assert.ok(ahead > 7_000_000 && ahead <= 7_200_000, `parked for two hours (${ahead} ms)`);
    // The segment writes the park, then its workflow ends: nothing holds the sleeping run.
    await waitFor(async () => {
      const wf = await sql(`select status from dbos.workflow_status where workflow_uuid = ?`, [`automation-run:${parked.id}`]);
      assert.notEqual(wf[0]?.status, 'ERROR');
      return wf[0]?.status === 'SUCCESS' || undefined;
    }, 'the first segment to end');
    const run = (await t.call('GET', `/api/v1/automation-runs/${parked.id}`, { as: 'admin' })).body;
    assert.equal(run.status, 'running');
    assert.equal(run.history[1].type, 'delay');
    assert.equal(run.history[1].finished_at, undefined);

    // Two hours pass (as the database sees it): the next segment goes on after the delay, in the branch.
    await sql('update automation_runs set resume_at = now() where id = ?', [parked.id]);
    const second = await waitFor(async () => {
      const [r] = await sql('select segment, started_at, step from automation_runs where id = ?', [parked.id]);
      return r.segment === 2 && r.started_at === null ? r : undefined;
    }, 'the second park');
    assert.equal(second.step, 'steps[1]');
    let contact = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' })).body;
    assert.equal(contact.properties.first, true);
    assert.equal(contact.properties.second, undefined);
    await sql('update automation_runs set resume_at = now() where id = ?', [parked.id]);
    const done = await runSettled(t, a.id, ['completed']);
    assert.deepEqual(
      done.history.map((h: any) => [h.step, h.result?.outcome ?? h.result?.branch]),
      [
        ['steps[0]', 'then'],
        ['steps[0].then[0]', 'elapsed'],
        ['steps[0].then[1]', 'updated'],
        ['steps[1]', 'elapsed'],
        ['steps[2]', 'updated'],
      ],
    );
    contact = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' })).body;
    assert.equal(contact.properties.second, true);

    // A parked run canceled never starts again.
    await t.call('POST', '/api/v1/events', { body: { name: 'long', email, id: 'again' } });
    const other = await waitFor(async () => {
      const [r] = await sql(
        `select id from automation_runs where automation_id = ? and segment = 1 and started_at is null and status = 'running'`,
        [a.id],
      );
      return r;
    }, 'another parked run');
    assert.equal((await t.call('POST', `/api/v1/automation-runs/${other.id}/cancel`, { as: 'admin' })).body.status, 'canceled');
    await sql('update automation_runs set resume_at = now() where id = ?', [other.id]);
    await sleep(2500);
    const [after] = await sql('select status, segment, started_at from automation_runs where id = ?', [other.id]);
    assert.deepEqual(after, { status: 'canceled', segment: 1, started_at: null });
  });

  it('an automation that begins with a long delay writes its runs already parked: no workflow until the delay is over', async () => {
    const t = await newTenant(env);
    const a = await automation(t, {
      name: 'Later',
      trigger: { event: 'later' },
      steps: [
        { type: 'delay', duration: 'P3D' },
        { type: 'update_contact', properties: { later: true } },
      ],
    });
    const email = address('later');
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'later', email } })).body.runs, 1);
    const [run] = await sql('select id, segment, started_at, resume_at, step from automation_runs where automation_id = ?', [a.id]);
    assert.equal(run.segment, 1);
    assert.equal(run.step, 'steps[0]');
    const ahead = new Date(run.resume_at).getTime() - Date.now();
    assert.ok(ahead > 3 * 86_400_000 - 60_000 && ahead <= 3 * 86_400_000, `parked three days (${ahead} ms)`);
    await sleep(1500);
    assert.equal((await sql('select started_at from automation_runs where id = ?', [run.id]))[0].started_at, null);
    assert.equal(
      (await sql('select count(*)::int as n from dbos.workflow_status where workflow_uuid like ?', [`automation-run:${run.id}%`]))[0].n,
      0,
    );
    const shown = (await t.call('GET', `/api/v1/automation-runs/${run.id}`, { as: 'admin' })).body;
    assert.equal(shown.status, 'running');
    assert.deepEqual(
      shown.history.map((h: any) => [h.step, h.type, h.finished_at]),
      [['steps[0]', 'delay', undefined]],
    );
    await sql('update automation_runs set resume_at = now() where id = ?', [run.id]);
    const done = await runSettled(t, a.id, ['completed']);
    assert.deepEqual(
      done.history.map((h: any) => [h.step, h.result?.outcome]),
      [
        ['steps[0]', 'elapsed'],
        ['steps[1]', 'updated'],
      ],
    );
    assert.equal((await t.call('GET', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' })).body.properties.later, true);
  });
});
