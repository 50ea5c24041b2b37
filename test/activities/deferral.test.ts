import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Email, EmailEvent, Recipient, Suppression } from '../../db/entities';
import { createActivities, type Activities } from '../../activities';
import type { Mailer, OutgoingMessage, RecipientRejection, SendOutcome } from '../../activities/mailer';
import { createDnsResolver } from '../../core/domains/dns';
import { createSecrets } from '../../core/secrets';
import { createWebhookHttp } from '../../activities/webhook-http';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { setTransport } from '../../core/delivery/transport';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { releaseDueRetries } from '../../db/sql/release-retries';
import { newDatabase } from '../support/pg';

const MIN = 60_000;

/** A direct transport answering from a script: per address, taken, or refused with a reply (and a suspension). */
class ScriptedDirect implements Mailer {
  readonly finalDestination = true;
  readonly defers = true;
  sent: string[] = [];
  refuse = new Map<string, Omit<RecipientRejection, 'address'>>();
  async send(m: OutgoingMessage): Promise<SendOutcome> {
    this.sent.push(...m.envelope.to);
    const rejected = m.envelope.to.filter((a) => this.refuse.has(a)).map((address) => ({ address, ...this.refuse.get(address)! }));
    return { accepted: m.envelope.to.filter((a) => !this.refuse.has(a)), rejected };
  }
  close() {}
}

/**
 * Direct delivery's deferrals in the delivery pass, against the real database and a clock the
 * test moves: the message goes back to `queued` with its next attempt on the backoff (5 min,
 * doubling), or at the end of its site's suspension; the release step returns it to the outbox
 * when due; past the maximum age it fails; recipients already delivered are never sent again.
 */
