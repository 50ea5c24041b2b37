import assert from 'node:assert/strict';
import type { StsPolicy } from '../../core/delivery/mta-sts';
import { DirectRig } from '../support/direct-rig';
import { directMessage, FakePolicies, type MxPeer, type PeerTls } from '../support/mx-peer';
import { TestCa, type Issued } from '../support/test-ca';

/**
 * Direct delivery's TLS (issue 40, RFC 8461 as a sender, RFC 3207): MTA-STS enforce delivers only
 * over a verified certificate to a host the policy names and defers otherwise (after re-reading
 * the policy once); testing delivers and counts the failure; without a policy STARTTLS is
 * opportunistic, with one plaintext retry when the handshake breaks. Peers on 127.0.43.x with
 * certificates from a test CA the mailer is given as an extra root.
 */
describe('Direct mailer: MTA-STS and STARTTLS', () => {
  const rig = new DirectRig();
  const { dns } = rig;
  let ca: TestCa;
  let trusted: Issued;
  let untrusted: Issued;
  let policies: FakePolicies;

  const enforce = (mx: string[]): StsPolicy => ({ id: 'p1', mode: 'enforce', mx, maxAgeSeconds: 86400 });
  const testing = (mx: string[]): StsPolicy => ({ id: 'p1', mode: 'testing', mx, maxAgeSeconds: 86400 });

  before(async () => {
    await rig.start();
    ca = await TestCa.create();
    trusted = await ca.issue(['mx.sts.test']);
    untrusted = await TestCa.untrusted(['mx.sts.test']);
  });
  after(() => rig.stop());
  beforeEach(() => {
    policies = new FakePolicies();
  });
  afterEach(() => rig.reset());

  /** sts.test with its one MX, mx.sts.test, on a peer with this TLS. */
  async function site(tls: PeerTls): Promise<MxPeer> {
    const p = await rig.peer('127.0.43.1', {}, tls);
    dns.mx.set('sts.test', [{ exchange: 'mx.sts.test', priority: 10 }]);
    dns.a.set('mx.sts.test', ['127.0.43.1']);
    return p;
  }

  const direct = () => rig.direct({ policies, ca: [ca.caPem] });

  it('enforce: delivers over TLS with a valid certificate for the MX name, and reports the session as a success', async () => {
    const p = await site(trusted);
    policies.policies.set('sts.test', enforce(['mx.sts.test']));
    const out = await direct().send(directMessage(['ab@sts.test']));
    assert.deepEqual(out.accepted, ['ab@sts.test']);
    assert.equal(p.received[0].secure, true);
    assert.deepEqual(policies.reports, [{ domain: 'sts.test', ok: true }]);
    assert.deepEqual(policies.refreshed, []);
  });

  for (const [what, tls] of [
    ['an untrusted certificate', 'untrusted'],
    ['no STARTTLS', 'none'],
  ] as const) {
    it(`enforce: defers (never bounces) on ${what}, after re-reading the policy once, without plaintext`, async () => {
      const p = await site(tls === 'none' ? 'none' : untrusted);
      policies.policies.set('sts.test', enforce(['mx.sts.test']));
      const out = await direct().send(directMessage(['cd@sts.test']));
      assert.deepEqual(out.accepted, []);
      assert.equal(out.rejected.length, 1);
      assert.equal(out.rejected[0].code, null);
      assert.match(out.rejected[0].response, /MTA-STS/);
      assert.deepEqual(policies.refreshed, ['sts.test']);
      assert.equal(p.received.length, 0);
      assert.ok(policies.reports.length > 0 && policies.reports.every((r) => !r.ok));
    });
  }

  it('enforce: defers when no MX host matches the policy, and delivers if the re-read policy names it', async () => {
    const p = await site(trusted);
    policies.policies.set('sts.test', enforce(['mx.elsewhere.test']));
    const deferred = await direct().send(directMessage(['ef@sts.test']));
    assert.equal(deferred.rejected[0].code, null);
    assert.match(deferred.rejected[0].response, /MTA-STS.*no MX host matches/);
    assert.deepEqual(policies.refreshed, ['sts.test']);
    assert.equal(p.connections, 0);

    policies.onRefresh.set('sts.test', enforce(['*.sts.test']));
    const delivered = await rig.mailer!.send(directMessage(['gh@sts.test']));
    assert.deepEqual(delivered.accepted, ['gh@sts.test']);
    assert.deepEqual(policies.refreshed, ['sts.test', 'sts.test']);
    assert.equal(p.received[0].secure, true);
  });

  it('testing: delivers despite an untrusted certificate and reports the failure', async () => {
    const p = await site(untrusted);
    policies.policies.set('sts.test', testing(['mx.sts.test']));
    const out = await direct().send(directMessage(['ij@sts.test']));
    assert.deepEqual(out.accepted, ['ij@sts.test']);
    assert.equal(p.received[0].secure, true);
    assert.deepEqual(policies.reports, [{ domain: 'sts.test', ok: false }]);
    assert.deepEqual(policies.refreshed, []);
  });

  it('no policy: opportunistic STARTTLS accepts any certificate, and nothing is reported', async () => {
    const p = await site(untrusted);
    const out = await direct().send(directMessage(['kl@sts.test']));
    assert.deepEqual(out.accepted, ['kl@sts.test']);
    assert.equal(p.received[0].secure, true);
    assert.deepEqual(policies.reports, []);
  });

  it('no policy: retries in plaintext when the STARTTLS handshake fails', async () => {
    const p = await site({ broken: trusted });
    const out = await direct().send(directMessage(['mn@sts.test']));
    assert.deepEqual(out, { accepted: ['mn@sts.test'], rejected: [] });
    assert.equal(p.received.length, 1);
    assert.equal(p.received[0].secure, false);
    assert.equal(p.connections, 2);
  });

  it('no policy: delivers in plaintext to an MX without STARTTLS', async () => {
    const p = await site('none');
    const out = await direct().send(directMessage(['op@sts.test']));
    assert.deepEqual(out.accepted, ['op@sts.test']);
    assert.equal(p.received[0].secure, false);
  });
});
