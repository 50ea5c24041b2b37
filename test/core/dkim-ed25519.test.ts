import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { createDomain, createOrganization } from '../../core/provisioning';
import { platformDns } from '../../core/domains/identity';
import { createDnsResolver } from '../../core/domains/dns';
import { createSecrets } from '../../core/secrets';
import { systemClock } from '../../core/clock';
import { dkimRecordName, dkimRecordValue, domainDkimKeys, DkimRotationRefused, startDkimRotation } from '../../core/domains/dkim-keys';
import { createDkimRotationActivities } from '../../activities/dkim-rotation';
import { loadSenderIdentities } from '../../activities/sender-identity';
import { newDatabase } from '../support/pg';
import { TestDns } from '../support/dns';

/**
 * The Ed25519 key of a rotation (RFC 8463, issue 41) at the level of its steps: two pending keys
 * linked by `companion_of`, one rotation at a time still, checks that match only when both
 * records resolve (with the longer TTL), the pair switched and abandoned together.
 */
describe('DKIM keys: an Ed25519 key signed alongside the RSA key', function () {
  this.timeout(120_000);
  let orm: Orm;
  const dns = new TestDns();
  const secrets = createSecrets(randomBytes(32));
  let activities: ReturnType<typeof createDkimRotationActivities>;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_dkim_ed25519'));
    await migrate(orm);
    activities = createDkimRotationActivities({
      orm,
      dns: createDnsResolver([await dns.start()]),
      clock: systemClock,
      log: pino({ level: 'silent' }),
    });
  });
  after(async () => {
    await orm.close();
    await dns.stop();
  });

  async function newSignedDomain() {
    const org = await createOrganization(orm, `o-${randomBytes(3).toString('hex')}`);
    const name = `e${randomBytes(4).toString('hex')}.example.test`;
    const d = await createDomain(orm, org.id, name, { verified: true, identity: { secrets, platform: platformDns('mail.svc.test') } });
    return { id: d.id, organizationId: org.id, name, selector: d.dkimSelector! };
  }

  it('starts a pair, refuses a second rotation, checks both records, and switches both', async () => {
    const d = await newSignedDomain();
    const starts = await Promise.allSettled([
      startDkimRotation(orm, secrets, d, 'console:a@example.com', undefined, { ed25519: true }),
      startDkimRotation(orm, secrets, d, 'console:b@example.com'),
      startDkimRotation(orm, secrets, d, 'console:c@example.com', undefined, { ed25519: true }),
    ]);
    const won = starts.filter((s) => s.status === 'fulfilled');
    assert.equal(won.length, 1, 'exactly one start wins');
    for (const s of starts) if (s.status === 'rejected') assert.ok(s.reason instanceof DkimRotationRefused);
    // Whichever won, a pair is what this test needs: cancel-free, start one when an RSA-only start won.
    let started = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof startDkimRotation>>>).value;
    if (!started.ed25519) {
      await activities.abandonDkimKey(started.keyId);
      started = await startDkimRotation(orm, secrets, d, 'console:a@example.com', undefined, { ed25519: true });
    }
    const ed = started.ed25519!;
    assert.match(ed.selector, /^svc\d{8}e[0-9a-f]{6}$/);
    assert.equal(Buffer.from(ed.publicKey, 'base64').length, 32);
    const keys = await domainDkimKeys(orm, d.id);
    const edRow = keys.find((k) => k.id === ed.keyId)!;
    assert.deepEqual([edRow.algorithm, edRow.state, edRow.companion_of], ['ed25519', 'pending', started.keyId]);

    const rsaName = dkimRecordName(started.selector, d.name);
    const edName = dkimRecordName(ed.selector, d.name);
    dns.txt.set(rsaName, [dkimRecordValue(started.publicKey)]);
    dns.txtTtl.set(rsaName, 300);
    assert.deepEqual(await activities.checkDkimKey(started.keyId), { state: 'pending', matches: false, ttlSeconds: null });
    // The Ed25519 key's `p=` under `k=rsa` is not its record.
    dns.txt.set(edName, [dkimRecordValue(ed.publicKey, 'rsa')]);
    assert.equal((await activities.checkDkimKey(started.keyId)).matches, false);
    dns.txt.set(edName, [dkimRecordValue(ed.publicKey, 'ed25519')]);
    dns.txtTtl.set(edName, 900);
    assert.deepEqual(await activities.checkDkimKey(started.keyId), { state: 'pending', matches: true, ttlSeconds: 900 });
    assert.equal((await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!.dkim?.ed25519, undefined, 'no signing before the switch');

    const oldId = keys.find((k) => k.state === 'active')!.id;
    assert.deepEqual(await activities.switchDkimKey(started.keyId, 60_000), { switched: true, retiringKeyIds: [oldId] });
    const signing = (await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!.dkim!;
    assert.equal(signing.keySelector, started.selector);
    assert.equal(signing.ed25519?.keySelector, ed.selector);
    assert.match(signing.ed25519!.privateKey, /BEGIN PRIVATE KEY/);

    // A later RSA-only rotation retires the Ed25519 key with the RSA one.
    await activities.revokeDkimKeys(d.id, [oldId]);
    const next = await startDkimRotation(orm, secrets, d, 'console:a@example.com');
    dns.txt.set(dkimRecordName(next.selector, d.name), [dkimRecordValue(next.publicKey)]);
    const retired = await activities.switchDkimKey(next.keyId, 60_000);
    assert.deepEqual(retired.retiringKeyIds.sort(), [started.keyId, ed.keyId].sort());
    assert.equal((await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!.dkim?.ed25519, undefined);
  });

  it('a rotation that gives up revokes both pending keys', async () => {
    const d = await newSignedDomain();
    const started = await startDkimRotation(orm, secrets, d, 'console:a@example.com', undefined, { ed25519: true });
    await activities.abandonDkimKey(started.keyId);
    const states = (await domainDkimKeys(orm, d.id)).filter((k) => k.selector !== d.selector).map((k) => k.state);
    assert.deepEqual(states, ['revoked', 'revoked']);
    assert.deepEqual(await activities.checkDkimKey(started.keyId), { state: 'gone', matches: false });
  });
});
