import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { waitFor } from '../support/wait';

/** Templates (spec: the template object; ours: docs/api.md, Templates) against the running app. */
describe('API: templates', function () {
  let env: TestEnv;
  let t: Tenant;
  const admin = (method: string, path: string, body?: unknown) => t.call(method, path, { as: 'admin', body });
  const sql = async (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const from = () => `App <app@${t.domain}>`;

  /** Creates and publishes a template, answering its id. */
  async function published(body: Record<string, unknown>): Promise<string> {
    const made = await admin('POST', '/api/v1/templates', body);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const pub = await admin('POST', `/api/v1/templates/${made.body.id}/publish`);
    assert.equal(pub.status, 201, JSON.stringify(pub.body));
    return made.body.id;
  }
  const send = (template: unknown, extra: Record<string, unknown> = {}, as: 'send' | 'test' = 'send') =>
    t.call('POST', '/api/v1/emails', { as, body: { from: from(), to: 'ann@example.com', template, ...extra } });

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  it('creates a template with a draft, reads it by id and slug, lists, edits the draft, each write audit-logged', async () => {
    const made = await admin('POST', '/api/v1/templates', {
      name: 'Welcome',
      slug: 'welcome',
      subject: 'Hi {{name}}',
      html: '<p>Hi {{name}}</p>',
      variables: [{ key: 'name', type: 'string', fallback: 'there' }],
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.object, 'template');
    assert.equal(made.body.slug, 'welcome');
    assert.equal(made.body.latest_version, null);
    assert.deepEqual(made.body.draft, {
      subject: 'Hi {{name}}',
      html: '<p>Hi {{name}}</p>',
      text: null,
      variables: [{ key: 'name', type: 'string', fallback: 'there' }],
    });
    assert.deepEqual(made.body.versions, []);
    assert.deepEqual((await admin('GET', '/api/v1/templates/welcome')).body, made.body);
    assert.deepEqual((await admin('GET', `/api/v1/templates/${made.body.id}`)).body, made.body);

    const dup = await admin('POST', '/api/v1/templates', { name: 'Again', slug: 'welcome', subject: 's' });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.error.code, 'template_exists');
    const noSlug = await admin('POST', '/api/v1/templates', { name: 'No slug', subject: 's', text: 'x' });
    assert.equal(noSlug.status, 201);
    assert.equal(noSlug.body.slug, null, 'the slug is optional');

    const list = await admin('GET', '/api/v1/templates?limit=1');
    assert.equal(list.body.object, 'list');
    assert.equal(list.body.data[0].id, noSlug.body.id, 'newest first');
    assert.equal(list.body.data[0].draft, undefined, 'lists leave the draft parts out');
    const page2 = await admin('GET', `/api/v1/templates?limit=1&cursor=${list.body.next_cursor}`);
    assert.equal(page2.body.data[0].id, made.body.id);

    const patched = await admin('PATCH', '/api/v1/templates/welcome', { text: 'Hi {{name}}', name: 'Welcome!' });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.name, 'Welcome!');
    assert.equal(patched.body.draft.text, 'Hi {{name}}');
    assert.equal(patched.body.draft.html, '<p>Hi {{name}}</p>', 'fields not named stay');
    const clash = await admin('PATCH', `/api/v1/templates/${noSlug.body.id}`, { slug: 'welcome' });
    assert.equal(clash.status, 409);
    assert.equal(clash.body.error.code, 'template_exists');
    const removed = await admin('PATCH', '/api/v1/templates/welcome', { html: null });
    assert.equal(removed.body.draft.html, null, 'null removes a part');

    const deleted = await admin('DELETE', `/api/v1/templates/${noSlug.body.id}`);
    assert.equal(deleted.status, 200);
    assert.equal(deleted.body.deleted, true);
    assert.equal((await admin('GET', `/api/v1/templates/${noSlug.body.id}`)).status, 404);

    const audit = await admin('GET', '/api/v1/audit-log?limit=100');
    const actions = audit.body.data
      .filter((e: { target: { id: string } }) => e.target.id === made.body.id)
      .map((e: { action: string }) => e.action);
    assert.deepEqual(actions.sort(), ['template.created', 'template.updated', 'template.updated']);
    assert.ok(audit.body.data.some((e: { action: string }) => e.action === 'template.deleted'));
  });

  it('refuses bad management input with 422 and writes nothing', async () => {
    const before = (await sql('select count(*)::int as n from templates where organization_id = ?', [t.orgId]))[0].n;
    const bad: Record<string, unknown>[] = [
      { subject: 's' },
      { name: 'n' },
      { name: 'n', subject: 'a\nb' },
      { name: 'n', subject: 's', slug: 'Upper' },
      { name: 'n', subject: 's', slug: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' },
      { name: 'n', subject: 's', extra: 1 },
      { name: 'n', subject: 's', variables: {} },
      { name: 'n', subject: 's', variables: [{ key: '__proto__', type: 'string' }] },
      { name: 'n', subject: 's', variables: [{ key: 'a', type: 'date' }] },
      { name: 'n', subject: 's', variables: [{ key: 'a', type: 'number', fallback: '1' }] },
      {
        name: 'n',
        subject: 's',
        variables: [
          { key: 'a', type: 'string' },
          { key: 'a', type: 'string' },
        ],
      },
      {
        name: 'n',
        subject: 's',
        variables: [
          { key: 'user', type: 'string' },
          { key: 'user.name', type: 'string' },
        ],
      },
      { name: 'n', subject: 's', variables: Array.from({ length: 51 }, (_, i) => ({ key: `v${i}`, type: 'string' })) },
    ];
    for (const body of bad) {
      const res = await admin('POST', '/api/v1/templates', body);
      assert.equal(res.status, 422, JSON.stringify(body).slice(0, 100));
      assert.equal(res.body.error.code, 'validation_error');
    }
    const after = (await sql('select count(*)::int as n from templates where organization_id = ?', [t.orgId]))[0].n;
    assert.equal(after, before);
    const send = await t.call('POST', '/api/v1/templates', { body: { name: 'n', subject: 's' } });
    assert.equal(send.status, 403, 'management needs an ADMIN key');
    assert.equal(send.body.error.message, 'this endpoint needs an ADMIN key');
  });

  it('publishes only a complete draft whose every variable is declared, naming what is missing', async () => {
    const made = await admin('POST', '/api/v1/templates', {
      name: 'Receipt',
      subject: 'Order {{order.id}}',
      html: '<p>{{user.first_name}} {{#if vip}}VIP{{/if}}</p>',
      variables: [{ key: 'vip', type: 'boolean' }],
    });
    const res = await admin('POST', `/api/v1/templates/${made.body.id}/publish`);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'validation_error');
    assert.match(res.body.error.message, /order\.id/);
    assert.match(res.body.error.message, /user\.first_name/);
    assert.deepEqual(res.body.error.details.map((d: { message: string }) => d.message).sort(), [
      'order.id is used but not declared',
      'user.first_name is used but not declared',
    ]);

    const bare = await admin('POST', '/api/v1/templates', { name: 'Bare', subject: 'Hello' });
    const noBody = await admin('POST', `/api/v1/templates/${bare.body.id}/publish`);
    assert.equal(noBody.status, 422);
    assert.match(noBody.body.error.message, /html or text/);

    for (const html of [
      '{{{vip}}}',
      '{{#each vip}}{{/each}}',
      '{{lookup vip "x"}}',
      '{{> partial}}',
      '{{@root.vip}}',
      '{{../vip}}',
      '{{#if vip}',
    ]) {
      await admin('PATCH', `/api/v1/templates/${bare.body.id}`, { html, variables: [{ key: 'vip', type: 'boolean' }] });
      const refused = await admin('POST', `/api/v1/templates/${bare.body.id}/publish`);
      assert.equal(refused.status, 422, html);
      assert.equal(refused.body.error.details[0].field, 'html', html);
    }
    const versions = await sql('select count(*)::int as n from template_versions where template_id in (?, ?)', [
      made.body.id,
      bare.body.id,
    ]);
    assert.equal(versions[0].n, 0, 'nothing was published');
  });

  it('numbers versions 1, 2, … (concurrent publishes too), keeps them immutable and resolves latest, a number or a slug; drafts never', async () => {
    const made = await admin('POST', '/api/v1/templates', {
      name: 'Versions',
      slug: 'versions',
      subject: 'v1 {{name}}',
      text: 'one {{name}}',
      variables: [{ key: 'name', type: 'string' }],
    });
    const id = made.body.id;
    const draftOnly = await send({ id, data: { name: 'A' } });
    assert.equal(draftOnly.status, 422);
    assert.equal(draftOnly.body.error.code, 'template_not_found', 'an unpublished draft never resolves');

    const v1 = await admin('POST', `/api/v1/templates/${id}/publish`);
    assert.equal(v1.status, 201);
    assert.equal(v1.body.object, 'template_version');
    assert.equal(v1.body.version, 1);
    await admin('PATCH', `/api/v1/templates/${id}`, { subject: 'v2 {{name}}', text: 'two {{name}}' });
    const concurrent = await Promise.all(Array.from({ length: 4 }, () => admin('POST', `/api/v1/templates/${id}/publish`)));
    assert.deepEqual(concurrent.map((r) => r.body.version).sort(), [2, 3, 4, 5]);
    await admin('PATCH', `/api/v1/templates/${id}`, { subject: 'draft {{name}}' });

    const one = await admin('GET', `/api/v1/templates/${id}/versions/1`);
    assert.equal(one.body.subject, 'v1 {{name}}', 'a published version never changes');
    assert.equal((await admin('GET', `/api/v1/templates/${id}/versions/6`)).status, 404);
    assert.equal((await admin('GET', `/api/v1/templates/${id}/versions/0`)).status, 404);
    const got = await admin('GET', `/api/v1/templates/${id}`);
    assert.deepEqual(
      got.body.versions.map((v: { version: number }) => v.version),
      [1, 2, 3, 4, 5],
    );
    assert.equal(got.body.latest_version, 5);
    assert.equal(got.body.draft.subject, 'draft {{name}}');

    const subjectOf = async (template: unknown) => {
      const res = await send(template);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
    };
    const latest = await subjectOf({ id, data: { name: 'A' } });
    assert.equal(latest.subject, 'v2 A');
    assert.deepEqual(latest.template, { id, version: 5 });
    assert.equal((await subjectOf({ slug: 'versions', version: 'latest', data: { name: 'B' } })).subject, 'v2 B');
    const first = await subjectOf({ slug: 'versions', version: 1, data: { name: 'C' } });
    assert.equal(first.subject, 'v1 C');
    assert.equal(first.text, 'one C');
    assert.deepEqual(first.template, { id, version: 1 });

    for (const template of [
      { id, version: 6, data: { name: 'x' } },
      { slug: 'nope', data: {} },
      { id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', data: {} },
      { id: 'not-a-uuid' },
      { slug: 'Not A Slug' },
    ]) {
      const res = await send(template);
      assert.equal(res.status, 422, JSON.stringify(template));
      assert.equal(res.body.error.code, 'template_not_found', JSON.stringify(template));
    }
    // The message names what was asked as it was asked, and says where a slug goes (issue 51).
    assert.equal(
      (await send({ id, version: 6, data: { name: 'x' } })).body.error.message,
      `no published version 6 of the template with id ${id}`,
    );
    assert.equal((await send({ slug: 'nope', data: {} })).body.error.message, 'no published version of the template with slug nope');
    assert.equal(
      (await send({ id: 'welcome', data: {} })).body.error.message,
      "no published version of the template with id welcome: template.id takes a template's id (a UUID); a slug such as welcome goes in template.slug",
    );
  });

  it('sends the version PostgreSQL sees: a publish or delete right after a send is never missed by the next one', async () => {
    const id = await published({
      name: 'Fresh',
      slug: 'fresh',
      subject: 'one {{n}}',
      text: 'one',
      variables: [{ key: 'n', type: 'string' }],
    });
    const subjectOf = async (res: { status: number; body: { id: string } }) => {
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.subject;
    };
    assert.equal(await subjectOf(await send({ slug: 'fresh', data: { n: 'a' } })), 'one a');
    // Straight into the database, as another process would: nothing in this process hears of it.
    await sql(`update templates set subject = 'two {{n}}', draft_revision = draft_revision + 1 where id = ?`, [id]);
    await admin('POST', `/api/v1/templates/${id}/publish`);
    assert.equal(await subjectOf(await send({ slug: 'fresh', data: { n: 'b' } })), 'two b', 'latest is the new version at once');
    const batch = await t.call('POST', '/api/v1/emails/batch', {
      body: [{ from: from(), to: 'x@example.com', template: { slug: 'fresh', data: { n: 'c' } } }],
    });
    assert.equal(await subjectOf({ status: 200, body: batch.body.data[0] }), 'two c');
    assert.equal(await subjectOf(await send({ slug: 'fresh', version: 1, data: { n: 'd' } })), 'one d', 'a number still names its version');
    await sql('delete from templates where id = ?', [id]);
    const gone = await send({ slug: 'fresh', data: { n: 'e' } });
    assert.equal(gone.status, 422);
    assert.equal(gone.body.error.code, 'template_not_found');
    const goneInBatch = await t.call('POST', '/api/v1/emails/batch', {
      body: [{ from: from(), to: 'x@example.com', template: { id, version: 1, data: { n: 'f' } } }],
    });
    assert.equal(goneInBatch.body.data[0].error.code, 'template_not_found');
  });

  it('escapes values in html only, makes text from html when there is none, and takes dotted or nested data with fallbacks', async () => {
    const id = await published({
      name: 'Escaping',
      subject: 'For {{user.first_name}} & co',
      html: '<p>Hello {{user.first_name}}{{#unless vip}}, not VIP{{/unless}}</p><p>Plan: {{plan}}</p><p><a href="https://example.com/x">Open</a></p>',
      variables: [
        { key: 'user.first_name', type: 'string' },
        { key: 'vip', type: 'boolean', fallback: false },
        { key: 'plan', type: 'string', fallback: 'free' },
      ],
    });
    const res = await send({ id, data: { 'user.first_name': '<Ann & "Bo">' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const email = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
    assert.equal(email.subject, 'For <Ann & "Bo"> & co', 'the subject is not escaped');
    assert.match(email.html, /Hello &lt;Ann &amp; &quot;Bo&quot;&gt;, not VIP/);
    assert.match(email.html, /Plan: free/, 'the fallback fills a missing value');
    assert.match(email.text, /Hello <Ann & "Bo">, not VIP/, 'text made from html, unescaped');
    assert.match(email.text, /Open \[https:\/\/example\.com\/x\]/);

    const nested = await send({ id, data: { user: { first_name: 'Zoë' }, vip: true, plan: 'pro' } });
    const n = (await t.call('GET', `/api/v1/emails/${nested.body.id}`)).body;
    assert.equal(n.subject, 'For Zoë & co');
    assert.match(n.html, /Hello Zoë<\/p><p>Plan: pro/);
  });

  it('answers 422 template_variables naming each offending key, and validation_error for template beside subject, html or text', async () => {
    const id = await published({
      name: 'Strict',
      subject: '{{title}}',
      text: '{{count}} {{#if ok}}ok{{/if}}',
      variables: [
        { key: 'title', type: 'string' },
        { key: 'count', type: 'number' },
        { key: 'ok', type: 'boolean' },
      ],
    });
    const stored = async () => (await sql('select count(*)::int as n from emails where organization_id = ?', [t.orgId]))[0].n;
    const before = await stored();
    const cases: [unknown, string[]][] = [
      [{ count: 1, ok: true }, ['data.title']],
      [{ title: 't', count: '1', ok: true }, ['data.count']],
      [{ title: 't', count: 1, ok: 'yes' }, ['data.ok']],
      [{ title: 't', count: 1, ok: true, extra: 'x', 'deep.key': 1 }, ['data.deep.key', 'data.extra']],
      [{ title: 'a\r\nBcc: x@example.com', count: 1, ok: true }, ['subject']],
      [{ title: '', count: 1, ok: true }, ['subject']],
      [{ title: 'x'.repeat(999), count: 1, ok: true }, ['subject']],
      [{ title: { nested: 1 }, count: null, ok: true }, ['data.count', 'data.title']],
    ];
    for (const [data, fields] of cases) {
      const res = await send({ id, data });
      assert.equal(res.status, 422, JSON.stringify(data).slice(0, 80));
      assert.equal(res.body.error.code, 'template_variables');
      assert.deepEqual(res.body.error.details.map((d: { field: string }) => d.field).sort(), fields, JSON.stringify(data).slice(0, 80));
    }
    for (const extra of [{ subject: 's' }, { html: '<p>x</p>' }, { text: 'x' }]) {
      const res = await send({ id, data: { title: 't', count: 1, ok: true } }, extra);
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'validation_error');
    }
    for (const template of [
      {},
      { id, slug: 'x' },
      { id, version: 0 },
      { id, version: 'draft' },
      { id, data: [] },
      { id, extra: 1 },
      'welcome',
    ]) {
      const res = await send(template);
      assert.equal(res.status, 422, JSON.stringify(template));
      assert.equal(res.body.error.code, 'validation_error', JSON.stringify(template));
    }
    assert.equal(await stored(), before, 'nothing was stored');
    const badKey = await request(env.url, 'POST', '/api/v1/emails', {
      token: 're_' + 'x'.repeat(40),
      body: { from: from(), to: 'a@example.com', template: { id, data: {} } },
    });
    assert.equal(badKey.status, 401, 'a bad key is a 401 before any template error');
  });

  it('renders each batch item on its own: good and bad templates side by side', async () => {
    const id = await published({
      name: 'Batch',
      subject: 'Hi {{name}}',
      text: 'Hi {{name}}',
      variables: [{ key: 'name', type: 'string' }],
    });
    const item = (template: unknown, to: string) => ({ from: from(), to, template });
    const res = await t.call('POST', '/api/v1/emails/batch', {
      body: [
        item({ id, data: { name: 'One' } }, 'one@example.com'),
        item({ id, data: {} }, 'two@example.com'),
        item({ slug: 'missing-template' }, 'three@example.com'),
        { from: from(), to: 'four@example.com', subject: 'plain', text: 'plain' },
        item({ id, version: 1, data: { name: 'Five' } }, 'five@example.com'),
      ],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const [one, two, three, four, five] = res.body.data;
    assert.ok(one.id && four.id && five.id, JSON.stringify(res.body));
    assert.equal(two.error.code, 'template_variables');
    assert.equal(three.error.code, 'template_not_found');
    assert.equal((await t.call('GET', `/api/v1/emails/${one.id}`)).body.subject, 'Hi One');
    assert.equal((await t.call('GET', `/api/v1/emails/${five.id}`)).body.subject, 'Hi Five');
    assert.equal((await t.call('GET', `/api/v1/emails/${four.id}`)).body.template, null);
  });

  it('previews what the recipient receives: the render endpoint equals the delivered message; test keys render too', async () => {
    const id = await published({
      name: 'Preview',
      slug: 'preview',
      subject: 'Welcome, {{user.name}}',
      html: '<h1>Welcome, {{user.name}}</h1><p>Your code is {{code}}.</p>',
      variables: [
        { key: 'user.name', type: 'string' },
        { key: 'code', type: 'number' },
      ],
    });
    const data = { 'user.name': 'Ann <3', code: 42 };
    const preview = await admin('POST', '/api/v1/templates/preview/render', { data });
    assert.equal(preview.status, 200, JSON.stringify(preview.body));
    assert.deepEqual(preview.body.template, { id, version: 1 });
    assert.equal(preview.body.subject, 'Welcome, Ann <3');

    const to = `preview-${Date.now()}@example.com`;
    const sent = await t.call('POST', '/api/v1/emails', { body: { from: from(), to, template: { slug: 'preview', data } } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const got = await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), 'delivery');
    assert.equal(got.parsed.subject, preview.body.subject);
    assert.equal((got.parsed.html as string).trim(), preview.body.html.trim());
    assert.equal(got.parsed.text?.trim(), preview.body.text.trim());

    const bad = await admin('POST', '/api/v1/templates/preview/render', { data: { code: 'x' } });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.code, 'template_variables');
    assert.deepEqual(bad.body.error.details.map((d: { field: string }) => d.field).sort(), ['data.code', 'data.user.name']);
    const unpublished = await admin('POST', '/api/v1/templates/preview/render', { version: 2, data });
    assert.equal(unpublished.body.error.code, 'template_not_found');
    // Versions are PostgreSQL integers: a number past them is a bad version (422), not a fault of ours.
    const huge = await admin('POST', '/api/v1/templates/preview/render', { version: 2_147_483_648, data });
    assert.equal(huge.status, 422);
    assert.equal(huge.body.error.code, 'validation_error');
    const hugeSend = await t.call('POST', '/api/v1/emails', {
      body: { from: `app@${t.domain}`, to: 'a@example.com', template: { slug: 'preview', version: 2_147_483_648, data } },
    });
    assert.equal(hugeSend.status, 422);
    assert.equal(hugeSend.body.error.code, 'validation_error');
    await admin('PATCH', '/api/v1/templates/preview', { subject: 'Draft for {{user.name}}' });
    const draft = await admin('POST', '/api/v1/templates/preview/render', { version: 'draft', data });
    assert.equal(draft.body.subject, 'Draft for Ann <3');
    assert.equal(draft.body.template.version, 'draft');

    const simulated = await send({ slug: 'preview', data }, { to: 'delivered@resend.dev' }, 'test');
    assert.equal(simulated.status, 200, JSON.stringify(simulated.body));
    const email = await waitFor(async () => {
      const e = (await t.call('GET', `/api/v1/emails/${simulated.body.id}`, { as: 'test' })).body;
      return e.last_event === 'delivered' ? e : undefined;
    }, 'simulated delivery');
    assert.equal(email.subject, 'Welcome, Ann <3');
    assert.deepEqual(email.template, { id, version: 1 });
  });

  it('deletes a template: later sends get template_not_found, stored messages stay as they were', async () => {
    const id = await published({
      name: 'Gone',
      slug: 'gone',
      subject: 'Bye {{n}}',
      text: 'bye',
      variables: [{ key: 'n', type: 'string' }],
    });
    const before = await send({ slug: 'gone', data: { n: 'x' } });
    assert.equal(before.status, 200);
    const keyed = await t.call('POST', '/api/v1/emails', {
      body: { from: from(), to: 'k@example.com', template: { slug: 'gone', data: { n: 'k' } } },
      headers: { 'idempotency-key': `gone-${id}` },
    });
    assert.equal(keyed.status, 200, JSON.stringify(keyed.body));
    const batchItem = {
      from: from(),
      to: 'b@example.com',
      template: { slug: 'gone', data: { n: 'b' } },
      idempotency_key: `gone-batch-${id}`,
    };
    const keyedBatch = await t.call('POST', '/api/v1/emails/batch', { body: [batchItem] });
    const del = await admin('DELETE', '/api/v1/templates/gone');
    assert.equal(del.status, 200);
    // Idempotency first: a retry of a stored send is a replay, whatever became of its template.
    const retried = await t.call('POST', '/api/v1/emails', {
      body: { from: from(), to: 'k@example.com', template: { slug: 'gone', data: { n: 'k' } } },
      headers: { 'idempotency-key': `gone-${id}` },
    });
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.id, keyed.body.id);
    assert.equal(retried.headers.get('idempotent-replayed'), 'true');
    const retriedBatch = await t.call('POST', '/api/v1/emails/batch', {
      body: [batchItem, { ...batchItem, idempotency_key: `new-${id}` }],
    });
    assert.equal(retriedBatch.body.data[0].id, keyedBatch.body.data[0].id);
    assert.equal(retriedBatch.body.data[1].error.code, 'template_not_found');
    for (const template of [
      { id, data: { n: 'x' } },
      { slug: 'gone', data: { n: 'x' } },
    ]) {
      const res = await send(template);
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'template_not_found');
    }
    const kept = (await t.call('GET', `/api/v1/emails/${before.body.id}`)).body;
    assert.equal(kept.subject, 'Bye x');
    assert.deepEqual(kept.template, { id, version: 1 });
    const versions = await sql('select count(*)::int as n from template_versions where template_id = ?', [id]);
    assert.equal(versions[0].n, 0, 'versions go with their template');
    const again = await admin('POST', '/api/v1/templates', { name: 'Gone again', slug: 'gone', subject: 's', text: 't' });
    assert.equal(again.status, 201, 'the slug is free again');
  });
});
