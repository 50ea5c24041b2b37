import assert from 'node:assert/strict';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { dkimRecordValue, newEd25519Key, newRsaKey } from '../../core/domains/dkim-keys';
import { DirectRig } from '../support/direct-rig';
import { directMessage } from '../support/mx-peer';
import type { OutgoingMessage } from '../../activities/mailer';

/**
 * DKIM on direct delivery (issue 41, RFC 8463): a domain with an active Ed25519 key has each
 * message signed twice, rsa-sha256 and ed25519-sha256, on the bytes handed to the MX; a domain
 * with RSA alone keeps nodemailer's single signature. Verified by mailauth against the rig's DNS.
 */
describe('Direct mailer: DKIM signatures, RSA alone or RSA with Ed25519', () => {
  const rig = new DirectRig();
  const rsa = newRsaKey();
  const ed = newEd25519Key();
  before(() => rig.start());
  after(() => rig.stop());
  afterEach(() => rig.reset());

  const verify = async (raw: Buffer) =>
    (
      await dkimVerify(raw, { resolver: (name: string, rr: string) => rig.resolver.resolve(name, rr as 'TXT') as Promise<never> })
    ).results.map((r) => `${(r as unknown as { algo: string }).algo} ${r.selector} ${r.status.result}`);

  async function deliver(dkim: OutgoingMessage['dkim']) {
    const peer = await rig.peer('127.0.41.1');
    rig.dns.mx.set('rcpt.test', [{ exchange: 'mx1.rcpt.test', priority: 10 }]);
    rig.dns.a.set('mx1.rcpt.test', ['127.0.41.1']);
    rig.dns.txt.set('r1._domainkey.sender.test', [dkimRecordValue(rsa.publicKey)]);
    rig.dns.txt.set('e1._domainkey.sender.test', [dkimRecordValue(ed.publicKey, 'ed25519')]);
    const msg = directMessage(['ann@rcpt.test', 'hidden@rcpt.test'], 'bounce+ann@sender.test', {
      bcc: [{ name: null, address: 'hidden@rcpt.test' }],
      headers: { 'List-Unsubscribe': '<https://sender.test/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
      dkim,
    });
    const out = await rig.direct().send(msg);
    assert.deepEqual(out.accepted.sort(), ['ann@rcpt.test', 'hidden@rcpt.test']);
    assert.equal(peer.received[0].from, 'bounce+ann@sender.test', 'the envelope is kept');
    return peer.received[0].raw;
  }

  it('signs with both keys when the domain has an Ed25519 key, never leaking Bcc', async () => {
    const raw = await deliver({
      domainName: 'sender.test',
      keySelector: 'r1',
      privateKey: rsa.privateKeyPem,
      ed25519: { keySelector: 'e1', privateKey: ed.privateKeyPem },
    });
    assert.deepEqual((await verify(raw)).sort(), ['ed25519-sha256 e1 pass', 'rsa-sha256 r1 pass']);
    const head = raw.toString('latin1').split('\r\n\r\n')[0];
    assert.doesNotMatch(head, /^Bcc:/im);
    // Both signatures cover the one-click unsubscribe headers (RFC 8058 §4).
    for (const sig of head.match(/^DKIM-Signature:[\s\S]*?(?=\r\n\S)/gim)!) assert.match(sig.replace(/\s+/g, ''), /List-Unsubscribe-Post/i);
  });

  it('signs once, with nodemailer, when the domain has RSA alone', async () => {
    const raw = await deliver({ domainName: 'sender.test', keySelector: 'r1', privateKey: rsa.privateKeyPem });
    assert.deepEqual(await verify(raw), ['rsa-sha256 r1 pass']);
  });
});
