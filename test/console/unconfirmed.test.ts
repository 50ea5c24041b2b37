import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';

/** The Unconfirmed page: old `sent` mail listed, several closed at once as `svc email unconfirmed --close` closes them, audited. */
describe('console: unconfirmed messages', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let platform: OperatorLogin;
  let c: ConsoleClient;
  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);

  /** A message accepted by the API (scheduled, so no worker takes it), then moved to `sent` `hoursAgo` hours ago. */
  async function sentMessage(tenant: Tenant, subject: string, hoursAgo: number): Promise<string> {
    const r = await tenant.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${tenant.domain}`,
        to: 'quiet@example.com',
        subject,
        text: 'x',
        scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
      },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await sql(
      `update emails set status = 'sent', sent_at = now() - make_interval(hours => ?), enqueued_at = coalesce(enqueued_at, now()) where id = ?`,
      [hoursAgo, r.body.id],
    );
    return r.body.id;
  }
  const statusOf = async (id: string) => (await t.call('GET', `/api/v1/emails/${id}`, { as: 'admin' })).body.last_event;
  const closes = async (tenant: Tenant) =>
    (await tenant.call('GET', '/api/v1/audit-log?action=email.closed_unconfirmed', { as: 'admin' })).body.data as any[];

  before(async function () {
    env = await sharedService();
    [t, other, platform] = await Promise.all([newTenant(env), newTenant(env), newOperator(env, null)]);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(platform.email, platform.password)).status, 303);
  });

  it('lists old `sent` mail with checkboxes, closes the three selected at once, leaves the rest, and audits the operator', async () => {
    const chosen = [
      await sentMessage(t, 'Old <b>one</b>', 100),
      await sentMessage(t, 'Old two', 90),
      await sentMessage(t, 'Old three', 80),
    ];
    const fourth = await sentMessage(t, 'Old four', 85);
    const fresh = await sentMessage(t, 'Fresh', 5);
    const theirs = await sentMessage(other, 'Another organization', 100);

    const page = await c.get(`/console/unconfirmed?hours=72&org=${t.orgId}`);
    assert.equal(page.status, 200);
    assert.match(page.html, /data-select-all="ids"/);
    for (const id of [...chosen, fourth]) assert.ok(page.html.includes(`name="ids" value="${id}"`), `${id} listed`);
    assert.ok(!page.html.includes(fresh), 'newer than the cutoff: not listed');
    assert.ok(!page.html.includes(theirs), 'another organization: filtered out');
    assert.ok(page.html.includes('Old &lt;b&gt;one&lt;/b&gt;'), 'the subject is escaped');
    assert.match(page.html, /<strong>4<\/strong> messages/);
    const everyone = await c.get('/console/unconfirmed');
    assert.ok(everyone.html.includes(theirs), 'no filter: every organization');

    // The fresh message is selected too: too new for the cutoff, it stays `sent`.
    const res = await c.post('/console/unconfirmed', { hours: '72', org: t.orgId, ids: [...chosen, fresh] });
    assert.equal(res.status, 303, res.html);
    assert.equal(res.location, `/console/unconfirmed?hours=72&org=${t.orgId}&done=unconfirmed_closed`);
    for (const id of chosen) assert.equal(await statusOf(id), 'unconfirmed');
    assert.equal(await statusOf(fourth), 'sent', 'not selected: stays sent');
    assert.equal(await statusOf(fresh), 'sent');
    assert.equal((await other.call('GET', `/api/v1/emails/${theirs}`, { as: 'admin' })).body.last_event, 'sent');

    const after = await c.get(res.location!);
    assert.match(after.html, /closed as unconfirmed/);
    assert.ok(after.html.includes(fourth) && !after.html.includes(chosen[0]));

    const [entry] = await closes(t);
    assert.equal(entry.actor, `console:${platform.email}`);
    assert.equal(entry.key_id, null);
    assert.deepEqual(entry.details.email_ids, [...chosen].sort());
    assert.equal(entry.details.count, 3);
  });

  it('refuses an empty selection or a bad number of hours with the reason, and closes nothing', async () => {
    const waiting = await sentMessage(t, 'Still waiting', 100);
    const before = (await closes(t)).length;
    const none = await c.post('/console/unconfirmed', { hours: '72', org: t.orgId });
    assert.equal(none.status, 422);
    assert.match(none.html, /Select at least one message to close/);
    const badHours = await c.post('/console/unconfirmed', { hours: '0', org: t.orgId, ids: [waiting] });
    assert.equal(badHours.status, 422);
    assert.match(badHours.html, /Hours is a whole number/);
    const badId = await c.post('/console/unconfirmed', { hours: '72', ids: ['not-an-id'] });
    assert.equal(badId.status, 422);
    const noToken = await c.post('/console/unconfirmed', { _csrf: null, hours: '72', ids: [waiting] });
    assert.equal(noToken.status, 403);
    assert.equal(await statusOf(waiting), 'sent');
    assert.equal((await closes(t)).length, before);
  });

  it('is for platform operators: an organization admin gets 403 and closes nothing', async () => {
    const waiting = await sentMessage(t, 'Not theirs to close', 100);
    const admin = await newOperator(env, t.orgId);
    const a = new ConsoleClient(env.url);
    assert.equal((await a.signIn(admin.email, admin.password)).status, 303);
    const page = await a.get('/console/unconfirmed');
    assert.equal(page.status, 403);
    assert.ok(!page.html.includes('Not theirs to close'));
    const post = await a.post('/console/unconfirmed', { hours: '72', ids: [waiting] });
    assert.equal(post.status, 403);
    assert.equal(await statusOf(waiting), 'sent');
  });
});
