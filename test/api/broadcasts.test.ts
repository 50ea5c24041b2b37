import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import type { Received } from '../support/sink';
import { waitFor } from '../support/wait';

/**
 * Issue 18 against the running service: who a broadcast reaches (frozen at start), each message
 * personalised and carrying the broadcast's topic in its unsubscribe link, daily caps delaying the
 * tail, cancel, and what is refused.
 */
describe('API: broadcasts to segments', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let seq = 0;

  before(async () => {
    env = await sharedService();
  });

  const address = (tag: string) => `${tag}-${Date.now()}-${++seq}@people.example`;
  const segmentOf = async (t: Tenant, filter: object = { all: [{ status: 'SUBSCRIBED' }] }) => {
    const res = await t.call('POST', '/api/v1/segments', { as: 'admin', body: { name: `S${seq++}`, filter } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const contact = (t: Tenant, body: object) =>
    t.call('POST', '/api/v1/contacts', { as: 'admin', body }).then((r) => {
      assert.ok(r.status < 300, JSON.stringify(r.body));
      return r.body;
    });
  const broadcast = (t: Tenant, id: string) => t.call('GET', `/api/v1/broadcasts/${id}`, { as: 'admin' }).then((r) => r.body);
  const settled = (t: Tenant, id: string, status: string) =>
    waitFor(
      async () => {
        const b = await broadcast(t, id);
        return b.status === status ? b : undefined;
      },
      `broadcast ${status}`,
      60_000,
    );
  const to = (m: Received) => m.envelopeTo[0];
  const mailTo = (addresses: string[]) => env.sink.received.filter((m) => addresses.includes(to(m)));
  const header = (m: Received, name: string) =>
    m.parsed.headerLines
      .find((h) => h.key === name)
      ?.line.replace(/^[^:]+:\s*/, '')
      .replace(/\r?\n\s+/g, '');

  it('reaches eligible members only, each once, personalised, with the topic in the unsubscribe link; the audience is frozen', async () => {
    const t = await newTenant(env, { stream: 'bulk' });
    const topic = `news${seq++}`;
    assert.equal((await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: topic, name: 'News' } })).status, 201);
    const people = {
      ann: address('ann'),
      bob: address('bob'),
      gone: address('gone'),
      bounced: address('bounced'),
      listed: address('listed'),
      leftTopic: address('lefttopic'),
      neverChose: address('neverchose'),
    };
    await contact(t, { email: people.ann, first_name: 'Ann', properties: { plan: 'pro' }, topics: [topic] });
    await contact(t, { email: people.bob, first_name: 'Bob', properties: { plan: 'free' }, topics: [topic] });
    // The topic is opt-in (its default): a contact who never chose it is not in its audience.
    await contact(t, { email: people.neverChose });
    await contact(t, { email: people.gone, first_name: 'Gone', status: 'unsubscribed', topics: [topic] });
    await contact(t, { email: people.bounced, status: 'bounced' });
    await contact(t, { email: people.listed, topics: [topic] });
    await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: people.listed } });
    const left = await contact(t, { email: people.leftTopic, topics: [topic] });
    await t.call('POST', `/api/v1/contacts/${left.id}/subscriptions`, { as: 'admin', body: { topic, state: 'unsubscribed' } });
    const template = await t.call('POST', '/api/v1/templates', {
      as: 'admin',
      body: {
        name: 'Monthly',
        slug: `monthly${seq++}`,
        subject: 'Hi {{first_name}}',
        html: '<p>Your plan: {{plan}}</p>',
        variables: [
          { key: 'first_name', type: 'string', fallback: 'there' },
          { key: 'plan', type: 'string', fallback: 'none' },
        ],
      },
    });
    assert.equal(template.status, 201, JSON.stringify(template.body));
    await t.call('POST', `/api/v1/templates/${template.body.id}/publish`, { as: 'admin' });

    const created = await t.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: {
        segment_id: await segmentOf(t),
        from: `News <news@${t.domain}>`,
        name: 'November',
        topic,
        template: { id: template.body.id },
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.object, 'broadcast');
    assert.equal(created.body.status, 'queued');
    assert.equal(created.body.kind, 'broadcast.default');
    const started = await waitFor(async () => {
      const b = await broadcast(t, created.body.id);
      return b.recipients !== null ? b : undefined;
    }, 'the audience to freeze');
    assert.equal(started.recipients, 2, 'ann and bob only');
    // Contacts added after the start are not members of this broadcast.
    const late = address('late');
    await contact(t, { email: late, first_name: 'Late', topics: [topic] });

    const done = await settled(t, created.body.id, 'sent');
    assert.equal(done.recipients, 2);
    assert.equal(done.progress.sent + done.progress.delivered, 2);
    assert.equal(done.progress.queued, 0);
    const mail = await waitFor(async () => {
      const got = mailTo(Object.values(people).concat(late));
      return got.length >= 2 ? got : undefined;
    }, 'the two messages');
    assert.deepEqual(mail.map(to).sort(), [people.ann, people.bob].sort());
    const ann = mail.find((m) => to(m) === people.ann)!;
    assert.equal(ann.parsed.subject, 'Hi Ann');
    assert.ok(String(ann.parsed.html).includes('Your plan: pro'));
    assert.equal(mail.find((m) => to(m) === people.bob)!.parsed.subject, 'Hi Bob');

    // The unsubscribe link leaves the broadcast's topic only.
    const url = /^<([^>]+)>$/.exec(header(ann, 'list-unsubscribe') ?? '')![1];
    assert.equal((await fetch(env.url + new URL(url).pathname, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200);
    const after = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(people.ann)}`, { as: 'admin' })).body;
    assert.equal(after.status, 'subscribed');
    assert.equal(after.subscriptions.find((s: { topic: string }) => s.topic === topic).state, 'unsubscribed');
    assert.equal((await broadcast(t, created.body.id)).progress.unsubscribed, 1);

    // Each message is one of the broadcast's, listed and tagged as such.
    const list = await t.call('GET', '/api/v1/broadcasts', { as: 'admin' });
    assert.equal(list.body.object, 'list');
    assert.equal(list.body.data[0].id, created.body.id);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(mailTo([late]).length, 0, 'the late contact got nothing');
  });

  it('daily caps delay the tail (the broadcast stays sending); cancel stops what was not picked up and says how many', async () => {
    const t = await newTenant(env, { stream: 'bulk', plan: 'free' });
    assert.equal((await t.call('PATCH', '/api/v1/organization', { as: 'admin', body: { daily_send_cap: 2 } })).status, 200);
    const emails = Array.from({ length: 5 }, (_, i) => address(`cap${i}`));
    for (const email of emails) await contact(t, { email });
    const created = await t.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: { segment_id: await segmentOf(t), from: `news@${t.domain}`, subject: 'Capped', text: 'hello', kind: 'broadcast.weekly' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const waiting = await waitFor(async () => {
      const b = await broadcast(t, created.body.id);
      return b.enqueued_at && b.progress.sent + b.progress.delivered === 2 && b.progress.queued === 3 ? b : undefined;
    }, 'two sent and three parked');
    assert.equal(waiting.status, 'sending', 'the tail waits for the next UTC day');
    const parked = (
      await env.service.db.orm.em
        .fork()
        .getConnection()
        .execute(`select count(*)::int as n from emails where broadcast_id = ? and waiting_reason = 'organization_daily_cap'`, [
          created.body.id,
        ])
    )[0].n;
    assert.equal(parked, 3);

    const cancel = await t.call('POST', `/api/v1/broadcasts/${created.body.id}/cancel`, { as: 'admin' });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.equal(cancel.body.canceled, 3);
    assert.equal(cancel.body.status, 'canceled');
    assert.equal(cancel.body.progress.canceled, 3);
    assert.equal(cancel.body.progress.sent + cancel.body.progress.delivered, 2, 'what left stays sent');
    const again = await t.call('POST', `/api/v1/broadcasts/${created.body.id}/cancel`, { as: 'admin' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'not_cancelable');
    const audit = (await t.call('GET', '/api/v1/audit-log', { as: 'admin' })).body.data.map((e: { action: string }) => e.action);
    assert.ok(audit.includes('broadcast.created') && audit.includes('broadcast.canceled'), audit.join(','));
  });

  it('a scheduled broadcast canceled before its time sends nothing', async () => {
    const t = await newTenant(env, { stream: 'bulk' });
    const email = address('scheduled');
    await contact(t, { email });
    const created = await t.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: {
        segment_id: await segmentOf(t),
        from: `news@${t.domain}`,
        subject: 'Later',
        html: '<p>later</p>',
        scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    assert.equal(created.status, 201);
    const cancel = await t.call('POST', `/api/v1/broadcasts/${created.body.id}/cancel`, { as: 'admin' });
    assert.equal(cancel.status, 200);
    assert.equal(cancel.body.canceled, 0);
    const b = await broadcast(t, created.body.id);
    assert.equal(b.status, 'canceled');
    assert.equal(b.recipients, null, 'the audience never froze');
  });

  it('refuses what cannot be broadcast (404, 422, 403) and stores nothing', async () => {
    const t = await newTenant(env, { stream: 'bulk' });
    const transactional = await newTenant(env);
    const segment = await segmentOf(t);
    const count = async () =>
      (
        await env.service.db.orm.em
          .fork()
          .getConnection()
          .execute('select count(*)::int as n from broadcasts where organization_id = ?', [t.orgId])
      )[0].n;
    const base = { segment_id: segment, from: `news@${t.domain}`, subject: 's', text: 't' };
    const cases: [object, number, string, Tenant?, ('admin' | 'test')?][] = [
      [{ ...base, segment_id: '00000000-0000-7000-8000-000000000000' }, 404, 'not_found'],
      [{ ...base, segment_id: 'nope' }, 404, 'not_found'],
      [{ ...base, segment_id: await segmentOf(transactional) }, 404, 'not_found'],
      [{ ...base, topic: 'no-such-topic' }, 422, 'unknown_topic'],
      [{ ...base, kind: 'receipt' }, 422, 'validation_error'],
      [{ ...base, subject: undefined }, 422, 'validation_error'],
      [{ ...base, text: undefined }, 422, 'validation_error'],
      [{ ...base, template: { slug: 'x' } }, 422, 'validation_error'],
      [{ segment_id: segment, from: `news@${t.domain}`, template: { slug: 'no-such-template' } }, 422, 'template_not_found'],
      [{ segment_id: segment, from: `news@${t.domain}`, template: { slug: 'x', data: { a: 1 } } }, 422, 'validation_error'],
      [{ ...base, from: 'news@unknown.example' }, 422, 'domain_not_verified'],
      [{ ...base, scheduled_at: new Date(Date.now() + 40 * 86_400_000).toISOString() }, 422, 'validation_error'],
      [{ ...base, unknown_field: 1 }, 422, 'validation_error'],
      [base, 403, 'test_key_not_allowed', t, 'test'],
    ];
    for (const [body, status, code, tenant, as] of cases) {
      const res = await (tenant ?? t).call('POST', '/api/v1/broadcasts', { as: as ?? 'admin', body });
      assert.equal(res.status, status, `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code, JSON.stringify(body));
    }
    // A transactional-stream domain cannot send bulk mail.
    const mismatch = await transactional.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: { ...base, segment_id: await segmentOf(transactional), from: `news@${transactional.domain}` },
    });
    assert.equal(mismatch.status, 422);
    assert.equal(mismatch.body.error.code, 'stream_mismatch');
    assert.equal(await count(), 0);
    assert.equal((await t.call('GET', '/api/v1/broadcasts/00000000-0000-7000-8000-000000000000', { as: 'admin' })).status, 404);
    assert.equal((await t.call('GET', '/api/v1/broadcasts', { as: 'send' })).status, 403);
  });
});
