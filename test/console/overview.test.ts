import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { waitFor } from '../support/wait';

/**
 * The overview: today's sending against the three caps (as GET /organization shows them), mail
 * waiting and why, delivery, bounce and complaint rates of live mail, two inline SVG charts; a
 * platform operator sees every organization, an organization admin only theirs.
 */
describe('console: overview', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let platform: OperatorLogin;
  const name = `Overview <i>org</i> ${Date.now()}`;
  const otherName = `Elsewhere ${Date.now()}`;
  let delivered: string;
  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);

  const send = (tenant: Tenant, to: string, as: 'send' | 'test' = 'send', scheduled = false) =>
    tenant.call('POST', '/api/v1/emails', {
      as,
      body: {
        from: `app@${tenant.domain}`,
        to,
        subject: 'Hello',
        text: 'x',
        ...(scheduled ? { scheduled_at: new Date(Date.now() + 86_400_000).toISOString() } : {}),
      },
    });
  /** A page's markup with runs of white space as one (templates are laid out for reading), none beside tags. */
  const norm = (s: string) => s.replace(/\s+/g, ' ').replace(/> /g, '>').replace(/ </g, '<');
  const email = (tenant: Tenant, id: string) => tenant.call('GET', `/api/v1/emails/${id}`, { as: 'admin' }).then((r) => r.body);

  before(async function () {
    env = await sharedService();
    // The free plan with warm-up: an organization cap (lowered to 1 a day) and a domain stage cap.
    [t, other, platform] = await Promise.all([newTenant(env, { plan: 'free', warmup: true }), newTenant(env), newOperator(env, null)]);
    const patched = await t.call('PATCH', '/api/v1/organization', { as: 'admin', body: { name, daily_send_cap: 1 } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    await other.call('PATCH', '/api/v1/organization', { as: 'admin', body: { name: otherName } });

    // One goes out and takes the day's cap; the second waits behind it; a third is scheduled for tomorrow.
    delivered = (await send(t, 'first@example.com')).body.id;
    await waitFor(async () => ['sent', 'delivered'].includes((await email(t, delivered)).last_event), 'the first message sent');
    const parked = (await send(t, 'second@example.com')).body.id;
    await waitFor(async () => (await email(t, parked)).waiting?.reason === 'organization_daily_cap', 'the second parked');
    await send(t, 'later@example.com', 'send', true);
    // A live message that bounced two hours ago, and a test-mode bounce, which never counts.
    const bounced = (await send(t, 'gone@example.com', 'send', true)).body.id;
    await sql(`update emails set status = 'bounced', sent_at = now() - interval '2 hours', enqueued_at = now() where id = ?`, [bounced]);
    const simulated = (await send(t, 'bounce@example.com', 'test')).body.id;
    await waitFor(async () => (await email(t, simulated)).last_event === 'bounced', 'the test bounce');
  });

  it('shows a platform operator every organization: caps, waiting mail, rates and two charts, escaped and without inline style', async () => {
    const c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(platform.email, platform.password)).status, 303);
    // One process runs every test file against one service: the organizations of other tests are
    // listed too, 25 to a page, so walk the pages to this test's two.
    const pages: string[] = [];
    for (let n = 1; n <= 400; n++) {
      const p = await c.get(`/console/overview?page=${n}`);
      assert.equal(p.status, 200);
      assert.doesNotMatch(p.html, /\sstyle=/, 'no inline style (the policy forbids it)');
      pages.push(norm(p.html));
      if (!p.html.includes('rel="next"')) break;
    }
    const h = pages.find((x) => x.includes(`href="/console/o/${t.orgId}/messages"`));
    assert.ok(h, 'the organization is listed, with a link to its messages');
    assert.ok(h.includes('Overview &lt;i&gt;org&lt;/i&gt;'), 'the name is escaped');
    assert.ok(!pages.some((x) => x.includes('<i>org')), 'never as markup');
    assert.ok(
      pages.some((x) => x.includes(otherName)),
      'every organization',
    );
    // Caps: the organization's 1 of 1 (reached), its domain's warm-up stage, the platform's.
    const row = h.slice(h.indexOf(`href="/console/o/${t.orgId}/messages"`));
    const tr = row.slice(0, row.indexOf('</tr>'));
    assert.match(tr, /1 \/ 1</);
    assert.match(tr, new RegExp(`${t.domain.replace(/\./g, '\\.')}: 1 / 200<span class="muted">\\(stage 1\\)`));
    assert.match(tr, />1<\/a> ?organization daily cap/);
    assert.match(tr, />1<\/a> ?scheduled for later/);
    assert.match(h, /<svg class="chart caps" role="img" aria-label="[^"]*Platform \(all organizations\): \d+ \/ 45,000/);
    assert.match(h, /<title>Today's sending against the daily caps<\/title>/);
    assert.match(h, /<rect class="bar full"/, 'the reached cap is drawn as reached');

    // Rates of live mail: 1 sent in the last hour and delivered (if the relay confirmed it), 1 of 2 bounced in 24 hours.
    const final = (await email(t, delivered)).last_event;
    assert.match(tr, new RegExp(`<td class="num">${final === 'delivered' ? '100\\.0%' : '0\\.0%'}</td>`));
    assert.match(tr, /<td class="num">50\.0% \/ 50\.0%<\/td>/, 'bounced over 24 h / 7 d; the test bounce does not count');
    // The hourly chart is the platform's: other tests' live mail (one process runs them all) counts too.
    const hourly =
      /<svg class="chart hourly" role="img" aria-label="Live messages sent per hour over the last 24 hours: (\d+) sent, \d+ delivered, (\d+) bounced/.exec(
        h,
      );
    assert.ok(hourly, 'the hourly chart');
    assert.ok(Number(hourly[1]) >= 2 && Number(hourly[2]) >= 1, hourly[0]);
    assert.match(h, /<rect class="bounced"[^>]*><title>[0-9:]+ UTC: \d+ bounced<\/title>/);
  });

  it('shows an organization admin their organization only', async () => {
    const admin = await newOperator(env, t.orgId);
    const c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    const page = await c.get('/console/overview');
    assert.equal(page.status, 200);
    assert.ok(page.html.includes('Overview &lt;i&gt;org&lt;/i&gt;'));
    assert.ok(!page.html.includes(otherName), 'nothing of another organization');
    assert.ok(!page.html.includes(other.orgId));
    assert.match(page.html, /Your organization/);

    const theirs = await newOperator(env, other.orgId);
    const o = new ConsoleClient(env.url);
    assert.equal((await o.signIn(theirs.email, theirs.password)).status, 303);
    const seen = await o.get('/console/overview');
    assert.ok(seen.html.includes(otherName));
    assert.ok(!seen.html.includes('Overview &lt;i&gt;org'), 'nor the other way round');
    assert.match(seen.html, /aria-label="Live messages sent per hour over the last 24 hours: 0 sent/);
  });
});
