import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { createDomain, createOrganization } from '../../core/provisioning';
import { platformDns } from '../../core/domains/identity';
import { createDnsResolver } from '../../core/domains/dns';
import { createSecrets } from '../../core/secrets';
import { systemClock } from '../../core/clock';
import {
  cancelDkimRotation,
  dkimRecordName,
  dkimRecordValue,
  DKIM_KEY_MOVES,
  domainDkimKeys,
  DkimRotationRefused,
  dkimRotationInProgress,
  rotationSelector,
  startDkimRotation,
} from '../../core/domains/dkim-keys';
import { createDkimRotationActivities } from '../../activities/dkim-rotation';
import { loadSenderIdentities } from '../../activities/sender-identity';
import { newDatabase } from '../support/pg';
import { TestDns } from '../support/dns';

describe('DKIM keys: the migration, rotation start and cancel, and the rotation steps against real DNS', function () {
  this.timeout(120_000);
  let orm: Orm;
  const dns = new TestDns();
  const secrets = createSecrets(randomBytes(32));
  let activities: ReturnType<typeof createDkimRotationActivities>;
  const sql = (q: string, v: unknown[] = []) => orm.em.fork().getConnection().execute(q, v);

  before(async () => {
    orm = await openOrm(await newDatabase('svc_dkim_keys'));
    const server = await dns.start();
    activities = createDkimRotationActivities({
      orm,
      dns: createDnsResolver([server]),
      clock: systemClock,
      log: pino({ level: 'silent' }),
    });
  });
  after(async () => {
    await orm.close();
    await dns.stop();
  });

  it('the migration moves each domain key on its row into dkim_keys as active; keyless domains get none', async () => {
    await orm.getMigrator().up({ to: 'Migration20261211000000_direct_delivery' });
    const org = uuidv7();
    const [signed, unsigned] = [uuidv7(), uuidv7()];
    await sql(`insert into organizations (id, name) values (?, 'old')`, [org]);
    await sql(
      `insert into domains (id, organization_id, name, dkim_selector, dkim_public_key, dkim_private_key_enc, records)
       values (?, ?, 'old.example.test', 'svc202601', 'PUB', 'SEALED', '[]'), (?, ?, 'bare.example.test', null, null, null, '[]')`,
      [signed, org, unsigned, org],
    );
    await migrate(orm);
    const rows = await sql(`select domain_id, selector, public_key, private_key_enc, state from dkim_keys where domain_id in (?, ?)`, [
      signed,
      unsigned,
    ]);
    assert.deepEqual(rows, [{ domain_id: signed, selector: 'svc202601', public_key: 'PUB', private_key_enc: 'SEALED', state: 'active' }]);
  });

  it('selectors are dated and random; the state moves allow no way back', () => {
    const now = new Date('2026-11-27T10:00:00Z');
    assert.match(rotationSelector(now), /^svc20261127r[0-9a-f]{6}$/);
    assert.notEqual(rotationSelector(now), rotationSelector(now));
    assert.deepEqual(DKIM_KEY_MOVES.revoked, []);
    assert.ok(!DKIM_KEY_MOVES.active.includes('pending') && !DKIM_KEY_MOVES.retiring.includes('active'));
  });

  async function newSignedDomain() {
    const org = await createOrganization(orm, `o-${randomBytes(3).toString('hex')}`);
    const name = `r${randomBytes(4).toString('hex')}.example.test`;
    const d = await createDomain(orm, org.id, name, { verified: true, identity: { secrets, platform: platformDns('mail.svc.test') } });
    return { id: d.id, organizationId: org.id, name, selector: d.dkimSelector! };
  }

  const audit = async (domainId: string) =>
    (await sql(`select action, actor from audit_log where target_id = ? order by created_at, id`, [domainId])) as {
      action: string;
      actor: string | null;
    }[];

  it('one rotation at a time (the index decides between concurrent starts), checked until DNS serves it, then switched and revoked', async () => {
    const d = await newSignedDomain();
    // The key made with the domain has its row from the start (the migration's trigger).
    assert.deepEqual(
      (await domainDkimKeys(orm, d.id)).map((k) => [k.selector, k.state]),
      [[d.selector, 'active']],
    );
    const starts = await Promise.allSettled([0, 1, 2].map(() => startDkimRotation(orm, secrets, d, 'console:a@example.com')));
    const won = starts.filter((s) => s.status === 'fulfilled');
    assert.equal(won.length, 1, 'exactly one start wins');
    for (const s of starts) if (s.status === 'rejected') assert.equal((s.reason as DkimRotationRefused).reason, 'in_progress');
    const { keyId, selector, publicKey } = (won[0] as PromiseFulfilledResult<{ keyId: string; selector: string; publicKey: string }>).value;
    let keys = await domainDkimKeys(orm, d.id);
    assert.deepEqual(
      keys.map((k) => [k.selector, k.state]),
      [
        [selector, 'pending'],
        [d.selector, 'active'],
      ],
      'the key the domain was created with is active beside the pending one',
    );

    // Not published, then something else published: no match, and signing stays with the old key.
    assert.deepEqual(await activities.checkDkimKey(keyId), { state: 'pending', matches: false, ttlSeconds: null });
    dns.txt.set(dkimRecordName(selector, d.name), ['v=DKIM1; k=rsa; p=MIIBsomethingelse']);
    assert.deepEqual(await activities.checkDkimKey(keyId), { state: 'pending', matches: false, ttlSeconds: null });
    let signing = (await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!;
    assert.equal(signing.dkim?.keySelector, d.selector);

    dns.txt.set(dkimRecordName(selector, d.name), [dkimRecordValue(publicKey)]);
    dns.txtTtl.set(dkimRecordName(selector, d.name), 600);
    // The TTL the record is served with comes back with the match: the switch waits at least that long.
    assert.deepEqual(await activities.checkDkimKey(keyId), { state: 'pending', matches: true, ttlSeconds: 600 });
    assert.equal((await domainDkimKeys(orm, d.id))[0].matching_checks, 1);

    const oldId = keys[1].id;
    const switched = await activities.switchDkimKey(keyId, 86_400_000);
    assert.deepEqual(switched, { switched: true, retiringKeyIds: [oldId] });
    keys = await domainDkimKeys(orm, d.id);
    assert.deepEqual(
      keys.map((k) => k.state),
      ['active', 'retiring'],
    );
    signing = (await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!;
    assert.equal(signing.dkim?.keySelector, selector, 'signing uses the new key from the switch on');
    const [row] = await sql(`select dkim_selector, records from domains where id = ?`, [d.id]);
    assert.equal(row.dkim_selector, selector, 'the domain row mirrors the active key');
    assert.equal(row.records.find((r: { purpose: string }) => r.purpose === 'dkim').name, dkimRecordName(selector, d.name));

    assert.equal(await dkimRotationInProgress(orm, d.id), true, 'in progress while the old key retires');
    // After the switch: no cancel, no second switch, no second rotation while one key retires.
    await assert.rejects(cancelDkimRotation(orm, d, keyId, 'console:a@example.com'), DkimRotationRefused);
    assert.deepEqual(await activities.switchDkimKey(keyId, 1), { switched: false, retiringKeyIds: [] });
    await assert.rejects(startDkimRotation(orm, secrets, d, 'console:a@example.com'), DkimRotationRefused);

    await activities.revokeDkimKeys(d.id, [oldId]);
    const [old] = await sql(`select state, private_key_enc from dkim_keys where id = ?`, [oldId]);
    assert.deepEqual(old, { state: 'revoked', private_key_enc: null });
    assert.equal(await dkimRotationInProgress(orm, d.id), false);
    assert.deepEqual(await audit(d.id), [
      { action: 'domain.dkim_rotation_started', actor: 'console:a@example.com' },
      { action: 'domain.dkim_rotation_switched', actor: null },
      { action: 'domain.dkim_rotation_revoked', actor: null },
    ]);
    // Its selectors are never reused: a new rotation after revocation gets a fresh one.
    const next = await startDkimRotation(orm, secrets, d, 'console:a@example.com');
    assert.ok(![d.selector, selector].includes(next.selector));
  });

  it('a cancel before the switch revokes the pending key and leaves signing alone; the workflow then sees it gone', async () => {
    const d = await newSignedDomain();
    const { keyId } = await startDkimRotation(orm, secrets, d, 'console:b@example.com');
    await assert.rejects(cancelDkimRotation(orm, d, 'not-a-uuid', 'console:b@example.com'), DkimRotationRefused);
    await cancelDkimRotation(orm, d, keyId, 'console:b@example.com');
    const [k] = await sql(`select state, private_key_enc from dkim_keys where id = ?`, [keyId]);
    assert.deepEqual(k, { state: 'revoked', private_key_enc: null });
    assert.deepEqual(await activities.checkDkimKey(keyId), { state: 'gone', matches: false });
    assert.deepEqual(await activities.switchDkimKey(keyId, 1), { switched: false, retiringKeyIds: [] });
    assert.equal((await loadSenderIdentities(orm, secrets, [d.id])).get(d.id)!.dkim?.keySelector, d.selector);
    assert.deepEqual(
      (await audit(d.id)).map((a) => [a.action, a.actor]),
      [
        ['domain.dkim_rotation_started', 'console:b@example.com'],
        ['domain.dkim_rotation_canceled', 'console:b@example.com'],
      ],
    );
    // A domain without a key has nothing to rotate.
    const org = await createOrganization(orm, 'bare');
    const bare = await createDomain(orm, org.id, 'bare2.example.test', { verified: true });
    await assert.rejects(
      startDkimRotation(orm, secrets, { id: bare.id, organizationId: org.id, name: bare.name }, 'x'),
      (e: DkimRotationRefused) => e.reason === 'no_key',
    );
  });
});
