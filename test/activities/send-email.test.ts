import { randomBytes, randomUUID } from 'node:crypto';
import { createSecrets } from '../../core/secrets';
import { createWebhookHttp } from '../../activities/webhook-http';
import assert from 'node:assert/strict';
import { createDnsResolver } from '../../core/domains/dns';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Email, Recipient, Suppression, EmailEvent } from '../../db/entities';
import { createActivities, type Activities } from '../../activities';
import { SmtpTransactionError, type Mailer, type OutgoingMessage, type SendOutcome } from '../../activities/mailer';
import { TransientDeliveryError } from '../../activities/errors';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { newDatabase } from '../support/pg';

/** A Mailer that records what it was asked to send and answers from a script. */
class ScriptedMailer implements Mailer {
  finalDestination = false;
  sent: OutgoingMessage[] = [];
  next: ((m: OutgoingMessage) => SendOutcome) | null = null;
  async send(m: OutgoingMessage): Promise<SendOutcome> {
    this.sent.push(m);
    if (this.next) return this.next(m);
    return { accepted: m.envelope.to, rejected: [] };
  }
  close() {}
}

describe('Activities: SendEmail against the real database', function () {
  this.timeout(60_000);
  let orm: Orm;
  let mailer: ScriptedMailer;
  let acts: Activities;
  /** Token hashes of a live and a test key: the store statement authenticates each message. */
  const keys: Record<'live' | 'test', string> = { live: '', test: '' };
  let orgId: string;
  let domainName: string;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_acts'));
    await migrate(orm);
    const org = await createOrganization(orm, 'Acts');
    orgId = org.id;
    const domain = await createDomain(orm, org.id, 'acts.example.test', { verified: true });
    domainName = domain.name;
    for (const mode of ['live', 'test'] as const) {
      keys[mode] = hashToken((await createKey(orm, org.id, { name: mode, permission: 'send', mode, rateLimit: 1000 })).token);
    }
  });
  after(async () => orm.close());
  beforeEach(() => {
    mailer = new ScriptedMailer();
    acts = createActivities({
      orm,
      mailer,
      clock: { now: () => new Date() },
      log: pino({ level: 'silent' }),
      dns: createDnsResolver(undefined),
      secrets: createSecrets(randomBytes(32)),
      webhooks: createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 }),
    });
  });

  async function store(to: string[], mode: 'live' | 'test' = 'live'): Promise<string> {
    const prepared = prepareEmail({ from: `app@${domainName}`, to, subject: 's', text: 't' }, { inBatch: false, now: new Date() });
    const [r] = await acceptEmails(
      { orm, dispatch: () => undefined, store: new GroupStore(orm, pino({ level: 'silent' })) },
      { tokenHash: keys[mode] },
      [prepared],
      { cost: 1 },
    );
    if (r instanceof ServiceError || typeof r === 'symbol') assert.fail(String(r));
    return r.id;
  }
  const status = async (id: string) => (await orm.em.fork().findOneOrFail(Email, { id })).status;
  const states = async (id: string) =>
    (await orm.em.fork().find(Recipient, { emailId: id }, { orderBy: { address: 'asc' } })).map((r) => `${r.address}:${r.state}`);

  it('claim is the single winner between pick-up and cancel, and resumes its own claim', async () => {
    const id = await store(['a@example.com']);
    assert.deepEqual(await acts.claimForDelivery(id), { outcome: 'claimed' });
    assert.deepEqual(await acts.claimForDelivery(id), { outcome: 'claimed' }, 'a retry after a crash resumes');
    const canceled = await orm.em.fork().nativeUpdate(Email, { id, status: 'queued' }, { status: 'canceled' });
    assert.equal(canceled, 0, 'cancel loses once picked up');
    const other = await store(['b@example.com']);
    await orm.em.fork().nativeUpdate(Email, { id: other, status: 'queued' }, { status: 'canceled' });
    assert.deepEqual(await acts.claimForDelivery(other), { outcome: 'not_queued', status: 'canceled' });
  });

  it('claimBatch: two runs naming one message, one owns it; the owner resumes its claim after a crash, the other never gets it', async () => {
    const [a, b, c] = [await store(['a@example.com']), await store(['b@example.com']), await store(['c@example.com'])];
    await orm.em.fork().nativeUpdate(Email, { id: c }, { status: 'canceled' });
    assert.deepEqual(await acts.claimBatch('run-1', [a, b, c]), [a, b], 'the canceled message stays out');
    assert.deepEqual(await acts.claimBatch('run-2', [b, a]), [], 'a chunk grouped differently gets nothing already owned');
    assert.deepEqual(await acts.claimBatch('run-1', [a, b, c]), [a, b], 'its own claim, run again, resumes');
    assert.equal((await orm.em.fork().findOneOrFail(Email, { id: a })).claimedBy, 'run-1');
  });

  it('deliverBatch hands every message over in one pass and answers per message: delivered, retry later, failed for good', async () => {
    const ok = await store(['ok@example.com']);
    const later = await store(['later@example.com']);
    const test = await store(['delivered@example.com'], 'test');
    const ids = [ok, later, test];
    assert.deepEqual(await acts.claimBatch('run-3', ids), ids);
    mailer.next = (msg) => {
      if (msg.envelope.to.includes('later@example.com')) throw new SmtpTransactionError('421 try later', 421);
      return { accepted: msg.envelope.to, rejected: [] };
    };
    const gone = randomUUID();
    const pass = await acts.deliverBatch([...ids, gone]);
    assert.deepEqual(
      pass.retry.map((u) => u.id),
      [later],
    );
    assert.deepEqual(
      pass.failed.map((u) => u.id),
      [gone],
      'a message that does not exist can never be sent',
    );
    assert.deepEqual([await status(ok), await status(later), await status(test)], ['sent', 'sending', 'delivered']);
    const handed = () => mailer.sent.flatMap((m) => m.envelope.to).sort();
    assert.deepEqual(handed(), ['later@example.com', 'ok@example.com'], 'test mail never reaches the mailer');
    mailer.next = null;
    assert.deepEqual(await acts.deliverBatch([later]), { retry: [], failed: [] });
    assert.deepEqual(await states(later), ['later@example.com:sent']);
    assert.deepEqual(handed(), ['later@example.com', 'later@example.com', 'ok@example.com'], 'the retry sends only the refused message');
  });

  it('deliver is idempotent: a retried activity never sends twice', async () => {
    const id = await store(['a@example.com', 'b@example.com']);
    await acts.claimForDelivery(id);
    assert.deepEqual(await acts.deliver(id), { status: 'sent' });
    assert.deepEqual(await acts.deliver(id), { status: 'sent' });
    assert.equal(mailer.sent.length, 1);
    assert.equal(mailer.sent[0].messageId, `<${id}@${domainName}>`);
  });

  it('a transient whole-transaction failure throws for a retry, which sends the same Message-ID', async () => {
    const id = await store(['a@example.com']);
    await acts.claimForDelivery(id);
    mailer.next = () => {
      throw new SmtpTransactionError('421 service not available', 421);
    };
    await assert.rejects(acts.deliver(id), TransientDeliveryError);
    assert.deepEqual(await states(id), ['a@example.com:pending']);
    mailer.next = null;
    assert.deepEqual(await acts.deliver(id), { status: 'sent' });
    assert.equal(mailer.sent.length, 2);
    assert.equal(mailer.sent[0].messageId, mailer.sent[1].messageId);
  });

  it('the relay refusing for now: the message says when it goes again and why, and the outage is logged once, its end once', async () => {
    const lines: { msg: string; errorId?: string; refusals?: number }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const base = {
      orm,
      mailer,
      clock: { now: () => new Date() },
      dns: createDnsResolver(undefined),
      secrets: createSecrets(randomBytes(32)),
    };
    const webhooks = createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 });
    acts = createActivities({ ...base, log, webhooks, retryBaseSeconds: 30 });
    const [a, b] = [await store(['a@example.com']), await store(['b@example.com'])];
    for (const id of [a, b]) await acts.claimForDelivery(id);
    mailer.next = () => {
      throw new SmtpTransactionError('421 4.3.2 service not available', 421);
    };
    const before = Date.now();
    await assert.rejects(acts.deliver(a), TransientDeliveryError);
    await assert.rejects(acts.deliver(b), TransientDeliveryError);
    await assert.rejects(acts.deliver(a), TransientDeliveryError);
    const row = await orm.em.fork().findOneOrFail(Email, { id: a });
    assert.equal(row.status, 'sending');
    assert.equal(row.relayRefusals, 2);
    assert.match(row.lastReply ?? '', /421 4\.3\.2 service not available/);
    // The second refusal: the next attempt after twice the base.
    const wait = row.relayRetryAt!.getTime() - before;
    assert.ok(wait >= 60_000 && wait < 70_000, `${wait} ms`);
    assert.equal(lines.filter((l) => l.errorId === 'relay_refusing').length, 1, 'once per outage, not per message or attempt');
    mailer.next = null;
    assert.deepEqual(await acts.deliver(a), { status: 'sent' });
    assert.equal((await orm.em.fork().findOneOrFail(Email, { id: a })).relayRetryAt, null, 'answered: no longer waiting');
    assert.deepEqual(await acts.deliver(b), { status: 'sent' });
    const back = lines.filter((l) => l.msg === 'the SMTP relay accepts mail again');
    assert.equal(back.length, 1);
    assert.equal(back[0].refusals, 3);
  });

  it('a 5xx for the whole transaction hard-bounces every recipient and suppresses them', async () => {
    const id = await store(['x@example.com', 'y@example.com']);
    await acts.claimForDelivery(id);
    mailer.next = () => {
      throw new SmtpTransactionError('554 message refused', 554);
    };
    assert.deepEqual(await acts.deliver(id), { status: 'bounced' });
    assert.deepEqual(await states(id), ['x@example.com:bounced', 'y@example.com:bounced']);
    const sup = await orm.em.fork().find(Suppression, { organizationId: orgId, email: { $in: ['x@example.com', 'y@example.com'] } });
    assert.equal(sup.length, 2);
  });

  it('a hard bounce in a pass: the address listed once with its first reason, its contact bounced, attempts and events in order', async () => {
    const sql = orm.em.fork().getConnection();
    await sql.execute(
      `insert into contacts (id, organization_id, email, status, created_at, updated_at) values (?, ?, 'hb1@example.com', 'subscribed', now(), now())`,
      [randomUUID(), orgId],
    );
    const bounced = await store(['hb1@example.com']);
    const listed = await store(['hb2@example.com', 'fine@example.com']);
    // Listed by hand after acceptance, before the relay refuses it: the list keeps why it was listed first.
    await sql.execute(
      `insert into suppressions (id, organization_id, email, reason, created_at) values (?, ?, 'hb2@example.com', 'manual', now())`,
      [randomUUID(), orgId],
    );
    await acts.claimBatch('run-hb', [bounced, listed]);
    mailer.next = (m) => ({
      accepted: m.envelope.to.filter((a) => a === 'fine@example.com'),
      rejected: m.envelope.to
        .filter((a) => a !== 'fine@example.com')
        .map((address) => ({ address, code: 550, response: '550 no such user' })),
    });
    assert.deepEqual(await acts.deliverBatch([bounced, listed]), { retry: [], failed: [] });
    assert.deepEqual([await status(bounced), await status(listed)], ['bounced', 'sent']);
    const sup = await orm.em
      .fork()
      .find(Suppression, { organizationId: orgId, email: { $in: ['hb1@example.com', 'hb2@example.com'] } }, { orderBy: { email: 'asc' } });
    assert.deepEqual(
      sup.map((x) => [x.email, x.reason]),
      [
        ['hb1@example.com', 'bounce'],
        ['hb2@example.com', 'manual'],
      ],
      'the first reason stays',
    );
    const [contact] = await sql.execute(`select status from contacts where organization_id = ? and email = 'hb1@example.com'`, [orgId]);
    assert.equal(contact.status, 'bounced');
    const events = await orm.em.fork().find(EmailEvent, { emailId: listed }, { orderBy: { id: 'asc' } });
    assert.deepEqual(
      events.map((e) => `${e.type}:${e.recipient}${e.bounceType ? `:${e.bounceType}` : ''}`),
      ['queued:hb2@example.com', 'queued:fine@example.com', 'bounced:hb2@example.com:hard', 'sent:fine@example.com'],
    );
    const attempts = await orm.em.fork().find(Recipient, { emailId: { $in: [bounced, listed] } });
    assert.deepEqual(
      attempts.map((r) => r.attempts),
      [1, 1, 1],
    );
  });

  it('a pass sends attachments, and a sender domain whose DKIM key does not open holds back only its own messages', async () => {
    const broken = await createDomain(orm, orgId, 'broken-key.example.test', { verified: true });
    await orm.em
      .fork()
      .getConnection()
      .execute(`update domains set dkim_selector = 's1', dkim_private_key_enc = 'not sealed' where id = ?`, [broken.id]);
    const prepared = prepareEmail(
      {
        from: `app@${domainName}`,
        to: ['att@example.com'],
        subject: 's',
        text: 't',
        attachments: [{ filename: 'a.txt', content: Buffer.from('hello file').toString('base64'), content_type: 'text/plain' }],
      },
      { inBatch: false, now: new Date() },
    );
    const accept = (p: typeof prepared) =>
      acceptEmails(
        { orm, dispatch: () => undefined, store: new GroupStore(orm, pino({ level: 'silent' })) },
        { tokenHash: keys.live },
        [p],
        {
          cost: 1,
        },
      );
    const [withFile] = await accept(prepared);
    const [held] = await accept(
      prepareEmail({ from: `app@${broken.name}`, to: ['held@example.com'], subject: 's', text: 't' }, { inBatch: false, now: new Date() }),
    );
    if (withFile instanceof ServiceError || typeof withFile === 'symbol' || held instanceof ServiceError || typeof held === 'symbol')
      assert.fail('not accepted');
    await acts.claimBatch('run-dkim', [withFile.id, held.id]);
    const pass = await acts.deliverBatch([withFile.id, held.id]);
    assert.deepEqual(
      pass.retry.map((u) => u.id),
      [held.id],
    );
    assert.deepEqual(
      mailer.sent.map((m) => [m.envelope.to, m.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])]),
      [[['att@example.com'], [['a.txt', 'text/plain', 'hello file']]]],
    );
    assert.deepEqual([await status(withFile.id), await status(held.id)], ['sent', 'sending']);
  });

  it('only the recipients a partial 4xx refused are retried', async () => {
    const id = await store(['ok@example.com', 'later@example.com']);
    await acts.claimForDelivery(id);
    mailer.next = (m) => ({
      accepted: m.envelope.to.filter((a) => a !== 'later@example.com'),
      rejected: [{ address: 'later@example.com', code: 452, response: '452 try later' }],
    });
    await assert.rejects(acts.deliver(id), TransientDeliveryError);
    mailer.next = null;
    await acts.deliver(id);
    assert.deepEqual(
      mailer.sent.map((m) => m.envelope.to),
      [['ok@example.com', 'later@example.com'], ['later@example.com']],
    );
    assert.deepEqual(await states(id), ['later@example.com:sent', 'ok@example.com:sent']);
  });

  it('failDelivery marks what is left as failed with the reason', async () => {
    const id = await store(['f@example.com']);
    await acts.claimForDelivery(id);
    assert.deepEqual(await acts.failDelivery(id, 'gave up after 4 attempts'), { status: 'failed' });
    const ev = await orm.em.fork().find(EmailEvent, { emailId: id, type: 'failed' });
    assert.equal(ev[0].detail, 'gave up after 4 attempts');
    assert.equal(await status(id), 'failed');
  });

  it('test mode simulates outcomes and never touches the mailer or the suppression list', async () => {
    const id = await store(['bounce+1@example.com', 'someone@example.com'], 'test');
    await acts.claimForDelivery(id);
    assert.deepEqual(await acts.deliver(id), { status: 'delivered' });
    assert.equal(mailer.sent.length, 0);
    assert.equal(await orm.em.fork().count(Suppression, { email: 'bounce+1@example.com' }), 0);
    assert.deepEqual(await states(id), ['bounce+1@example.com:bounced', 'someone@example.com:delivered']);
  });
});
