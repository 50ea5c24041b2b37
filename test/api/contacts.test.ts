import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { createKey } from '../../core/provisioning';
import { request } from '../support/http';

/** Contacts (spec: Contact, POST/GET/DELETE /contacts, POST /contacts/:id/subscriptions) against the running app. */
describe('API: contacts and subscriptions', function () {
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let full: string;
  let restrictedFull: string;
  let restrictedSend: string;
  let n = 0;
  const email = (tag = 'c') => `${tag}-${++n}-${Date.now()}@people.example`;

  const as = (token: string, method: string, path: string, body?: unknown) => request(env.url, method, path, { token, body });
  const sql = async (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const triggers = (contactId: string) =>
    sql(`select type, topic_id from automation_triggers where contact_id = ? order by id`, [contactId]) as Promise<
      { type: string; topic_id: string | null }[]
    >;
  /** Every audience row of the tenant: a refused write must leave it unchanged. */
  const audience = async (orgId = t.orgId) => {
    const [row] = await sql(
      `select md5(coalesce((select string_agg(x, ',' order by x) from (
          select row_to_json(c)::text as x from contacts c where c.organization_id = ?
          union all select row_to_json(tp)::text from topics tp where tp.organization_id = ?
          union all select row_to_json(s)::text from subscriptions s join contacts c on c.id = s.contact_id where c.organization_id = ?
          union all select (to_jsonb(a) - 'consumed_at')::text from automation_triggers a where a.organization_id = ?) r), '')) as f`,
      [orgId, orgId, orgId, orgId],
    );
    return row.f as string;
  };

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    const orm = env.service.db.orm;
    full = (await createKey(orm, t.orgId, { name: 'full', permission: 'full', mode: 'live', rateLimit: 1000 })).token;
    restrictedFull = (
      await createKey(orm, t.orgId, { name: 'rf', permission: 'full', mode: 'live', domainIds: [t.domainId], rateLimit: 1000 })
    ).token;
    restrictedSend = (
      await createKey(orm, t.orgId, { name: 'rs', permission: 'send', mode: 'live', domainIds: [t.domainId], rateLimit: 1000 })
    ).token;
  });

  it('upserts by email: created once, then updated in place; names change only when present', async () => {
    const address = email();
    const first = await t.call('POST', '/api/v1/contacts', {
      body: { email: `  ${address.toUpperCase()} `, first_name: 'Ada', last_name: 'Lovelace', properties: { plan: 'pro', seats: 3 } },
    });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.body.object, 'contact');
    assert.equal(first.body.created, true);
    assert.equal(first.body.email, address, 'lower-cased and trimmed');
    assert.equal(first.body.status, 'subscribed');
    assert.deepEqual(first.body.properties, { plan: 'pro', seats: 3 });
    assert.match(first.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const second = await t.call('POST', '/api/v1/contacts', {
      body: { email: address, last_name: null, status: 'unsubscribed', properties: { seats: null, vip: true } },
    });
    assert.equal(second.status, 200);
    assert.equal(second.body.created, false);
    assert.equal(second.body.id, first.body.id);
    assert.equal(second.body.first_name, 'Ada', 'absent: unchanged');
    assert.equal(second.body.last_name, null, 'null: cleared');
    assert.equal(second.body.status, 'unsubscribed');
    assert.deepEqual(second.body.properties, { plan: 'pro', vip: true }, 'merged; null deleted the key');
    const third = await t.call('POST', '/api/v1/contacts', { body: { email: address } });
    assert.equal(third.body.status, 'unsubscribed', 'status changes only when given');
    const [{ count }] = await sql(`select count(*)::int as count from contacts where organization_id = ? and email = ?`, [
      t.orgId,
      address,
    ]);
    assert.equal(count, 1);
  });

  it('subscribes to the upsert topics, creating missing ones (name = slug, default opt-in on), and records triggers', async () => {
    const slug = `news-${n}`;
    const res = await t.call('POST', '/api/v1/contacts', { body: { email: email(), topics: [slug, slug] } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const topic = await t.call('GET', `/api/v1/topics/${slug}`, { as: 'admin' });
    assert.equal(topic.status, 200);
    assert.equal(topic.body.name, slug);
    assert.equal(topic.body.default_opt_in, true);
    const sub = res.body.subscriptions.find((s: { topic: string }) => s.topic === slug);
    assert.equal(sub.state, 'subscribed');
    assert.equal(sub.explicit, true);
    assert.equal(sub.source, 'api');
    assert.ok(sub.changed_at);
    assert.deepEqual(
      (await triggers(res.body.id)).map((x) => [x.type, x.topic_id]),
      [
        ['contact.created', null],
        ['topic.subscribed', topic.body.id],
      ],
    );
    // A repeat subscribe is no change: no trigger, changed_at kept.
    const again = await t.call('POST', '/api/v1/contacts', { body: { email: res.body.email, topics: [slug] } });
    assert.equal(again.body.subscriptions.find((s: { topic: string }) => s.topic === slug).changed_at, sub.changed_at);
    assert.equal((await triggers(res.body.id)).length, 2);
  });

  it('lists one subscription per topic of the organization in slug order, explicit or by default', async () => {
    const k = ++n;
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: `zz-optout-${k}`, name: 'Out', default_opt_in: false } });
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: `aa-optin-${k}`, name: 'In', default_opt_in: true } });
    const res = await t.call('POST', '/api/v1/contacts', { body: { email: email() } });
    const slugs = res.body.subscriptions.map((s: { topic: string }) => s.topic);
    const topics = await sql(`select slug from topics where organization_id = ? order by slug collate "C"`, [t.orgId]);
    assert.deepEqual(
      slugs,
      topics.map((x) => (x as { slug: string }).slug),
    );
    const optIn = res.body.subscriptions.find((s: { topic: string }) => s.topic === `aa-optin-${k}`);
    const optOut = res.body.subscriptions.find((s: { topic: string }) => s.topic === `zz-optout-${k}`);
    assert.deepEqual(optIn, { topic: `aa-optin-${k}`, state: 'subscribed', explicit: false, changed_at: null, source: null });
    assert.deepEqual(optOut, { topic: `zz-optout-${k}`, state: 'unsubscribed', explicit: false, changed_at: null, source: null });
  });

  it('refuses an invalid topic slug with unknown_topic and writes nothing: no contact, no other topic', async () => {
    const before = await audience();
    const address = email();
    const res = await t.call('POST', '/api/v1/contacts', { body: { email: address, topics: [`fresh-${n}`, 'Not Valid'] } });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'unknown_topic');
    assert.equal(await audience(), before);
    assert.equal((await t.call('GET', `/api/v1/contacts/${encodeURIComponent(address)}`)).status, 404);
  });

  it('refuses bad fields with validation_error naming the field, and writes nothing', async () => {
    const before = await audience();
    const cases: [unknown, string][] = [
      [{ email: email(), properties: { nested: { a: 1 } } }, 'properties.nested'],
      [{ email: email(), properties: { list: [1] } }, 'properties.list'],
      [{ email: email(), properties: { 'bad key': 1 } }, 'properties.bad key'],
      [{ email: email(), properties: { ['k'.repeat(65)]: 1 } }, `properties.${'k'.repeat(65)}`],
      [{ email: email(), properties: { long: 'x'.repeat(1001) } }, 'properties.long'],
      [{ email: email(), properties: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) }, 'properties'],
      [{ email: email(), properties: 'x' }, 'properties'],
      [{ email: email(), first_name: 'x'.repeat(121) }, 'first_name'],
      [{ email: email(), last_name: 5 }, 'last_name'],
      [{ email: email(), status: 'deleted' }, 'status'],
      [{ email: email(), topics: 'news' }, 'topics'],
      [{ email: email(), topics: Array.from({ length: 51 }, (_, i) => `t${i}`) }, 'topics'],
      [{ email: email(), nickname: 'x' }, ''],
      [{ email: 'not an address' }, 'email'],
      [{ email: 'Ada <ada@example.com>' }, 'email'],
      [{ email: 'a@example.com, b@example.com' }, 'email'],
      [{ first_name: 'no email' }, 'email'],
    ];
    for (const [body, field] of cases) {
      const res = await t.call('POST', '/api/v1/contacts', { body });
      assert.equal(res.status, 422, `${JSON.stringify(body).slice(0, 80)} → ${res.status}`);
      assert.equal(res.body.error.code, 'validation_error');
      assert.ok(
        res.body.error.details.some((d: { field: string }) => d.field === field),
        `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body.error.details)}`,
      );
    }
    // 1e400 is Infinity once parsed: refused, not silently turned into a deletion.
    const inf = await request(env.url, 'POST', '/api/v1/contacts', {
      token: t.sendKey,
      raw: `{"email":"${email()}","properties":{"n":1e400}}`,
    });
    assert.equal(inf.status, 422);
    assert.equal(await audience(), before);
  });

  it('authenticates and charges in the upsert statement: 401, 429 and 403 come before any complaint about the body', async () => {
    const unknown = await request(env.url, 'POST', '/api/v1/contacts', { token: `svc_live_${'x'.repeat(32)}`, body: { nope: 1 } });
    assert.equal(unknown.status, 401);
    assert.equal(
      (await request(env.url, 'POST', '/api/v1/contacts', { token: `svc_live_${'x'.repeat(32)}`, body: { email: email() } })).status,
      401,
    );
    const testBad = await t.call('POST', '/api/v1/contacts', { as: 'test', body: { nope: 1 } });
    assert.equal(testBad.body.error.code, 'test_key_not_allowed');
    const slow = (await createKey(env.service.db.orm, t.orgId, { name: 'slow', permission: 'send', mode: 'live', rateLimit: 1 })).token;
    const before = await audience();
    // Within one second at a cap of 1: one upsert passes, the rest are 429 and write nothing.
    const answers = await Promise.all(Array.from({ length: 4 }, () => as(slow, 'POST', '/api/v1/contacts', { email: email('rate') })));
    const statuses = answers.map((a) => a.status).sort();
    assert.ok(statuses.filter((x) => x === 429).length >= 2, String(statuses));
    for (const a of answers.filter((x) => x.status === 429)) assert.equal(a.headers.get('retry-after'), '1');
    const created = answers.filter((a) => a.status === 201).length;
    const [{ rows }] = await sql(`select count(*)::int as rows from contacts where organization_id = ? and email like 'rate-%'`, [t.orgId]);
    assert.equal(rows, created, 'a refused upsert stored nothing');
    assert.notEqual(await audience(), before);
  });

  it('keeps keys such as __proto__ and constructor as plain properties', async () => {
    const address = email();
    const res = await request(env.url, 'POST', '/api/v1/contacts', {
      token: t.sendKey,
      raw: `{"email":"${address}","properties":{"__proto__":"p","constructor":1,"toString":true}}`,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const got = await t.call('GET', `/api/v1/contacts/${res.body.id}`);
    assert.deepEqual(Object.entries(got.body.properties).sort(), [
      ['__proto__', 'p'],
      ['constructor', 1],
      ['toString', true],
    ]);
  });

  it('caps properties at 100 keys after merging, in PostgreSQL, and then writes nothing (no topic, no trigger)', async () => {
    const address = email();
    const props = Object.fromEntries(Array.from({ length: 99 }, (_, i) => [`p${i}`, i]));
    const made = await t.call('POST', '/api/v1/contacts', { body: { email: address, properties: props } });
    assert.equal(made.status, 201);
    const before = await audience();
    const over = await t.call('POST', '/api/v1/contacts', {
      body: { email: address, first_name: 'Changed', properties: { x1: 1, x2: 2 }, topics: [`rolled-back-${n}`] },
    });
    assert.equal(over.status, 422, JSON.stringify(over.body));
    assert.equal(over.body.error.code, 'validation_error');
    assert.equal(over.body.error.details[0].field, 'properties');
    assert.equal(await audience(), before, 'contact, topic, subscription and triggers rolled back with the statement');
    // Deleting one while adding one stays at 100: allowed.
    const swap = await t.call('POST', '/api/v1/contacts', { body: { email: address, properties: { p0: null, x1: 1, x2: 2 } } });
    assert.equal(swap.status, 200, JSON.stringify(swap.body));
    assert.equal(Object.keys(swap.body.properties).length, 100);
  });

  it('two concurrent upserts of a new email: exactly one created, one row, one contact.created trigger', async () => {
    for (let round = 0; round < 3; round++) {
      const address = email('race');
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          t.call('POST', '/api/v1/contacts', { body: { email: address, properties: { [`k${i}`]: i } } }),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.status).filter((s) => s !== 200 && s !== 201),
        [],
        JSON.stringify(answers.find((a) => a.status >= 300)?.body),
      );
      assert.equal(answers.filter((a) => a.body.created === true).length, 1, 'exactly one created: true');
      assert.equal(answers.filter((a) => a.status === 201).length, 1);
      const rows = await sql(`select id, properties from contacts where organization_id = ? and email = ?`, [t.orgId, address]);
      assert.equal(rows.length, 1);
      // Merged in SQL, never read-modify-write: every request's key survives.
      assert.deepEqual(Object.keys(rows[0].properties).sort(), Array.from({ length: 12 }, (_, i) => `k${i}`).sort());
      assert.deepEqual(
        (await triggers(rows[0].id)).map((x) => x.type),
        ['contact.created'],
      );
    }
  });

  it("groups concurrent upserts, and one request's failure is never another's", async () => {
    const full100 = email('full');
    await t.call('POST', '/api/v1/contacts', {
      body: { email: full100, properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}`, i])) },
    });
    const others = Array.from({ length: 12 }, () => email('group'));
    const answers = await Promise.all([
      ...others.map((e) => t.call('POST', '/api/v1/contacts', { body: { email: e, properties: { a: 1 } } })),
      t.call('POST', '/api/v1/contacts', { body: { email: full100, properties: { over: 1 } } }),
      ...others.map((e) => t.call('POST', '/api/v1/contacts', { body: { email: e, properties: { b: 2 } } })),
    ]);
    assert.equal(answers[12].status, 422, JSON.stringify(answers[12].body));
    for (const a of [...answers.slice(0, 12), ...answers.slice(13)])
      assert.ok(a.status === 200 || a.status === 201, JSON.stringify(a.body));
    for (const e of others) {
      const got = await t.call('GET', `/api/v1/contacts/${encodeURIComponent(e)}`);
      assert.deepEqual(got.body.properties, { a: 1, b: 2 }, 'both upserts of an address applied');
    }
  });

  it('concurrent upserts creating the same new topic all subscribe to it', async () => {
    const slug = `launch-${n}-${Date.now()}`;
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => t.call('POST', '/api/v1/contacts', { body: { email: email(), topics: [slug] } })),
    );
    for (const a of answers) {
      assert.equal(a.status, 201, JSON.stringify(a.body));
      assert.equal(a.body.subscriptions.find((s: { topic: string }) => s.topic === slug)?.explicit, true);
    }
    const [{ count }] = await sql(`select count(*)::int as count from topics where organization_id = ? and slug = ?`, [t.orgId, slug]);
    assert.equal(count, 1);
  });

  it('reads a contact by id or URL-encoded email, only within the organization', async () => {
    const address = `first.last+tag-${++n}@people.example`;
    const made = await t.call('POST', '/api/v1/contacts', { body: { email: address } });
    const byId = await t.call('GET', `/api/v1/contacts/${made.body.id}`);
    assert.equal(byId.status, 200);
    assert.equal(byId.body.email, address);
    const byEmail = await t.call('GET', `/api/v1/contacts/${encodeURIComponent(address.toUpperCase())}`);
    assert.equal(byEmail.status, 200);
    assert.equal(byEmail.body.id, made.body.id);
    assert.equal(byEmail.body.created, undefined, 'created only in the upsert response');
    // Every key of the organization may read, test keys and restricted keys too.
    assert.equal((await t.call('GET', `/api/v1/contacts/${made.body.id}`, { as: 'test' })).status, 200);
    assert.equal((await as(restrictedSend, 'GET', `/api/v1/contacts/${made.body.id}`)).status, 200);
    for (const p of [made.body.id, encodeURIComponent(address)]) {
      const foreign = await other.call('GET', `/api/v1/contacts/${p}`);
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.error.code, 'not_found');
    }
    assert.equal((await t.call('GET', '/api/v1/contacts/nobody')).status, 404);
  });

  it('changes subscriptions one at a time or in a batch, recording topic.subscribed only on a real change', async () => {
    const a = `sa-${n}`;
    const b = `sb-${n}`;
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: a, name: 'A', default_opt_in: false } });
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: b, name: 'B', default_opt_in: true } });
    const topicId = async (slug: string) => (await t.call('GET', `/api/v1/topics/${slug}`, { as: 'admin' })).body.id;
    const c = (await t.call('POST', '/api/v1/contacts', { body: { email: email() } })).body;
    const one = await t.call('POST', `/api/v1/contacts/${c.id}/subscriptions`, { body: { topic: a, state: 'subscribed' } });
    assert.equal(one.status, 200, JSON.stringify(one.body));
    assert.equal(one.body.object, 'contact');
    assert.deepEqual(
      (({ state, explicit, source }) => ({ state, explicit, source }))(
        one.body.subscriptions.find((s: { topic: string }) => s.topic === a),
      ),
      { state: 'subscribed', explicit: true, source: 'api' },
    );
    const batch = await t.call('POST', `/api/v1/contacts/${encodeURIComponent(c.email)}/subscriptions`, {
      body: {
        subscriptions: [
          { topic: a, state: 'subscribed' },
          { topic: b, state: 'unsubscribed' },
        ],
      },
    });
    assert.equal(batch.status, 200, JSON.stringify(batch.body));
    assert.equal(batch.body.subscriptions.find((s: { topic: string }) => s.topic === b).state, 'unsubscribed');
    const resub = await t.call('POST', `/api/v1/contacts/${c.id}/subscriptions`, { body: { topic: b, state: 'subscribed' } });
    assert.equal(resub.body.subscriptions.find((s: { topic: string }) => s.topic === b).explicit, true);
    assert.deepEqual(
      (await triggers(c.id)).map((x) => [x.type, x.topic_id]),
      [
        ['contact.created', null],
        ['topic.subscribed', await topicId(a)],
        ['topic.subscribed', await topicId(b)],
      ],
      'a repeat subscribe and an unsubscribe record nothing',
    );

    const before = await audience();
    const refusals: [unknown, number, string][] = [
      [
        {
          subscriptions: [
            { topic: a, state: 'unsubscribed' },
            { topic: `missing-${n}`, state: 'subscribed' },
          ],
        },
        422,
        'unknown_topic',
      ],
      [{ topic: 'Bad Slug', state: 'subscribed' }, 422, 'unknown_topic'],
      [{ topic: a, state: 'maybe' }, 422, 'validation_error'],
      [{ topic: a }, 422, 'validation_error'],
      [{ topic: a, state: 'subscribed', extra: 1 }, 422, 'validation_error'],
      [{ subscriptions: [] }, 422, 'validation_error'],
      [{ subscriptions: Array.from({ length: 51 }, (_, i) => ({ topic: `t${i}`, state: 'subscribed' })) }, 422, 'validation_error'],
      [
        {
          subscriptions: [
            { topic: a, state: 'subscribed' },
            { topic: a, state: 'unsubscribed' },
          ],
        },
        422,
        'validation_error',
      ],
      [{ subscriptions: [{ topic: a, state: 'subscribed' }], topic: a }, 422, 'validation_error'],
    ];
    for (const [body, status, code] of refusals) {
      const res = await t.call('POST', `/api/v1/contacts/${c.id}/subscriptions`, { body });
      assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 100)} → ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code);
    }
    const nobody = await t.call('POST', `/api/v1/contacts/${encodeURIComponent('nobody@people.example')}/subscriptions`, {
      body: { topic: a, state: 'subscribed' },
    });
    assert.equal(nobody.status, 404);
    assert.equal(await audience(), before, 'all or nothing: no change of a batch with one unknown topic');
  });

  it('refuses every contact write with a test key, and allows reads', async () => {
    const before = await audience();
    const c = (await t.call('POST', '/api/v1/contacts', { body: { email: email() } })).body;
    const mid = await audience();
    for (const [method, path, body] of [
      ['POST', '/api/v1/contacts', { email: email() }],
      ['POST', `/api/v1/contacts/${c.id}/subscriptions`, { topic: 'x', state: 'subscribed' }],
      ['DELETE', `/api/v1/contacts/${c.id}`, undefined],
    ] as const) {
      const res = await t.call(method, path, { as: 'test', body });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal(res.body.error.code, 'test_key_not_allowed');
    }
    assert.equal(await audience(), mid);
    assert.notEqual(before, mid);
  });

  it('lets restricted keys upsert and subscribe without firing contact.created, and never delete', async () => {
    const slug = `rk-${n}`;
    const made = await as(restrictedSend, 'POST', '/api/v1/contacts', { email: email(), topics: [slug] });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.deepEqual(
      (await triggers(made.body.id)).map((x) => x.type),
      ['topic.subscribed'],
      'no contact.created for a domain-restricted key',
    );
    const sub = await as(restrictedSend, 'POST', `/api/v1/contacts/${made.body.id}/subscriptions`, { topic: slug, state: 'unsubscribed' });
    assert.equal(sub.status, 200);
    const cases: [string, string][] = [
      [t.sendKey, 'forbidden'],
      [restrictedSend, 'forbidden'],
      [restrictedFull, 'forbidden_domain'],
    ];
    for (const [token, code] of cases) {
      const res = await as(token, 'DELETE', `/api/v1/contacts/${made.body.id}`);
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, code);
    }
    assert.equal((await t.call('GET', `/api/v1/contacts/${made.body.id}`)).status, 200, 'still there');
  });

  it('deletes with a FULL key: contact and its subscription rows go, suppressions stay, the audit log names the key', async () => {
    const slug = `del-${n}`;
    const made = (await t.call('POST', '/api/v1/contacts', { body: { email: email(), topics: [slug], first_name: 'Gone' } })).body;
    await sql(
      `insert into suppressions (id, organization_id, email, reason, created_at) values (gen_random_uuid(), ?, ?, 'manual', now())`,
      [t.orgId, made.email],
    );
    const res = await as(full, 'DELETE', `/api/v1/contacts/${encodeURIComponent(made.email)}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.object, 'contact');
    assert.equal(res.body.id, made.id);
    assert.equal(res.body.deleted, true);
    assert.equal(res.body.first_name, 'Gone');
    assert.equal((await t.call('GET', `/api/v1/contacts/${made.id}`)).status, 404);
    const [{ subs }] = await sql(`select count(*)::int as subs from subscriptions where contact_id = ?`, [made.id]);
    assert.equal(subs, 0);
    const [{ sup }] = await sql(`select count(*)::int as sup from suppressions where organization_id = ? and email = ?`, [
      t.orgId,
      made.email,
    ]);
    assert.equal(sup, 1);
    const again = await as(full, 'DELETE', `/api/v1/contacts/${made.id}`);
    assert.equal(again.status, 404);
    const log = await t.call('GET', '/api/v1/audit-log?limit=1', { as: 'admin' });
    assert.equal(log.body.data[0].action, 'contact.deleted');
    assert.deepEqual(log.body.data[0].target, { type: 'contact', id: made.id });
    const fullKey = (await t.call('GET', '/api/v1/keys', { as: 'admin' })).body.data.find((k: { name: string }) => k.name === 'full');
    assert.equal(log.body.data[0].key_id, fullKey.id);
    // Another organization's contact: 404, untouched.
    const foreign = (await other.call('POST', '/api/v1/contacts', { body: { email: email() } })).body;
    assert.equal((await as(full, 'DELETE', `/api/v1/contacts/${foreign.id}`)).status, 404);
    assert.equal((await other.call('GET', `/api/v1/contacts/${foreign.id}`)).status, 200);
  });

  it('writes and rolls back trigger rows with their write', async () => {
    const slug = `tr-${n}`;
    const address = email();
    await t.call('POST', '/api/v1/contacts', {
      body: { email: address, properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`q${i}`, i])) },
    });
    const id = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(address)}`)).body.id;
    const failed = await t.call('POST', '/api/v1/contacts', { body: { email: address, properties: { extra: 1 }, topics: [slug] } });
    assert.equal(failed.status, 422);
    assert.deepEqual(
      (await triggers(id)).map((x) => x.type),
      ['contact.created'],
      'the failed upsert left no topic.subscribed',
    );
    const ok = await t.call('POST', '/api/v1/contacts', { body: { email: address, topics: [slug] } });
    assert.equal(ok.status, 200);
    assert.deepEqual(
      (await triggers(id)).map((x) => x.type),
      ['contact.created', 'topic.subscribed'],
    );
  });
});