describe('Activities: direct delivery deferrals (backoff, suspension, maximum age)', function () {
  this.timeout(60_000);
  let orm: Orm;
  let direct: ScriptedDirect;
  let relayed: string[];
  let acts: Activities;
  let now: number;
  let tokenHash: string;
  let domainName: string;
  const MAX_AGE_MS = 2 * 3_600_000;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_defer'));
    await migrate(orm);
    const org = await createOrganization(orm, 'Direct');
    const domain = await createDomain(orm, org.id, 'direct.example.test', { verified: true });
    domainName = domain.name;
    tokenHash = hashToken((await createKey(orm, org.id, { name: 'live', permission: 'send', mode: 'live', rateLimit: 1000 })).token);
    await setTransport(orm, { organizationId: org.id, transport: 'direct' });
  });
  after(async () => orm.close());
  beforeEach(() => {
    direct = new ScriptedDirect();
    relayed = [];
    now = Date.now();
    const relay: Mailer = {
      finalDestination: false,
      send: async (m) => {
        relayed.push(...m.envelope.to);
        return { accepted: m.envelope.to, rejected: [] };
      },
      close() {},
    };
    acts = createActivities({
      orm,
      mailer: relay,
      direct,
      retryMaxAgeMs: MAX_AGE_MS,
      clock: { now: () => new Date(now) },
      log: pino({ level: 'silent' }),
      dns: createDnsResolver(undefined),
      secrets: createSecrets(randomBytes(32)),
      webhooks: createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 }),
    });
  });

  async function store(to: string[]): Promise<string> {
    const prepared = prepareEmail({ from: `app@${domainName}`, to, subject: 's', text: 't' }, { inBatch: false, now: new Date(now) });
    const [r] = await acceptEmails(
      { orm, dispatch: () => undefined, store: new GroupStore(orm, pino({ level: 'silent' })) },
      { tokenHash },
      [prepared],
      { cost: 1 },
    );
    if (r instanceof ServiceError || typeof r === 'symbol') assert.fail(String(r));
    // As the outbox leaves it: started.
    await orm.em.fork().nativeUpdate(Email, { id: r.id }, { enqueuedAt: new Date(now) });
    return r.id;
  }
  const row = (id: string) => orm.em.fork().findOneOrFail(Email, { id });
  const states = async (id: string) =>
    (await orm.em.fork().find(Recipient, { emailId: id }, { orderBy: { address: 'asc' } })).map((r) => `${r.address}:${r.state}`);
  const events = async (id: string) =>
    (await orm.em.fork().find(EmailEvent, { emailId: id }, { orderBy: { id: 'asc' } })).map((e) => `${e.type}:${e.recipient}`);
  /** One attempt as a batch run makes it. */
  async function attempt(id: string, run: string) {
    assert.deepEqual(await acts.claimBatch(run, [id]), [id]);
    return acts.deliverBatch([id], run);
  }

  it('a refusal for now: queued, out of the outbox until 5 min later, then 10 min; released when due; delivered once', async () => {
    const id = await store(['busy@far.example']);
    direct.refuse.set('busy@far.example', { code: 451, response: '451 4.3.0 try again later' });
    assert.deepEqual(await attempt(id, 'run-a'), { retry: [], failed: [] }, 'no error for the run to retry');
    let e = await row(id);
    assert.equal(e.status, 'queued');
    assert.equal(e.retryReason, 'deferred');
    assert.equal(e.retryAt!.getTime(), now + 5 * MIN);
    assert.equal(e.lastReply, '451 4.3.0 try again later');
    assert.equal(e.deferrals, 1);
    assert.equal(e.claimedBy, null);
    assert.ok(e.enqueuedAt, 'still out of the outbox');
    assert.deepEqual(await states(id), ['busy@far.example:pending']);

    // Not before its time; then back in the outbox (enqueued_at cleared), reason gone.
    now += 5 * MIN - 1000;
    assert.equal(await releaseDueRetries(orm.em.fork(), { now: new Date(now), limit: 100 }), 0);
    now += 1000;
    assert.ok((await releaseDueRetries(orm.em.fork(), { now: new Date(now), limit: 1000 })) >= 1);
    e = await row(id);
    assert.equal(e.enqueuedAt, null);
    assert.equal(e.retryReason, null);

    // The second refusal waits twice as long.
    await attempt(id, 'run-b');
    e = await row(id);
    assert.equal(e.retryAt!.getTime(), now + 10 * MIN);
    assert.equal(e.deferrals, 2);

    direct.refuse.clear();
    now += 10 * MIN;
    await attempt(id, 'run-c');
    assert.equal((await row(id)).status, 'delivered');
    assert.deepEqual(await events(id), [
      'queued:busy@far.example',
      'delivery_delayed:busy@far.example',
      'delivery_delayed:busy@far.example',
      'sent:busy@far.example',
      'delivered:busy@far.example',
    ]);
    assert.deepEqual(relayed, [], 'never through the relay');
  });

  it('a suspended site: waits until the suspension ends when that is later than the backoff (site_suspended)', async () => {
    const id = await store(['slow@big.example']);
    const until = new Date(now + 30 * MIN);
    direct.refuse.set('slow@big.example', { code: null, response: 'site suspended: 421 4.7.28 rate limited', suspendedUntil: until });
    await attempt(id, 'run-s');
    const e = await row(id);
    assert.equal(e.retryReason, 'site_suspended');
    assert.equal(e.retryAt!.getTime(), until.getTime());
    assert.match(e.lastReply!, /rate limited/);
  });

  it('only the recipients still pending are tried again: one delivered, one deferred', async () => {
    const id = await store(['ok@one.example', 'busy@two.example']);
    direct.refuse.set('busy@two.example', { code: 450, response: '450 mailbox busy' });
    await attempt(id, 'run-m1');
    assert.equal((await row(id)).status, 'queued');
    assert.deepEqual(await states(id), ['busy@two.example:pending', 'ok@one.example:delivered']);
    direct.refuse.clear();
    direct.sent = [];
    now += 5 * MIN;
    await attempt(id, 'run-m2');
    assert.deepEqual(direct.sent, ['busy@two.example']);
    assert.equal((await row(id)).status, 'delivered');
  });

  it('past the maximum age the deferred recipients fail, with the last reply', async () => {
    const id = await store(['never@far.example']);
    direct.refuse.set('never@far.example', { code: 452, response: '452 4.2.2 mailbox full' });
    now += MAX_AGE_MS - 2 * MIN; // the next attempt (5 min) would fall past the maximum age
    await attempt(id, 'run-x');
    const e = await row(id);
    assert.equal(e.status, 'failed');
    assert.equal(e.retryReason, null);
    const failed = await orm.em.fork().findOneOrFail(EmailEvent, { emailId: id, type: 'failed' });
    assert.match(failed.detail ?? '', /gave up after 2 h.*452 4\.2\.2 mailbox full/);
  });

  it('a pass run again after its deferral committed (an engine retry) answers queued, and failing it changes nothing', async () => {
    const id = await store(['again@far.example']);
    direct.refuse.set('again@far.example', { code: 451, response: '451 later' });
    await attempt(id, 'run-r');
    direct.sent = [];
    assert.deepEqual(await acts.deliverBatch([id]), { retry: [], failed: [] });
    await acts.failBatch([{ id, detail: 'retries ran out' }]);
    const e = await row(id);
    assert.equal(e.status, 'queued');
    assert.equal(e.retryReason, 'deferred');
    assert.deepEqual(await states(id), ['again@far.example:pending']);
    assert.deepEqual(direct.sent, [], 'nothing handed over again');
  });

  it('a pass run again after its deferral was released and claimed by a new run leaves it to that run (sent once)', async () => {
    const id = await store(['late@far.example']);
    direct.refuse.set('late@far.example', { code: 451, response: '451 later' });
    await attempt(id, 'run-old');
    direct.refuse.clear();
    now += 5 * MIN;
    assert.ok((await releaseDueRetries(orm.em.fork(), { now: new Date(now), limit: 1000 })) >= 1);
    assert.deepEqual(await acts.claimBatch('run-new', [id]), [id]);
    direct.sent = [];
    // The old run's pass again (a crash after its deferral committed, restarted past retry_at).
    assert.deepEqual(await acts.deliverBatch([id], 'run-old'), { retry: [], failed: [] });
    assert.deepEqual(direct.sent, [], 'the old run hands nothing over');
    assert.equal((await row(id)).claimedBy, 'run-new');
    assert.deepEqual(await acts.deliverBatch([id], 'run-new'), { retry: [], failed: [] });
    assert.deepEqual(direct.sent, ['late@far.example']);
    assert.equal((await row(id)).status, 'delivered');
  });

  it('a 5.7.x refusal from the MX is of the sender: a soft bounce, and the address is not suppressed', async () => {
    const id = await store(['blocked@far.example', 'gone@far.example']);
    direct.refuse.set('blocked@far.example', { code: 550, response: '550 5.7.1 Service unavailable; client host blocked' });
    direct.refuse.set('gone@far.example', { code: 550, response: '550 5.1.1 no such user' });
    await attempt(id, 'run-b57');
    const bounces = await orm.em.fork().find(EmailEvent, { emailId: id, type: 'bounced' }, { orderBy: { recipient: 'asc' } });
    assert.deepEqual(
      bounces.map((b) => `${b.recipient}:${b.bounceType}`),
      ['blocked@far.example:soft', 'gone@far.example:hard'],
    );
    const listed = await orm.em.fork().find(Suppression, { email: { $in: ['blocked@far.example', 'gone@far.example'] } });
    assert.deepEqual(
      listed.map((r) => r.email),
      ['gone@far.example'],
    );
  });
});
