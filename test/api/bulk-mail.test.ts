import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import type { Received } from '../support/sink';
import { waitFor } from '../support/wait';
import { closeBrowser, launchBrowser } from '../support/browser';

interface RecordView {
  purpose: string;
  type: string;
  name: string;
  value: string;
  status: string;
}

/**
 * Issue 16 end to end against the running service: bulk mail as its recipient gets it (one-click
 * unsubscribe headers under the DKIM signature, the legal footer), the recipient's links
 * (unsubscribe page and one-click POST, open pixel, click redirect) and what they change.
 */
describe('API: bulk mail for recipients (unsubscribe, footer, tracking)', function () {
  this.timeout(90_000);
  let env: TestEnv;
  let t: Tenant;
  /** A bulk-stream domain made through the API: DKIM key, records published, verified. */
  let bulk: { id: string; name: string };
  let seq = 0;

  const publish = (records: RecordView[]) => {
    for (const r of records) {
      if (r.type === 'CNAME') env.dns.cname.set(r.name, r.value);
      else if (r.type === 'MX') {
        const [priority, exchange] = r.value.split(' ');
        env.dns.mx.set(r.name, [{ priority: Number(priority), exchange }]);
      } else env.dns.txt.set(r.name, [r.value]);
    }
  };

  const rcpt = (tag: string) => `${tag}-${Date.now()}-${++seq}@example.com`;
  const sendBulk = (to: string, extra: object = {}) =>
    t.call('POST', '/api/v1/emails', {
      body: {
        from: `News <news@${bulk.name}>`,
        to,
        subject: 'Monthly news',
        html: '<html><body><p>Hello <a href="https://shop.example/a?x=1&amp;y=2">our shop</a></p></body></html>',
        text: 'Hello from the shop',
        kind: 'bulk.newsletter',
        ...extra,
      },
    });
  const received = (to: string) => waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), `mail to ${to}`);
  /** The raw header (mailparser folds List-* headers into a structure of its own). */
  const header = (m: Received, name: string) =>
    m.parsed.headerLines
      .find((h) => h.key === name)
      ?.line.replace(/^[^:]+:\s*/, '')
      .replace(/\r?\n\s+/g, '');
  const unsubscribeUrl = (m: Received) => /^<([^>]+)>$/.exec(header(m, 'list-unsubscribe') ?? '')![1];
  /** A link of ours on this server: the path of the URL, requested on the service's own address. */
  const local = (url: string) => env.url + new URL(url).pathname;
  const emailEvents = async (id: string) =>
    (await t.call('GET', `/api/v1/emails/${id}`)).body.events as { type: string; detail?: string; url?: string }[];
  const contact = async (email: string) => (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' })).body;
  const sql = () => env.service.db.orm.em.fork().getConnection();

  after(closeBrowser);

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    const made = await t.call('POST', '/api/v1/domains', {
      as: 'admin',
      body: { name: `news-${Date.now()}.example.test`, stream: 'bulk' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    publish(made.body.records);
    const verified = await t.call('POST', `/api/v1/domains/${made.body.id}/verify`, { as: 'admin' });
    assert.equal(verified.body.status, 'verified');
    bulk = { id: made.body.id, name: made.body.name };
    await t.call('PATCH', '/api/v1/organization', { as: 'admin', body: { postal_address: '1 Main Street\nSpringfield 12345' } });
  });

  it('signs List-Unsubscribe and List-Unsubscribe-Post into DKIM and adds the legal footer to both parts', async () => {
    const to = rcpt('headers');
    const sent = await sendBulk(to, { headers: { 'List-Unsubscribe': '<https://evil.example/u>' } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const m = await received(to);
    const url = unsubscribeUrl(m);
    assert.ok(url.startsWith(`http://localhost:${env.service.port}/u/`), url);
    assert.equal(header(m, 'list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
    assert.ok(!m.raw.toString().includes('evil.example'), "the caller's List-Unsubscribe is dropped");

    const resolver = new Resolver();
    resolver.setServers([`127.0.0.1:${env.dns.port}`]);
    const resolve = (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') as Promise<never>;
    const [sig] = (await dkimVerify(m.raw, { resolver: resolve })).results;
    assert.equal(sig.status.result, 'pass', JSON.stringify(sig.status));
    const signed = String(/\bh=([^;]+)/.exec(m.raw.toString().replace(/\r?\n\s+/g, ''))![1])
      .toLowerCase()
      .split(':');
    assert.ok(signed.includes('list-unsubscribe') && signed.includes('list-unsubscribe-post'), signed.join(':'));
    // Changing the one-click header breaks the signature: it is covered, not just present.
    const forged = Buffer.from(m.raw.toString().replace('List-Unsubscribe=One-Click', 'List-Unsubscribe=One-Clack'));
    assert.equal((await dkimVerify(forged, { resolver: resolve })).results[0].status.result, 'fail');

    // Footer: organization name, the postal address and the unsubscribe link, in html and text.
    const org = (await t.call('GET', '/api/v1/organization', { as: 'admin' })).body;
    for (const part of [String(m.parsed.html), String(m.parsed.text)]) {
      assert.ok(part.includes(org.name), 'organization name');
      assert.ok(part.includes('1 Main Street') && part.includes('Springfield 12345'), 'postal address');
      assert.ok(part.includes(url.replace(/&/g, '&amp;')) || part.includes(url), 'unsubscribe link');
    }
    assert.ok(String(m.parsed.html).indexOf('Springfield') < String(m.parsed.html).indexOf('</body>'), 'inside the body');
  });

  it('omits the footer entirely without a postal address, keeping the unsubscribe headers', async () => {
    const t2 = await newTenant(env, { stream: 'bulk' });
    const to = rcpt('nofooter');
    const sent = await t2.call('POST', '/api/v1/emails', {
      body: { from: `n@${t2.domain}`, to, subject: 'x', html: '<p>Body only</p>', text: 'Body only', kind: 'digest.weekly' },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const m = await received(to);
    assert.ok(unsubscribeUrl(m));
    assert.equal(String(m.parsed.text).trim(), 'Body only');
    assert.ok(!String(m.parsed.html).includes('Unsubscribe'));
  });

  it('GET shows the preference page and changes nothing; one-click POST unsubscribes, once however often', async () => {
    const to = rcpt('oneclick');
    const sent = await sendBulk(to);
    const url = unsubscribeUrl(await received(to));
    await waitFor(async () => (await emailEvents(sent.body.id)).some((e) => e.type === 'sent'), 'sent');

    const page = await fetch(local(url));
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /<form method="post"/);
    assert.ok(html.includes(to));
    assert.equal((await contact(to)).status, undefined, 'a GET created no contact');
    assert.ok(!(await emailEvents(sent.body.id)).some((e) => e.type === 'unsubscribed'));

    for (let i = 0; i < 3; i++) {
      const res = await fetch(local(url), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
        redirect: 'manual',
      });
      assert.equal(res.status, 200, 'no redirect');
    }
    assert.equal((await contact(to)).status, 'unsubscribed', 'the contact was created unsubscribed');
    const events = await emailEvents(sent.body.id);
    assert.equal(events.filter((e) => e.type === 'unsubscribed').length, 1, 'one event for three clicks');
  });

  it('with a topic, leaves that topic only; later bulk mail of that topic is dropped, other mail is not', async () => {
    const slug = `news${Date.now()}`;
    assert.equal((await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug, name: 'Newsletter' } })).status, 201);
    const to = rcpt('topic');
    const sent = await sendBulk(to, { topic: slug });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const url = unsubscribeUrl(await received(to));
    assert.ok((await (await fetch(local(url))).text()).includes('Unsubscribe from Newsletter'));
    assert.equal((await fetch(local(url), { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200);
    const c = await contact(to);
    assert.equal(c.status, 'subscribed', 'the contact stays subscribed');
    const sub = c.subscriptions.find((s: { topic: string }) => s.topic === slug);
    assert.deepEqual([sub.state, sub.explicit, sub.source], ['unsubscribed', true, 'unsubscribe_link']);
    const ev = (await emailEvents(sent.body.id)).find((e) => e.type === 'unsubscribed');
    assert.equal(ev?.detail, slug);

    const again = await sendBulk(to, { topic: slug });
    assert.deepEqual(again.body.suppressed, [to]);
    const dropped = (await emailEvents(again.body.id)).find((e) => e.type === 'suppressed');
    assert.equal(dropped?.detail, 'unsubscribed');
    const otherTopic = await sendBulk(to);
    assert.equal(otherTopic.body.suppressed, undefined, 'bulk mail without that topic still goes');
  });

  it('drops unsubscribed and bounced contacts from bulk sends (transactional kinds ignore contact status)', async () => {
    const gone = rcpt('gone');
    const bounced = rcpt('bounced');
    for (const [email, status] of [
      [gone, 'unsubscribed'],
      [bounced, 'bounced'],
    ]) {
      const up = await t.call('POST', '/api/v1/contacts', { as: 'admin', body: { email, status } });
      assert.ok(up.status < 300, JSON.stringify(up.body));
    }
    for (const [email, detail] of [
      [gone, 'unsubscribed'],
      [bounced, 'bounced'],
    ]) {
      const res = await sendBulk(email);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.suppressed, [email]);
      const got = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
      assert.equal(got.last_event, 'suppressed');
      assert.equal(got.events.find((e: { type: string }) => e.type === 'suppressed').detail, detail);
    }
    const receipt = await t.call('POST', '/api/v1/emails', {
      body: { from: `shop@${t.domain}`, to: gone, subject: 'Your receipt', text: 'Thanks', kind: 'receipt' },
    });
    assert.equal(receipt.status, 200);
    assert.equal(receipt.body.suppressed, undefined);
    await received(gone);
  });

  it('the preference page in a real browser: topics with their state, one button that unsubscribes', async () => {
    const slug = `tips${Date.now()}`;
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug, name: 'Product tips' } });
    const to = rcpt('browser');
    await t.call('POST', '/api/v1/contacts', { as: 'admin', body: { email: to, topics: [slug] } });
    const sent = await sendBulk(to, { topic: slug });
    const url = unsubscribeUrl(await received(to));
    const browser = await launchBrowser();
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const opened = await page.goto(local(url));
      assert.equal(opened?.status(), 200);
      const row = page.locator('tr', { hasText: 'Product tips' });
      assert.equal((await row.locator('td').nth(1).innerText()).trim(), 'subscribed');
      // Loading the page (as a scanner would) changed nothing.
      assert.equal((await contact(to)).subscriptions.find((x: { topic: string }) => x.topic === slug).state, 'subscribed');
      await page.getByRole('button', { name: 'Unsubscribe from Product tips' }).click();
      await page.getByRole('heading', { name: 'You are unsubscribed' }).waitFor();
      assert.ok((await page.content()).includes(to));
    } finally {
      await context.close();
    }
    const sub = (await contact(to)).subscriptions.find((x: { topic: string }) => x.topic === slug);
    assert.deepEqual([sub.state, sub.source], ['unsubscribed', 'unsubscribe_link']);
    assert.ok((await emailEvents(sent.body.id)).some((e) => e.type === 'unsubscribed'));
  });

  it('answers a tampered or unknown token with a 404 page and writes nothing', async () => {
    const to = rcpt('tamper');
    const sent = await sendBulk(to);
    const url = unsubscribeUrl(await received(to));
    const token = new URL(url).pathname.split('/')[2];
    const flipped = token.slice(0, 10) + (token[10] === 'A' ? 'B' : 'A') + token.slice(11);
    for (const bad of [flipped, token.slice(0, -2), 'nothing', 'A'.repeat(9000)]) {
      for (const method of ['GET', 'POST']) {
        const res = await fetch(`${env.url}/u/${bad}`, { method, body: method === 'POST' ? 'List-Unsubscribe=One-Click' : undefined });
        assert.equal(res.status, 404, `${method} ${bad.slice(0, 20)}`);
        assert.match(res.headers.get('content-type') ?? '', /text\/html/);
      }
    }
    assert.equal((await contact(to)).status, undefined);
    assert.ok(!(await emailEvents(sent.body.id)).some((e) => e.type === 'unsubscribed'));
  });

  describe('open and click tracking', () => {
    const trackingHost = () => `links.${bulk.name}`;

    before(async () => {
      const set = await t.call('PATCH', `/api/v1/domains/${bulk.id}`, { as: 'admin', body: { tracking_host: trackingHost() } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      publish(set.body.records.filter((r: RecordView) => r.purpose === 'tracking'));
      const checked = await t.call('POST', `/api/v1/domains/${bulk.id}/verify`, { as: 'admin' });
      assert.equal(checked.body.records.find((r: RecordView) => r.purpose === 'tracking').status, 'verified');
    });

    it('refuses track with several recipients or without a verified tracking host (422, nothing stored)', async () => {
      const before = Number((await sql().execute('select count(*)::int as n from emails where organization_id = ?', [t.orgId]))[0].n);
      const two = await t.call('POST', '/api/v1/emails', {
        body: { from: `a@${bulk.name}`, to: [rcpt('a'), rcpt('b')], subject: 's', html: '<p>x</p>', track: { opens: true } },
      });
      assert.equal(two.status, 422);
      assert.equal(two.body.error.code, 'validation_error');
      assert.match(two.body.error.message, /one recipient/);
      const noHost = await t.call('POST', '/api/v1/emails', {
        body: { from: `a@${t.domain}`, to: rcpt('c'), subject: 's', html: '<p>x</p>', track: { clicks: true } },
      });
      assert.equal(noHost.status, 422);
      assert.equal(noHost.body.error.code, 'validation_error');
      assert.match(noHost.body.error.message, /tracking host/);
      const unknownTopic = await sendBulk(rcpt('d'), { topic: 'no-such-topic' });
      assert.equal(unknownTopic.body.error?.code, 'unknown_topic');
      const topicOnReceipt = await t.call('POST', '/api/v1/emails', {
        body: { from: `a@${t.domain}`, to: rcpt('e'), subject: 's', text: 'x', topic: 'whatever' },
      });
      assert.equal(topicOnReceipt.body.error?.code, 'validation_error');
      const badShape = await sendBulk(rcpt('f'), { track: { opens: 'yes' } });
      assert.equal(badShape.status, 422);
      const after = Number((await sql().execute('select count(*)::int as n from emails where organization_id = ?', [t.orgId]))[0].n);
      assert.equal(after, before);
    });

    it('records each pixel fetch and each click (302 to the original URL), flags bots, 404s tampered tokens', async () => {
      const to = rcpt('tracked');
      const sent = await sendBulk(to, { track: { opens: true, clicks: true } });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const html = String((await received(to)).parsed.html);
      const pixel = new RegExp(`<img src="(https://${trackingHost().replace(/\./g, '\\.')}/t/o/[^"]+)"`).exec(html)?.[1];
      const click = new RegExp(`href="(https://${trackingHost().replace(/\./g, '\\.')}/t/c/[^"]+)"`).exec(html)?.[1];
      assert.ok(pixel && click, html);
      assert.ok(!html.includes('shop.example'), 'the link itself is rewritten');
      assert.ok(html.includes(`/u/`), 'the unsubscribe link stays direct');

      const browser = { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko)' };
      const open = await fetch(local(pixel), { headers: browser });
      assert.equal(open.status, 200);
      assert.equal(open.headers.get('content-type'), 'image/gif');
      const go = await fetch(local(click), { headers: browser, redirect: 'manual' });
      assert.equal(go.status, 302);
      assert.equal(go.headers.get('location'), 'https://shop.example/a?x=1&y=2');
      const scan = await fetch(local(click), {
        headers: { 'user-agent': 'Googlebot/2.1 (+http://www.google.com/bot.html)' },
        redirect: 'manual',
      });
      assert.equal(scan.status, 302);

      const events = await waitFor(async () => {
        const all = await emailEvents(sent.body.id);
        return all.filter((e) => e.type === 'clicked').length === 2 ? all : undefined;
      }, 'the events');
      const opened = events.filter((e) => e.type === 'opened');
      assert.equal(opened.length, 1, 'one fetch, one open');
      assert.equal(opened[0].detail ?? null, null);
      const clicks = events.filter((e) => e.type === 'clicked');
      assert.deepEqual(
        clicks.map((e) => [e.url, e.detail ?? null]),
        [
          ['https://shop.example/a?x=1&y=2', null],
          ['https://shop.example/a?x=1&y=2', 'machine'],
        ],
      );

      // A token altered to point elsewhere is no redirect at all.
      const token = new URL(click).pathname.split('/')[3];
      const bytes = Buffer.from(token, 'base64url');
      const evil = Buffer.concat([bytes.subarray(0, 17), Buffer.from('https://evil.example/'), bytes.subarray(bytes.length - 16)]);
      for (const bad of [evil.toString('base64url'), token.slice(0, -1), 'x']) {
        const res = await fetch(`${env.url}/t/c/${bad}`, { redirect: 'manual' });
        assert.equal(res.status, 404);
        assert.equal(res.headers.get('location'), null);
        assert.equal((await fetch(`${env.url}/t/o/${bad}`)).status, 404);
      }
      assert.equal((await emailEvents(sent.body.id)).filter((e) => e.type === 'clicked').length, 2, 'nothing recorded');
    });
  });
});
