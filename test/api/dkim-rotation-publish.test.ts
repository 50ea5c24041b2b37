import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator } from '../support/console';
import { MANAGED_COMMENT } from '../../core/dns-publish/rules';
import { waitFor } from '../support/wait';

/**
 * A DKIM rotation of an internal organization with a Cloudflare token attached (issue 41: "Rotation
 * … publish[es] its changes the same way when the zone is connected"): the DkimRotation workflow
 * publishes the pending key itself, switches once DNS (the local Cloudflare-compatible API's zone,
 * served by the test DNS server) answers it, publishes after the switch, and after the revocation
 * the zone holds the old selector's empty key (RFC 6376 §3.6.1). Each publish is audited with no
 * actor (the system). Mail signed in each phase is verified by mailauth against that DNS server.
 */
describe('DKIM rotation publishing its records to a connected Cloudflare zone', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let p: FlatConsoleClient;
  let operator: string;
  let name: string;
  let domainId: string;
  let page: string;
  const resolver = new Resolver();
  const verify = async (raw: Buffer) =>
    (await dkimVerify(raw, { resolver: (n: string, rr: string) => resolver.resolve(n, rr as 'TXT') as Promise<never> })).results[0];
  const sql = (q: string, v: unknown[]) => env.service.db.orm.em.fork().getConnection().execute(q, v);
  const keyState = async (selector: string) =>
    (await sql(`select state from dkim_keys where domain_id = ? and selector = ?`, [domainId, selector]))[0]?.state;
  const zoneTxt = (host: string) => env.cloudflare.records(host).filter((r) => r.type === 'TXT');

  async function send(subject: string) {
    const to = `rotpub-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`;
    const res = await t.call('POST', '/api/v1/emails', { body: { from: `Shop <shop@${name}>`, to, subject, text: subject } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), `the message ${subject}`)).raw;
  }

  before(async () => {
    env = await sharedService();
    resolver.setServers([`127.0.0.1:${env.dns.port}`]);
    t = await newTenant(env);
    const platform = await newOperator(env, null);
    operator = `console:${platform.email}`;
    p = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    name = `rotpub-${Date.now()}.example.test`;
    const made = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    domainId = made.body.id;
    page = `/console/o/${t.orgId}/domains/${domainId}`;
    env.cloudflare.addZone(name);
    const org = `/console/organizations/${t.orgId}`;
    assert.equal((await p.post(`${org}/internal`, { internal: 'yes' })).status, 303);
    assert.equal((await p.post(`${org}/cloudflare`, { token: env.cloudflare.addToken() })).status, 303);
    // The operator's first publish: the domain's records in the zone, so it verifies and sends.
    assert.equal((await p.post(`${page}/dns-publish`)).status, 303);
    assert.equal((await t.call('GET', `/api/v1/domains/${domainId}`, { as: 'admin' })).body.status, 'verified');
  });

  it('publishes the pending key, switches once DNS answers it, and leaves the empty key at the revoked selector', async () => {
    const old = (await t.call('GET', `/api/v1/domains/${domainId}`, { as: 'admin' })).body.dkim_selector as string;
    const oldName = `${old}._domainkey.${name}`;
    const before = await send('Before the rotation');
    assert.deepEqual([(await verify(before)).selector, (await verify(before)).status.result], [old, 'pass']);

    assert.equal((await p.post(`${page}/dkim/rotate`)).status, 303);
    const [key] = await sql(`select id, selector, public_key from dkim_keys where domain_id = ? and state = 'pending'`, [domainId]);
    const selector = key.selector as string;
    const newName = `${selector}._domainkey.${name}`;
    // Nobody copies the record: the workflow's first step writes it into the zone, marked as the service's.
    const shown = (await p.get(page)).html;
    assert.match(shown, /The rotation publishes the TXT record at <span class="mono">[^<]+<\/span> to Cloudflare/);
    await waitFor(async () => (await keyState(selector)) === 'active', 'the switch to the published key', 60_000);
    const [held] = zoneTxt(newName);
    assert.equal(held.content, `v=DKIM1; k=rsa; p=${key.public_key}`);
    assert.equal(held.comment, MANAGED_COMMENT);
    const after = await send('After the switch');
    const sig = await verify(after);
    assert.deepEqual([sig.selector, sig.status.result], [selector, 'pass']);
    assert.equal((await verify(before)).status.result, 'pass', 'the retiring key stays published');

    await waitFor(async () => (await keyState(old)) === 'revoked', 'the old key revoked', 60_000);
    await waitFor(async () => zoneTxt(oldName)[0]?.content === 'v=DKIM1; k=rsa; p=', 'the empty key published at the old selector');
    assert.equal(zoneTxt(oldName).length, 1, 'updated in place, never a second key record');
    assert.deepEqual(env.dns.txt.get(oldName), ['v=DKIM1; k=rsa; p=']);
    assert.notEqual((await verify(before)).status.result, 'pass', 'signatures of the revoked key no longer verify');
    assert.equal((await verify(await send('After the revocation'))).status.result, 'pass');
    assert.deepEqual(
      zoneTxt(newName).map((r) => r.content),
      [held.content],
      'the active key untouched',
    );

    // Every step published by the system: at the start, after the switch, after the revocation.
    const audit = await sql(`select actor, details from audit_log where target_id = ? and action = 'domain.dns_published' order by id`, [
      domainId,
    ]);
    // The operator's publish may be two rows: a second for the MTA-STS records its verification adds.
    const byOperator = audit.findIndex((a) => a.actor !== operator);
    assert.ok(byOperator >= 1, 'the operator published first');
    assert.deepEqual(
      audit.slice(byOperator).map((a) => a.actor),
      [null, null, null],
    );
    const last = audit.at(-1)!.details.records as { purpose: string; name: string; action: string }[];
    assert.deepEqual(
      last.map((r) => `${r.purpose} ${r.name} ${r.action}`).sort(),
      [`dkim ${newName} unchanged`, `dkim_revoked ${oldName} update`].sort(),
      'only the DKIM records, the revoked one rewritten',
    );
    const revokedRow = new RegExp(`<tr class="dkim-revoked"><td class="mono">${old}</td>[\\s\\S]*?</tr>`).exec(
      (await p.get(page)).html,
    )?.[0];
    assert.match(revokedRow!, /The rotation publishes\s+<span class="mono">v=DKIM1; k=rsa; p=<\/span>/);
  });
});
