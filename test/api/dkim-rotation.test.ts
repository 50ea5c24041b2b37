import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { waitFor } from '../support/wait';

interface RecordView {
  purpose: string;
  type: string;
  name: string;
  value: string;
}

/**
 * DKIM rotation end to end on the shared service (embedded engine): started from the console, the
 * new record published in the test DNS server, the DkimRotation workflow switching after its
 * checks and revoking after the retiring period (seconds here: test/support/service.ts), and mail
 * signed in each phase verified by mailauth against that DNS server.
 */
describe('DKIM rotation through the console, the workflow and signed mail', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let admin: OperatorLogin;
  let p: FlatConsoleClient;
  let c: FlatConsoleClient;
  let domain: { id: string; name: string; dkim_selector: string; records: RecordView[] };
  let page: string;
  const resolver = new Resolver();
  const verify = async (raw: Buffer) =>
    (await dkimVerify(raw, { resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') as Promise<never> })).results[0];
  const sql = (q: string, v: unknown[]) => env.service.db.orm.em.fork().getConnection().execute(q, v);
  const keyRow = (state: string) => new RegExp(`<tr class="dkim-${state}">[\\s\\S]*?</tr>`).exec(page)?.[0];

  async function send(subject: string) {
    const to = `rot-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`;
    const res = await t.call('POST', '/api/v1/emails', { body: { from: `Shop <shop@${domain.name}>`, to, subject, text: subject } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), `the message ${subject}`)).raw;
  }

  before(async () => {
    env = await sharedService();
    resolver.setServers([`127.0.0.1:${env.dns.port}`]);
    t = await newTenant(env);
    platform = await newOperator(env, null);
    admin = await newOperator(env, t.orgId);
    p = new FlatConsoleClient(env.url);
    c = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    const created = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `rot-${Date.now()}.example.test` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    domain = created.body;
    for (const r of domain.records) {
      if (r.type === 'MX') env.dns.mx.set(r.name, [{ priority: 10, exchange: r.value.split(' ')[1] }]);
      else env.dns.txt.set(r.name, [r.value]);
    }
    assert.equal((await t.call('POST', `/api/v1/domains/${domain.id}/verify`, { as: 'admin' })).body.status, 'verified');
  });

  it('an organization admin starts and cancels a rotation: the pending key is revoked, signing never changed', async () => {
    const base = `/console/o/${t.orgId}/domains/${domain.id}`;
    const started = await c.post(`${base}/dkim/rotate`);
    assert.equal(started.status, 303);
    page = (await c.get(`${base}?done=dkim_rotation_started`)).html;
    const pending = keyRow('pending');
    assert.ok(pending, 'the pending key is listed');
    const keyId = /name="key_id" value="([^"]+)"/.exec(page)![1];
    // A second rotation while one is in progress is refused, and writes nothing.
    assert.equal((await p.post(`${base}/dkim/rotate`)).status, 409);
    assert.equal((await c.post(`${base}/dkim/cancel`, { key_id: keyId })).status, 303);
    assert.equal((await c.post(`${base}/dkim/cancel`, { key_id: keyId })).status, 409, 'a second cancel is refused');
    const [row] = await sql(`select state, private_key_enc from dkim_keys where id = ?`, [keyId]);
    assert.deepEqual(row, { state: 'revoked', private_key_enc: null });
    // The run ends at its next check, finding the key revoked, without a switch (embedded engine).
    await waitFor(async () => {
      const [wf] = await sql(`select status from dbos.workflow_status where workflow_uuid = ?`, [`dkim-rotation:${domain.id}:${keyId}`]);
      return wf?.status === 'SUCCESS';
    }, 'the canceled run to end');
    const sig = await verify(await send('During a canceled rotation'));
    assert.deepEqual([sig.selector, sig.status.result], [domain.dkim_selector, 'pass']);
    const audit = await sql(`select action, actor from audit_log where target_id = ? and action like 'domain.dkim%' order by id`, [
      domain.id,
    ]);
    assert.deepEqual(audit, [
      { action: 'domain.dkim_rotation_started', actor: `console:${admin.email}` },
      { action: 'domain.dkim_rotation_canceled', actor: `console:${admin.email}` },
    ]);
  });

  it('a platform operator rotates: the switch waits for DNS, mail of each phase verifies, the old key is revoked', async () => {
    const base = `/console/o/${t.orgId}/domains/${domain.id}`;
    const old = domain.dkim_selector;
    assert.equal((await p.post(`${base}/dkim/rotate`)).status, 303);
    page = (await p.get(base)).html;
    const pending = keyRow('pending')!;
    const [, name, value] = /([\w.-]+\._domainkey\.[\w.-]+) TXT (v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+)/.exec(pending)!;
    const selector = name.split('.')[0];
    assert.match(pending, /Signing switches to this key after 3 consecutive matching checks/);

    // Checked, not switched, while the record is absent: mail still signs with the old key.
    await waitFor(async () => {
      const [k] = await sql(`select state, last_checked_at from dkim_keys where selector = ? and domain_id = ?`, [selector, domain.id]);
      return k.last_checked_at !== null && k.state === 'pending';
    }, 'a check of the unpublished record');
    const during = await send('During the rotation');
    assert.deepEqual([(await verify(during)).selector, (await verify(during)).status.result], [old, 'pass']);

    env.dns.txt.set(name, [value]);
    await waitFor(
      async () =>
        (await sql(`select state from dkim_keys where selector = ? and domain_id = ?`, [selector, domain.id]))[0].state === 'active',
      'the switch to the new key',
      60_000,
    );
    const after = await send('After the switch');
    const sig = await verify(after);
    assert.deepEqual([sig.selector, sig.signingDomain, sig.status.result], [selector, domain.name, 'pass']);
    // Mail signed before the switch still verifies: the old record stays published while it retires.
    assert.equal((await verify(during)).status.result, 'pass');

    await waitFor(
      async () => (await sql(`select state from dkim_keys where selector = ? and domain_id = ?`, [old, domain.id]))[0].state === 'revoked',
      'the old key revoked after its retiring period',
      60_000,
    );
    page = (await p.get(base)).html;
    const revoked = new RegExp(`<tr class="dkim-revoked"><td class="mono">${old}</td>[\\s\\S]*?</tr>`).exec(page)?.[0];
    assert.match(
      revoked!,
      /Private key deleted\. Publish\s+<span class="mono">v=DKIM1; k=rsa; p=<\/span>/,
      'the page says to publish an empty key',
    );
    assert.ok(revoked?.includes(`${old}._domainkey.${domain.name} TXT v=DKIM1; k=rsa; p=`), 'the record to publish, with its empty key');
    const [k] = await sql(`select private_key_enc from dkim_keys where selector = ? and domain_id = ?`, [old, domain.id]);
    assert.equal(k.private_key_enc, null);

    // The operator publishes the empty key: old signatures stop verifying, new ones go on.
    env.dns.txt.set(`${old}._domainkey.${domain.name}`, ['v=DKIM1; k=rsa; p=']);
    assert.notEqual((await verify(during)).status.result, 'pass');
    assert.equal((await verify(await send('After the revocation'))).status.result, 'pass');

    const audit = await sql(`select action, actor from audit_log where target_id = ? and action like 'domain.dkim%' order by id`, [
      domain.id,
    ]);
    assert.deepEqual(audit.slice(2), [
      { action: 'domain.dkim_rotation_started', actor: `console:${platform.email}` },
      { action: 'domain.dkim_rotation_switched', actor: null },
      { action: 'domain.dkim_rotation_revoked', actor: null },
    ]);
    // Not an internal organization with a Cloudflare token: the rotation published nothing.
    assert.deepEqual(await sql(`select action from audit_log where target_id = ? and action = 'domain.dns_published'`, [domain.id]), []);
  });
});
