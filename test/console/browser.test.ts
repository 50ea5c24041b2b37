import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { totpCode } from '../../core/console/totp';
import { closeBrowser, launchBrowser, type BrowserContext, type Page } from '../support/browser';
import { newOperator, type OperatorLogin } from '../support/console';
import { request } from '../support/http';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';

/**
 * The console in real headless Chromium, as an operator uses it: the labelled sign-in form, TOTP,
 * ADMIN keys made and rotated on the page and used on the API, closing unconfirmed mail, a hostile
 * message body, CSRF, session expiry and organization scope. (Every page and axe-core: browser-pages.)
 */
describe('console in a browser', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let platform: OperatorLogin;
  let context: BrowserContext;
  let page: Page;

  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);

  before(async function () {
    env = await sharedService();
    [t, other, platform] = await Promise.all([newTenant(env), newTenant(env), newOperator(env, null)]);
    await launchBrowser();
  });
  after(closeBrowser);

  beforeEach(async () => {
    context = await (await launchBrowser()).newContext({ baseURL: env.url });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
  });
  afterEach(async () => context?.close());

  /** The sign-in form as a person fills it; with a code, the second form (password again, and the code) too. */
  async function signIn(p: Page, who: OperatorLogin, code?: string) {
    await p.goto('/console/sign-in');
    await p.getByLabel('Email').fill(who.email);
    await p.getByLabel('Password').fill(who.password);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForLoadState();
    if (code === undefined) return;
    await p.getByLabel('Password').fill(who.password);
    await p.getByLabel('One-time code').fill(code);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForLoadState();
  }
  const path = (p: Page) => new URL(p.url()).pathname;
  const alertText = async (p: Page) => (await p.getByRole('alert').innerText()).trim();

  it('signs in with the labelled fields: a wrong password stays on sign-in with the error, the right one opens the overview', async () => {
    await signIn(page, { ...platform, password: 'not the password' });
    assert.equal(path(page), '/console/sign-in');
    assert.equal(await alertText(page), 'The email, password or code is not right.');
    assert.equal(await page.getByLabel('Email').inputValue(), platform.email, 'the email is kept');
    await signIn(page, platform);
    assert.equal(path(page), '/console/overview');
    assert.ok(await page.getByRole('button', { name: 'Sign out' }).isVisible());
    assert.ok((await page.locator('header.top').innerText()).includes(platform.email));
  });

  it('turns TOTP on in the account page; sign-in then asks for the one-time code, refuses a wrong one, accepts the right one', async () => {
    const op = await newOperator(env, t.orgId);
    await signIn(page, op);
    await page.goto('/console/account');
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const secret = (await page.locator('#totp-secret').innerText()).trim();
    assert.match(secret, /^[A-Z2-7]{32}$/);
    await page.getByLabel('One-time code').fill(totpCode(secret));
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByText('Two-factor sign-in is on.').first().waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/console/sign-in');

    // The password alone: the form comes back asking for the code.
    await signIn(page, op);
    assert.equal(path(page), '/console/sign-in');
    const code = page.getByLabel('One-time code');
    assert.ok(await code.isVisible(), 'the form asks for the one-time code');
    assert.match(await page.getByRole('status').innerText(), /one-time code/);

    // A code of another time is refused (still on sign-in, with the error).
    await page.getByLabel('Password').fill(op.password);
    await code.fill(totpCode(secret, Date.now() - 10 * 60_000));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState();
    assert.equal(path(page), '/console/sign-in');
    assert.equal(await alertText(page), 'The email, password or code is not right.');

    // The current code (the next step: the one the setup used is spent) signs in.
    await signIn(page, op, totpCode(secret, Date.now() + 30_000));
    assert.equal(path(page), '/console/overview');
  });

  it('creates an ADMIN key on the keys page and its token works on the API; rotation keeps the old token until its shown expiry; revoke ends both', async () => {
    const admin = await newOperator(env, t.orgId);
    page.on('dialog', (d) => void d.accept());
    await signIn(page, admin);
    await page.goto(`/console/o/${t.orgId}/keys`);
    const name = `deploy-${Date.now()}`;
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Permission').selectOption('admin');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: `Key created: ${name}` }).waitFor();
    const first = (await page.locator('#new-token').innerText()).trim();
    assert.ok(first.length > 20, first);
    const api = (token: string) => request(env.url, 'GET', '/api/v1/keys', { token });
    const made = await api(first);
    assert.equal(made.status, 200, 'the new ADMIN token lists keys');
    const key = (made.body.data as { id: string; name: string; permission: string }[]).find((k) => k.name === name)!;
    assert.equal(key.permission, 'admin');

    await page.getByRole('link', { name: 'Back to keys' }).click();
    await page.getByRole('button', { name: `Rotate ${name}` }).click();
    await page.getByRole('heading', { name: `Key rotated: ${name}` }).waitFor();
    const second = (await page.locator('#new-token').innerText()).trim();
    assert.notEqual(second, first);
    // The page says how long the old token still works: about 24 hours from now.
    const grace = page.locator('main li', { hasText: 'valid until' });
    assert.equal(await grace.count(), 1);
    const until = Date.parse((await grace.locator('time').getAttribute('datetime'))!);
    assert.ok(Math.abs(until - (Date.now() + 24 * 3_600_000)) < 5 * 60_000, new Date(until).toISOString());
    assert.equal((await api(second)).status, 200, 'the new token works');
    assert.equal((await api(first)).status, 200, 'the old token still works in its grace');
    // The list shows the old token's prefix with its expiry too.
    await page.getByRole('link', { name: 'Back to keys' }).click();
    const row = page.locator('tr', { hasText: name });
    assert.match(await row.innerText(), /previous \S+ valid until \d{4}-\d{2}-\d{2} \d{2}:\d{2}/);

    await row.getByRole('button', { name: `Revoke ${name}` }).click();
    await page.getByRole('status').filter({ hasText: 'The key was revoked.' }).waitFor();
    assert.match(await page.locator('tr', { hasText: name }).innerText(), /revoked/);
    assert.equal((await api(second)).status, 401);
    assert.equal((await api(first)).status, 401);
    assert.ok((await t.call('GET', `/api/v1/keys/${key.id}`, { as: 'admin' })).body.revoked_at, 'the API shows it revoked');
  });

  it('closes three unconfirmed messages at once: three boxes ticked, one submit; the API then shows them unconfirmed', async () => {
    const tag = Date.now();
    const made: { id: string; subject: string }[] = [];
    for (const n of [1, 2, 3, 4]) {
      const subject = `Silent ${n} ${tag}`;
      const r = await t.call('POST', '/api/v1/emails', {
        body: {
          from: `app@${t.domain}`,
          to: `quiet-${n}@example.com`,
          subject,
          text: 'x',
          scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
        },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      made.push({ id: r.body.id, subject });
    }
    await sql(
      `update emails set status = 'sent', sent_at = now() - interval '5 days' where id in (?, ?, ?, ?)`,
      made.map((m) => m.id),
    );
    const status = async (id: string) => (await t.call('GET', `/api/v1/emails/${id}`)).body.last_event as string;

    page.on('dialog', (d) => void d.accept());
    await signIn(page, platform);
    await page.goto(`/console/unconfirmed?org=${t.orgId}`);
    for (const m of made.slice(0, 3)) await page.getByRole('checkbox', { name: `Select ${m.subject}` }).check();
    await page.getByRole('button', { name: 'Close selected as unconfirmed' }).click();
    await page.getByRole('status').filter({ hasText: 'closed as unconfirmed' }).waitFor();
    const rest = await page.locator('main').innerText();
    for (const m of made.slice(0, 3)) assert.ok(!rest.includes(m.subject), `${m.subject} left the list`);
    assert.ok(rest.includes(made[3].subject), 'the unticked one stays');

    assert.deepEqual(await Promise.all(made.map((m) => status(m.id))), ['unconfirmed', 'unconfirmed', 'unconfirmed', 'sent']);
    const audit = await t.call('GET', '/api/v1/audit-log?action=email.closed_unconfirmed', { as: 'admin' });
    const closes = audit.body.data as { action: string; actor: string }[];
    assert.ok(closes.length >= 1, 'the close is in the audit log');
    assert.ok(
      closes.every((e) => e.actor === `console:${platform.email}`),
      JSON.stringify(closes),
    );
  });

  it('a message whose subject and body carry <script>: the subject is text, the sandboxed preview runs nothing and loads no remote image until asked', async () => {
    let hits = 0;
    const pixel = http.createServer((req, res) => {
      if (req.url?.startsWith('/pixel')) hits++;
      res.writeHead(200, { 'content-type': 'image/gif' });
      res.end(Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'));
    });
    await new Promise<void>((resolve) => pixel.listen(0, '127.0.0.1', resolve));
    try {
      const port = (pixel.address() as AddressInfo).port;
      const subject = '<script>alert("subject")</script>Quarterly <b>report</b>';
      const body =
        '<p id="hello">Hello</p><script>document.title="body ran";top.document.title="body ran";parent.postMessage("ran","*");alert("x");' +
        'document.body.insertAdjacentHTML("beforeend","<p id=ran>ran</p>")</script>' +
        `<img id="remote" alt="pixel" src="http://127.0.0.1:${port}/pixel">`;
      const sent = await t.call('POST', '/api/v1/emails', {
        body: {
          from: `app@${t.domain}`,
          to: 'xss@example.com',
          subject,
          html: body,
          scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
        },
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));

      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      await signIn(page, platform);
      const listen = () => {
        const g = globalThis as unknown as { got: unknown[]; addEventListener: (t: string, f: (e: { data: unknown }) => void) => void };
        g.got = [];
        g.addEventListener('message', (e) => g.got.push(e.data));
      };
      // The list: the subject as text, no element made of it.
      await page.goto(`/console/o/${t.orgId}/messages`);
      assert.ok(await page.getByRole('link', { name: subject }).isVisible(), 'the subject shows as its own text');
      assert.equal(await page.locator('main b').count(), 0);

      await page.goto(`/console/o/${t.orgId}/messages/${sent.body.id}`);
      await page.evaluate(listen);
      const title = await page.title();
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), subject);
      const frame = page.locator('iframe.preview');
      assert.equal(await frame.getAttribute('sandbox'), '');
      const inner = page.frameLocator('iframe.preview');
      await inner.locator('#hello').waitFor();
      await page.waitForTimeout(300);
      assert.equal(await inner.locator('#ran').count(), 0, "the body's script did not write to its document");
      assert.equal(await page.title(), title);
      assert.ok(title.includes('Quarterly <b>report</b>'), title);
      assert.deepEqual(await page.evaluate(() => (globalThis as unknown as { got: unknown[] }).got), []);
      assert.deepEqual(dialogs, []);
      assert.equal(hits, 0, 'the remote image is blocked');
      assert.equal(await inner.locator('#remote').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth), 0);

      await page.getByRole('link', { name: 'Show remote images' }).click();
      await page.frameLocator('iframe.preview').locator('#hello').waitFor();
      await page.waitForFunction(() => true);
      for (let i = 0; i < 50 && hits === 0; i++) await page.waitForTimeout(50);
      assert.ok(hits >= 1, 'the image is fetched once asked');
      assert.equal(await page.frameLocator('iframe.preview').locator('#ran').count(), 0);
      assert.deepEqual(dialogs, []);
    } finally {
      await new Promise((resolve) => pixel.close(resolve));
    }
  });

  it('refuses a form post without its CSRF token (403) and changes nothing', async () => {
    const sent = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: 'csrf@example.com',
        subject: 'Hold',
        text: 'x',
        scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    await signIn(page, platform);
    await page.goto(`/console/o/${t.orgId}/messages/${sent.body.id}`);
    // The same form as a page would build it without the token: same action, no _csrf field.
    const action = await page.locator('form[action$="/cancel"]').getAttribute('action');
    assert.ok(action);
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith(action)),
      page.evaluate((to) => {
        // The page's own document (no DOM types in this project).
        const d = (globalThis as unknown as { document: any }).document;
        const f = d.createElement('form');
        f.method = 'post';
        f.action = to;
        const note = d.createElement('input');
        note.name = 'note';
        note.value = 'no token';
        f.append(note);
        d.body.append(f);
        f.submit();
      }, action),
    ]);
    assert.equal(answer.status(), 403);
    await page.waitForLoadState();
    assert.match(await page.getByRole('heading', { level: 1 }).innerText(), /missing its security token/);
    // A wrong token is no better.
    const forged = await page.request.post(action, { form: { _csrf: 'forged' } });
    assert.equal(forged.status(), 403);
    assert.equal((await t.call('GET', `/api/v1/emails/${sent.body.id}`)).body.last_event, 'queued');
  });

  it('an expired session goes back to sign-in', async () => {
    const op = await newOperator(env, t.orgId);
    await signIn(page, op);
    await page.goto(`/console/o/${t.orgId}/messages`);
    assert.equal(path(page), `/console/o/${t.orgId}/messages`);
    await sql(`update operator_sessions set last_seen_at = now() - interval '2 hours' where operator_id = ?`, [op.id]);
    await page.reload();
    assert.equal(path(page), '/console/sign-in');
    assert.ok(await page.getByLabel('Password').isVisible());
  });

  it("an organization admin opening another organization's page gets 403 and nothing of it", async () => {
    const name = `Secretive Corp ${Date.now()}`;
    await sql(`update organizations set name = ? where id = ?`, [name, other.orgId]);
    const subject = `Confidential merger ${Date.now()}`;
    await other.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${other.domain}`,
        to: 'ceo@example.com',
        subject,
        text: 'x',
        scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    const admin = await newOperator(env, t.orgId);
    await signIn(page, admin);
    for (const p of ['messages', 'keys', 'domains', 'audit']) {
      const res = await page.goto(`/console/o/${other.orgId}/${p}`);
      assert.equal(res?.status(), 403, p);
      const text = await page.locator('body').innerText();
      assert.match(text, /You do not have access to this organization/);
      assert.ok(!text.includes(name) && !(await page.content()).includes(name), `${p}: the organization's name`);
      assert.ok(!text.includes(subject), `${p}: its messages`);
      assert.ok(!text.includes(other.domain), `${p}: its domain`);
    }
    // Their own organization opens.
    assert.equal((await page.goto(`/console/o/${t.orgId}/messages`))?.status(), 200);
  });
});
