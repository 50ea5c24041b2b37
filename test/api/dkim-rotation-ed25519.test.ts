import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { waitFor } from '../support/wait';

interface Signature {
  selector: string;
  algo: string;
  signingDomain: string;
  status: { result: string };
}

/**
 * An Ed25519 key signed alongside the RSA one (RFC 8463; issue 41) on the shared service
 * (embedded engine, the relay path to the sink): asked for with the start-rotation form's checkbox,
 * switched only once both records resolve in the test DNS server, then every message carries both
 * signatures, each verified by mailauth against that server; a later RSA-only rotation retires the
 * Ed25519 key, and mail is signed with RSA alone again. A cancel revokes both pending keys.
 */
describe('DKIM rotation with an Ed25519 key signed alongside (RFC 8463)', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let p: FlatConsoleClient;
  let domain: { id: string; name: string; dkim_selector: string; records: { type: string; name: string; value: string }[] };
  let base: string;
  const resolver = new Resolver();
  const signatures = async (raw: Buffer): Promise<Signature[]> =>
    (await dkimVerify(raw, { resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') as Promise<never> }))
      .results as unknown as Signature[];
  const summary = (sigs: Signature[]) => sigs.map((s) => `${s.algo} ${s.selector} ${s.status.result}`).sort();
  const sql = (q: string, v: unknown[]) => env.service.db.orm.em.fork().getConnection().execute(q, v);
  const keys = async () =>
    (await sql(`select selector, algorithm, state, companion_of from dkim_keys where domain_id = ? order by created_at, algorithm desc`, [
      domain.id,
    ])) as { selector: string; algorithm: string; state: string; companion_of: string | null }[];
  const stateOf = async (selector: string) => (await keys()).find((k) => k.selector === selector)?.state;

  async function send(subject: string) {
    const to = `ed-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`;
    const res = await t.call('POST', '/api/v1/emails', { body: { from: `Shop <shop@${domain.name}>`, to, subject, text: subject } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), `the message ${subject}`)).raw;
  }

  /** The pending keys' records as the page shows them: `[name, value]` by algorithm. */
  async function pendingRecords(): Promise<Record<string, [string, string]>> {
    const page = (await p.get(base)).html;
    const out: Record<string, [string, string]> = {};
    for (const row of page.match(/<tr class="dkim-pending">[\s\S]*?<\/tr>/g) ?? []) {
      const [, name, value, k] = /([\w.-]+\._domainkey\.[\w.-]+) TXT (v=DKIM1; k=(rsa|ed25519); p=[A-Za-z0-9+/=]+)/.exec(row)!;
      out[k] = [name, value];
    }
    return out;
  }

  before(async () => {
    env = await sharedService();
    resolver.setServers([`127.0.0.1:${env.dns.port}`]);
    t = await newTenant(env);
    platform = await newOperator(env, null);
    p = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    const created = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `ed-${Date.now()}.example.test` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    domain = created.body;
    base = `/console/o/${t.orgId}/domains/${domain.id}`;
    for (const r of domain.records) {
      if (r.type === 'MX') env.dns.mx.set(r.name, [{ priority: 10, exchange: r.value.split(' ')[1] }]);
      else env.dns.txt.set(r.name, [r.value]);
    }
    assert.equal((await t.call('POST', `/api/v1/domains/${domain.id}/verify`, { as: 'admin' })).body.status, 'verified');
  });

  it('the form offers Ed25519; a cancel revokes both pending keys and signing stays RSA', async () => {
    const page = (await p.get(base)).html;
    assert.match(page, /<input type="checkbox" name="ed25519" value="1"\s*\/> Also sign with Ed25519 \(RFC 8463\)/);
    assert.equal((await p.post(`${base}/dkim/rotate`, { ed25519: '1' })).status, 303);
    const pending = await pendingRecords();
    assert.deepEqual(Object.keys(pending).sort(), ['ed25519', 'rsa']);
    // The raw 32-byte public key (RFC 8463 §4.2), under a selector of its own.
    assert.equal(Buffer.from(pending.ed25519[1].split('p=')[1], 'base64').length, 32);
    assert.notEqual(pending.ed25519[0], pending.rsa[0]);
    const listed = (await p.get(base)).html;
    const keyId = /name="key_id" value="([^"]+)"/.exec(listed)![1];
    const [rsaRow] = await sql(`select algorithm from dkim_keys where id = ?`, [keyId]);
    assert.equal(rsaRow.algorithm, 'rsa', 'the cancel names the RSA key, which the workflow runs on');
    assert.equal((await p.post(`${base}/dkim/cancel`, { key_id: keyId })).status, 303);
    assert.deepEqual(
      (await keys()).filter((k) => k.state !== 'active').map((k) => [k.algorithm, k.state]),
      [
        ['rsa', 'revoked'],
        ['ed25519', 'revoked'],
      ],
    );
    assert.deepEqual(summary(await signatures(await send('After a canceled Ed25519 rotation'))), [
      `rsa-sha256 ${domain.dkim_selector} pass`,
    ]);
  });

  it('switches only when both records resolve; then mail carries an RSA and an Ed25519 signature, both verifying', async () => {
    assert.equal((await p.post(`${base}/dkim/rotate`, { ed25519: '1' })).status, 303);
    const pending = await pendingRecords();
    const [rsaSel, edSel] = [pending.rsa[0].split('.')[0], pending.ed25519[0].split('.')[0]];
    // The RSA record alone: checked well past the spread and the required checks, never switched.
    env.dns.txt.set(pending.rsa[0], [pending.rsa[1]]);
    const [rsaKey] = await sql(`select id from dkim_keys where domain_id = ? and selector = ?`, [domain.id, rsaSel]);
    const firstCheck = await waitFor(async () => {
      const [k] = await sql(`select last_checked_at from dkim_keys where id = ?`, [rsaKey.id]);
      return k.last_checked_at as Date | null;
    }, 'a check with the RSA record published');
    await waitFor(async () => {
      const [k] = await sql(`select last_checked_at from dkim_keys where id = ?`, [rsaKey.id]);
      return new Date(k.last_checked_at).getTime() - new Date(firstCheck).getTime() > 2000;
    }, 'checks spread over more than the minimum spread');
    assert.deepEqual([await stateOf(rsaSel), await stateOf(edSel)], ['pending', 'pending']);
    const during = await send('While only the RSA record resolves');
    assert.deepEqual(summary(await signatures(during)), [`rsa-sha256 ${domain.dkim_selector} pass`]);

    env.dns.txt.set(pending.ed25519[0], [pending.ed25519[1]]);
    await waitFor(async () => (await stateOf(rsaSel)) === 'active', 'the switch of the pair', 60_000);
    assert.equal(await stateOf(edSel), 'active');
    assert.equal(await stateOf(domain.dkim_selector), 'retiring');
    const after = await signatures(await send('After the switch to RSA and Ed25519'));
    assert.deepEqual(summary(after), [`ed25519-sha256 ${edSel} pass`, `rsa-sha256 ${rsaSel} pass`]);
    assert.ok(after.every((s) => s.signingDomain === domain.name));
    const page = (await p.get(base)).html;
    assert.match(page, /Signs all mail from this domain alongside the RSA key/);
    const [switched] = await sql(`select details from audit_log where target_id = ? and action = 'domain.dkim_rotation_switched'`, [
      domain.id,
    ]);
    assert.deepEqual(switched.details.ed25519_selectors, [edSel]);
    await waitFor(async () => (await stateOf(domain.dkim_selector)) === 'revoked', 'the old RSA key revoked', 60_000);
    // A new rotation may start now; its form keeps Ed25519 unless the operator unchecks it.
    assert.match((await p.get(base)).html, /name="ed25519" value="1" checked/);
  });

  it('a later RSA-only rotation retires the Ed25519 key: mail is signed with RSA alone', async () => {
    const [rsaActive, edActive] = ['rsa', 'ed25519'].map((a) => keysNow.find((k) => k.algorithm === a && k.state === 'active')!.selector);
    assert.equal((await p.post(`${base}/dkim/rotate`)).status, 303);
    const pending = await pendingRecords();
    assert.deepEqual(Object.keys(pending), ['rsa']);
    const rsaSel = pending.rsa[0].split('.')[0];
    env.dns.txt.set(pending.rsa[0], [pending.rsa[1]]);
    await waitFor(async () => (await stateOf(rsaSel)) === 'active', 'the switch to the RSA key', 60_000);
    assert.deepEqual([await stateOf(rsaActive), await stateOf(edActive)], ['retiring', 'retiring']);
    assert.deepEqual(summary(await signatures(await send('After the RSA-only rotation'))), [`rsa-sha256 ${rsaSel} pass`]);
    // Both old keys are revoked at the end of the retiring period.
    await waitFor(
      async () => (await stateOf(rsaActive)) === 'revoked' && (await stateOf(edActive)) === 'revoked',
      'both old keys revoked',
      60_000,
    );
    const page = (await p.get(base)).html;
    assert.ok(page.includes(`${edActive}._domainkey.${domain.name} TXT v=DKIM1; k=ed25519; p=`), 'the empty Ed25519 key to publish');
  });

  let keysNow: Awaited<ReturnType<typeof keys>> = [];
  beforeEach(async function () {
    if (domain) keysNow = await keys();
  });
});
