import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createDomain } from '../../core/provisioning';
import { utcDay } from '../../core/limits/caps';
import { addTlsCounts } from '../../db/sql/mta-sts';
import { axeViolations, describeViolations } from '../support/axe';
import { closeBrowser, launchBrowser, type BrowserContext, type Page } from '../support/browser';
import { newOperator, type OperatorLogin } from '../support/console';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { waitFor } from '../support/wait';
import { WebhookReceiver } from '../support/webhook-receiver';

/** CONSOLE_SCREENSHOTS=1: each page is saved as docs/console/<name>.png (1280 px wide), for docs/console.md. */
const SHOTS = process.env.CONSOLE_SCREENSHOTS === '1' ? path.resolve(__dirname, '..', '..', 'docs', 'console') : null;

/**
 * Every console page in real Chromium, with data seeded through the API: it renders what a person
 * came for, axe-core finds no serious or critical violation, and the keyboard reaches the skip link
 * first and the navigation in order.
 */
describe('console pages in a browser: data, axe-core, keyboard', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let context: BrowserContext;
  let page: Page;
  let receiver: WebhookReceiver;
  // Names a reader of the screenshots can take in; domains are unique across the database, hence the short tag.
  const tag = Date.now().toString(36).slice(-5);
  const ids: Record<string, string> = {};
  const names = {
    subject: 'Welcome aboard, Ann',
    key: 'billing-service',
    domain: `news-${tag}.example.org`,
    topic: 'product-news',
    topicName: 'Product news',
    contact: 'ann@people.example',
    segment: 'Subscribed readers',
    suppressed: 'bounced@people.example',
    stsDomain: 'policy.example.net',
    reply: '451 4.7.1 greylisted, try again later',
    broadcast: 'November newsletter',
    automation: 'Onboarding drip',
    event: 'signed-up',
    org: 'Acme Mail',
  };

  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const admin = async (method: string, url: string, body?: unknown) => {
    const res = await t.call(method, url, { as: 'admin', body });
    assert.ok(res.status < 300, `${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  before(async function () {
    this.timeout(120_000);
    env = await sharedService();
    receiver = new WebhookReceiver();
    [t, platform] = await Promise.all([newTenant(env), newOperator(env, null, `ops-${tag}@example.com`), receiver.start()]);
    await sql(`update organizations set name = ? where id = ?`, [names.org, t.orgId]);
    // A second organization, for the platform's lists and for what an organization admin must not see.
    const globex = await newTenant(env);
    await sql(`update organizations set name = 'Globex Shop' where id = ?`, [globex.orgId]);
    await globex.call('POST', '/api/v1/emails', {
      body: { from: `shop@${globex.domain}`, to: 'buyer@example.com', subject: 'Your order', text: 'x' },
    });
    const orm = env.service.db.orm;
    const bulk = await createDomain(orm, t.orgId, `bulk-${tag}.example.test`, { verified: true, stream: 'bulk' });

    ids.webhook = (await admin('POST', '/api/v1/webhooks', { url: `${receiver.url}/hooks`, events: ['email.sent', 'email.delivered'] })).id;
    const sent = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `Acme <hello@${t.domain}>`,
        to: 'reader@example.com',
        subject: names.subject,
        html: '<h1>Hello Ann</h1><p>Glad you are here.</p>',
        text: 'Hello Ann',
      },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    ids.email = sent.body.id;
    await t.call('POST', '/api/v1/emails', {
      body: {
        from: `hello@${t.domain}`,
        to: 'later@example.com',
        subject: 'Your trial ends soon',
        text: 'x',
        scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
      },
    });
    await admin('POST', '/api/v1/keys', { name: names.key, permission: 'send', mode: 'live' });
    ids.domain = (await admin('POST', '/api/v1/domains', { name: names.domain })).id;
    await admin('POST', '/api/v1/topics', { slug: names.topic, name: names.topicName });
    ids.contact = (await admin('POST', '/api/v1/contacts', { email: names.contact, first_name: 'Ann', topics: [names.topic] })).id;
    await admin('POST', '/api/v1/contacts', { email: 'bob@people.example', first_name: 'Bob', topics: [names.topic] });
    ids.segment = (
      await admin('POST', '/api/v1/segments', { name: names.segment, filter: { all: [{ topic: names.topic, state: 'SUBSCRIBED' }] } })
    ).id;
    await admin('POST', '/api/v1/suppressions', { email: names.suppressed });
    ids.broadcast = (
      await admin('POST', '/api/v1/broadcasts', {
        segment_id: ids.segment,
        from: `News <news@${bulk.name}>`,
        name: names.broadcast,
        topic: names.topic,
        subject: 'What is new in November',
        text: 'News',
      })
    ).id;
    ids.automation = (
      await admin('POST', '/api/v1/automations', {
        name: names.automation,
        trigger: { event: names.event },
        steps: [{ type: 'delay', duration: 'P1D' }],
      })
    ).id;
    await t.call('POST', '/api/v1/events', { body: { name: names.event, email: names.contact } });
    // Two live messages sent days ago with no delivery event: the unconfirmed page's rows.
    for (const to of ['silent-1@example.com', 'silent-2@example.com']) {
      const r = await t.call('POST', '/api/v1/emails', {
        body: {
          from: `hello@${t.domain}`,
          to,
          subject: `No answer from ${to}`,
          text: 'x',
          scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
        },
      });
      await sql(`update emails set status = 'sent', sent_at = now() - interval '5 days' where id = ?`, [r.body.id]);
    }
    // The delivery page's rows: TLS sessions with an MTA-STS domain, and a message waiting for its retry.
    await addTlsCounts(env.service.db.orm, [{ policy_domain: names.stsDomain, day: utcDay(new Date()), successes: 41, failures: 2 }]);
    const later = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `hello@${t.domain}`,
        to: 'later@example.com',
        subject: 'Deferred',
        text: 'x',
        scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
      },
    });
    ids.deferred = later.body.id;
    await sql(
      `update emails set enqueued_at = now(), retry_reason = 'deferred', retry_at = now() + interval '5 minutes', deferrals = 1, last_reply = ? where id = ?`,
      [names.reply, ids.deferred],
    );
    ids.run = await waitFor(
      async () => (await admin('GET', `/api/v1/automations/${ids.automation}/runs`)).data[0]?.id,
      'the automation run',
    );
    await waitFor(
      async () => (['sent', 'delivered'].includes((await admin('GET', `/api/v1/emails/${ids.email}`)).last_event) ? true : undefined),
      'the send',
    );
    await waitFor(
      async () => ((await admin('GET', `/api/v1/broadcasts/${ids.broadcast}`)).status === 'sent' ? true : undefined),
      'the broadcast',
      30_000,
    );
    await waitFor(
      async () => ((await admin('GET', `/api/v1/webhooks/${ids.webhook}/deliveries`)).data.length ? true : undefined),
      'a webhook delivery',
    );

    const browser = await launchBrowser();
    context = await browser.newContext({ baseURL: env.url, viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    await page.goto('/console/sign-in');
    if (SHOTS) await shoot('sign-in');
    await axeClean('sign-in');
    await page.getByLabel('Email').fill(platform.email);
    await page.getByLabel('Password').fill(platform.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/console/overview');
  });

  after(async () => {
    await context?.close();
    await closeBrowser();
    await receiver?.stop();
  });

  async function axeClean(label: string) {
    const found = await axeViolations(page);
    assert.equal(found.length, 0, `${label}: axe-core found serious or critical violations:\n${describeViolations(found)}`);
  }

  async function shoot(name: string) {
    fs.mkdirSync(SHOTS!, { recursive: true });
    // The whole page, capped in height so a long list stays a small PNG. The viewport is stretched
    // to it rather than a fullPage capture, which leaves the (cross-origin) preview iframe blank.
    const height = await page.evaluate(
      () => (globalThis as unknown as { document: { documentElement: { scrollHeight: number } } }).document.documentElement.scrollHeight,
    );
    await page.setViewportSize({ width: 1280, height: Math.min(height, 1200) });
    try {
      await page.screenshot({ path: path.join(SHOTS!, `${name}.png`) });
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  }

  const org = (p: string) => `/console/o/${t.orgId}/${p}`;

  /** A page: it answers 200, its heading and the seeded data show, axe-core is clean, and (optionally) a screenshot. */
  const pages: { name: string; url: () => string; heading: RegExp; shows: () => string[]; also?: () => Promise<void> }[] = [
    // Every organization, busiest first: in a full test run this one may be on a later page (its own overview is below).
    { name: 'overview', url: () => '/console/overview', heading: /overview/i, shows: () => ['Platform'] },
    { name: 'organizations', url: () => '/console/organizations', heading: /organizations/i, shows: () => [names.org, 'Globex Shop'] },
    {
      name: 'unconfirmed',
      url: () => `/console/unconfirmed?org=${t.orgId}`,
      heading: /unconfirmed/i,
      shows: () => ['silent-1@example.com', 'silent-2@example.com'],
    },
    {
      name: 'delivery',
      url: () => '/console/delivery',
      heading: /^Delivery$/,
      shows: () => [names.stsDomain, ids.deferred, names.reply],
    },
    { name: 'messages', url: () => org('messages'), heading: /^Messages$/, shows: () => [names.subject, 'Your trial ends soon'] },
    {
      name: 'message',
      url: () => org(`messages/${ids.email}`),
      heading: /Welcome aboard/,
      shows: () => ['reader@example.com', 'sent'],
      // The body in its sandboxed preview.
      also: () => page.frameLocator('iframe.preview').getByRole('heading', { name: 'Hello Ann' }).waitFor(),
    },
    { name: 'keys', url: () => org('keys'), heading: /keys/i, shows: () => [names.key] },
    { name: 'domains', url: () => org('domains'), heading: /domains/i, shows: () => [names.domain, t.domain] },
    {
      name: 'domain',
      url: () => org(`domains/${ids.domain}`),
      heading: new RegExp(names.domain.replace(/\./g, '\\.')),
      shows: () => ['TXT'],
    },
    { name: 'audience', url: () => org('audience'), heading: /audience/i, shows: () => [names.topicName, names.segment, names.contact] },
    {
      name: 'contact',
      url: () => org(`audience/contacts/${ids.contact}`),
      heading: new RegExp(names.contact.replace(/\./g, '\\.')),
      shows: () => [names.topic, 'Ann'],
    },
    { name: 'webhooks', url: () => org('webhooks'), heading: /webhooks/i, shows: () => [`${receiver.url}/hooks`] },
    {
      name: 'webhook',
      url: () => org(`webhooks/${ids.webhook}`),
      heading: /\/hooks$/,
      shows: () => ['email.sent, email.delivered', 'succeeded'],
    },
    { name: 'suppressions', url: () => org('suppressions'), heading: /suppressions/i, shows: () => [names.suppressed] },
    { name: 'broadcasts', url: () => org('broadcasts'), heading: /broadcasts/i, shows: () => [names.broadcast] },
    {
      name: 'broadcast',
      url: () => org(`broadcasts/${ids.broadcast}`),
      heading: new RegExp(names.broadcast),
      shows: () => ['2 of 2 processed'],
    },
    { name: 'automations', url: () => org('automations'), heading: /automations/i, shows: () => [names.automation] },
    {
      name: 'automation',
      url: () => org(`automations/${ids.automation}`),
      heading: new RegExp(names.automation),
      shows: () => [names.event],
    },
    {
      name: 'automation-run',
      url: () => org(`automations/${ids.automation}/runs/${ids.run}`),
      heading: new RegExp(`Run of ${names.automation}`),
      shows: () => [names.contact, 'delay', 'running'],
    },
    // Filtered to the console's own writes (the key made on the page above): they name the operator.
    {
      name: 'audit',
      url: () => org(`audit?actor=console:${platform.email}`),
      heading: /audit/i,
      shows: () => ['key.created', `console:${platform.email}`, 'deploy-bot'],
    },
    { name: 'account', url: () => '/console/account', heading: /account/i, shows: () => [platform.email] },
  ];

  it('pages answering a form: a new key with its token shown once, and two-factor setup, pass axe-core too', async () => {
    await page.goto(org('keys'));
    await page.getByLabel('Name').fill('deploy-bot');
    await page.getByLabel('Permission').selectOption('admin');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'Key created: deploy-bot' }).waitFor();
    assert.ok(await page.getByRole('button', { name: 'Copy' }).isVisible());
    await axeClean('key created');
    if (SHOTS) await shoot('key-created');

    await page.goto('/console/account');
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    await page.locator('#totp-secret').waitFor();
    assert.ok(await page.getByLabel('One-time code').isVisible());
    await axeClean('two-factor setup');

    const missing = await page.goto(org('messages/00000000-0000-7000-8000-000000000000'));
    assert.equal(missing?.status(), 404);
    await axeClean('not found');
  });

  for (const p of pages) {
    it(`${p.name}: renders with its data and passes axe-core`, async () => {
      const res = await page.goto(p.url());
      assert.equal(res?.status(), 200, `${p.name}: ${p.url()}`);
      const h1 = page.getByRole('heading', { level: 1 });
      assert.equal(await h1.count(), 1, `${p.name}: one <h1>`);
      assert.match(await h1.innerText(), p.heading);
      const text = await page.locator('main').innerText();
      for (const s of p.shows()) assert.ok(text.includes(s), `${p.name} shows ${s}`);
      await p.also?.();
      await axeClean(p.name);
      if (SHOTS) await shoot(p.name);
    });
  }

  it("an organization admin's overview: their organization's sending against its caps, no other organization", async () => {
    const own = await newOperator(env, t.orgId);
    const other = await (await launchBrowser()).newContext({ baseURL: env.url });
    try {
      const p = await other.newPage();
      await p.goto('/console/sign-in');
      await p.getByLabel('Email').fill(own.email);
      await p.getByLabel('Password').fill(own.password);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.waitForURL('**/console/overview');
      const text = await p.locator('main').innerText();
      assert.ok(text.includes(names.org), 'their organization');
      assert.ok(text.includes(t.domain), 'its domains');
      assert.ok(!text.includes('Globex'), 'no other organization');
      const found = await axeViolations(p);
      assert.equal(found.length, 0, describeViolations(found));
    } finally {
      await other.close();
    }
  });

  it('the axe-core check itself fails a page with a planted violation (an unnamed button, an unlabelled field)', async () => {
    await page.goto(org('suppressions'));
    await page.evaluate(() => {
      const d = (globalThis as unknown as { document: any }).document;
      d.querySelector('main').insertAdjacentHTML('beforeend', '<button type="button"></button><input type="text" name="x">');
    });
    const ids = (await axeViolations(page)).map((v) => v.id).sort();
    assert.deepEqual(ids, ['button-name', 'label']);
  });

  it('keyboard: Tab from the top reaches the skip link first, which leads into the page; the navigation follows in order', async () => {
    await page.goto(org('messages'));
    await page.keyboard.press('Tab');
    const focused = () =>
      page.evaluate(() => {
        const a = (
          globalThis as unknown as {
            document: { activeElement: { tagName: string; textContent: string | null; className: string } | null };
          }
        ).document.activeElement;
        return a ? { tag: a.tagName, text: (a.textContent ?? '').trim(), cls: a.className } : null;
      });
    assert.deepEqual(await focused(), { tag: 'A', text: 'Skip to content', cls: 'skip' });
    assert.ok(await page.getByRole('link', { name: 'Skip to content' }).isVisible(), 'the skip link shows when focused');

    // On through the header to the organization's navigation, each link in the order it shows.
    const navLinks = (await page.locator('nav.side a').allInnerTexts()).map((x) => x.trim());
    assert.deepEqual(navLinks, [
      'Messages',
      'Keys',
      'Domains',
      'Audience',
      'Webhooks',
      'Suppressions',
      'Broadcasts',
      'Automations',
      'Audit log',
    ]);
    const order: string[] = [];
    for (let i = 0; i < 20 && order.length < navLinks.length; i++) {
      await page.keyboard.press('Tab');
      const inNav = await page.evaluate(
        () =>
          (
            globalThis as unknown as { document: { activeElement: { closest: (s: string) => unknown } | null } }
          ).document.activeElement?.closest('nav.side') != null,
      );
      if (inNav) order.push((await focused())!.text);
      else assert.equal(order.length, 0, 'the navigation links are reached one after another');
    }
    assert.deepEqual(order, navLinks);

    // The skip link, used: the next Tab is inside the page's main content.
    await page.goto(org('messages'));
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    const inMain = await page.evaluate(
      () =>
        (
          globalThis as unknown as { document: { activeElement: { closest: (s: string) => unknown } | null } }
        ).document.activeElement?.closest('main') != null,
    );
    assert.ok(inMain, 'after the skip link, Tab continues in <main>');
  });
});
