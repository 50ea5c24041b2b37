import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { markInFlight, readPassAttachments, readPassDomains, readPassEmails, recordPassOutcomes } from '../../db/sql/delivery-pass';
import {
  insertEmail,
  insertRecipient,
  insertRow,
  insertSender,
  ms,
  openTestDb,
  sql,
  type EmailOwner,
  type Row,
} from '../support/db-fixtures';

// No race of its own: a pass works on messages its run claimed (db/sql/claim-delivery.ts settles who).
describe("db/sql/delivery-pass: a pass's reads, its in-flight mark, and its outcomes written all together", function () {
  let orm: Orm;
  let owner: EmailOwner;
  let org: Row;
  let domain: Row;
  const at = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_delivery_pass');
    ({
      owner,
      organization: org,
      domain,
    } = await insertSender(orm, {
      organization: { name: 'Pass Org', postal_address: '1 Main St' },
      domain: {
        dkim_selector: 'sel1',
        dkim_private_key_enc: 'sealed',
        return_path_host: 'rp.example.test',
        tracking_host: 't.example.test',
      },
    }));
  });
  after(async () => orm.close());

  const recipient = async (id: string) => (await sql(orm, 'select state, attempts from recipients where id = $1', [id]))[0];

  describe('reads', () => {
    it('readPassEmails: the messages that exist, each with its recipients in id order and whether it has attachments', async () => {
      const e = await insertEmail(orm, owner, {
        to_addresses: ['a@example.com', 'b@example.com'],
        cc_addresses: ['c@example.com'],
        headers: { 'X-A': '1' },
        kind: 'receipt',
        track_opens: true,
      });
      const r1 = await insertRecipient(orm, e.id, 'a@example.com');
      const r2 = await insertRecipient(orm, e.id, 'b@example.com', { state: 'delivered' });
      const plain = await insertEmail(orm, owner);
      await insertRow(orm, 'attachments', {
        id: randomUUID(),
        email_id: e.id,
        position: 0,
        filename: 'a.txt',
        content_type: 'text/plain',
        size: 1,
        content: Buffer.from('A'),
      });
      const rows = await readPassEmails(orm, [e.id, plain.id, randomUUID()]);
      assert.equal(rows.length, 2);
      const read = rows.find((r) => r.id === e.id)!;
      assert.deepEqual(read.to_addresses, ['a@example.com', 'b@example.com']);
      assert.deepEqual(read.cc_addresses, ['c@example.com']);
      assert.deepEqual(read.headers, { 'X-A': '1' });
      assert.equal(read.kind, 'receipt');
      assert.equal(read.track_opens, true);
      assert.equal(read.has_attachments, true);
      assert.deepEqual(
        read.recipients,
        [
          [r1.id, 'a@example.com', 'pending'],
          [r2.id, 'b@example.com', 'delivered'],
        ].sort((x, y) => (x[0] < y[0] ? -1 : 1)),
      );
      const p = rows.find((r) => r.id === plain.id)!;
      assert.equal(p.has_attachments, false);
      assert.deepEqual(p.recipients, []);
    });

    it('readPassAttachments: in message and position order; none asked, none read', async () => {
      const e = await insertEmail(orm, owner);
      for (const position of [1, 0])
        await insertRow(orm, 'attachments', {
          id: randomUUID(),
          email_id: e.id,
          position,
          filename: `f${position}.bin`,
          content_type: 'application/octet-stream',
          size: 2,
          content: Buffer.from([position, 255]),
        });
      const rows = await readPassAttachments(orm, [e.id]);
      assert.deepEqual(
        rows.map((r) => r.filename),
        ['f0.bin', 'f1.bin'],
      );
      assert.ok(Buffer.isBuffer(rows[1].content));
      assert.deepEqual([...rows[1].content], [1, 255]);
      assert.deepEqual(await readPassAttachments(orm, []), []);
    });

    it("readPassDomains: the sender identity with its organization's name and postal address", async () => {
      const [d] = await readPassDomains(orm, [domain.id]);
      assert.deepEqual(d, {
        id: domain.id,
        name: domain.name,
        dkim_selector: 'sel1',
        dkim_private_key_enc: 'sealed',
        dkim_ed25519_selector: null,
        dkim_ed25519_private_key_enc: null,
        return_path_host: 'rp.example.test',
        tracking_host: 't.example.test',
        organization_name: 'Pass Org',
        postal_address: '1 Main St',
        transport: 'relay',
      });
      assert.deepEqual(await readPassDomains(orm, [randomUUID()]), []);
      // The organization's transport, unless the domain has its own.
      await sql(orm, `update organizations set transport = 'direct' where id = $1`, [org.id]);
      assert.equal((await readPassDomains(orm, [domain.id]))[0].transport, 'direct');
      await sql(orm, `update domains set transport = 'relay' where id = $1`, [domain.id]);
      assert.equal((await readPassDomains(orm, [domain.id]))[0].transport, 'relay');
      await sql(orm, `update domains set transport = null where id = $1`, [domain.id]);
      await sql(orm, `update organizations set transport = 'relay' where id = $1`, [org.id]);
    });
  });

  describe('markInFlight', () => {
    it('commits pending and in-flight recipients in flight, one more attempt each; a settled one is left alone', async () => {
      const e = await insertEmail(orm, owner);
      const pending = await insertRecipient(orm, e.id, 'p@example.com');
      const retry = await insertRecipient(orm, e.id, 'r@example.com', { state: 'in_flight', attempts: 1 });
      const done = await insertRecipient(orm, e.id, 'd@example.com', { state: 'delivered', attempts: 1 });
      await markInFlight(orm, [pending.id, retry.id, done.id], at);
      await markInFlight(orm, [], at);
      assert.deepEqual(await recipient(pending.id), { state: 'in_flight', attempts: 1 });
      assert.deepEqual(await recipient(retry.id), { state: 'in_flight', attempts: 2 });
      assert.deepEqual(await recipient(done.id), { state: 'delivered', attempts: 1 });
    });
  });

  describe('recordPassOutcomes', () => {
    it('writes recipient states, events in the order given and message statuses; sent_at is set once', async () => {
      const e = await insertEmail(orm, owner, { status: 'sending' });
      const a = await insertRecipient(orm, e.id, 'a@example.com', { state: 'in_flight', attempts: 1 });
      const b = await insertRecipient(orm, e.id, 'b@example.com');
      const ev = (type: 'sent' | 'bounced', r: string, bounceType: string | null = null, detail: string | null = null) => ({
        emailId: e.id,
        organizationId: org.id,
        type,
        recipient: r,
        bounceType,
        detail,
      });
      await recordPassOutcomes(orm, {
        at,
        recipients: [
          { id: a.id, state: 'sent', tried: 0 },
          { id: b.id, state: 'bounced', tried: 1 },
        ],
        events: [ev('sent', 'a@example.com'), ev('bounced', 'b@example.com', 'hard', '550 no such user')],
        emails: [{ id: e.id, status: 'sent', sent: true }],
      });
      assert.deepEqual(await recipient(a.id), { state: 'sent', attempts: 1 });
      assert.deepEqual(await recipient(b.id), { state: 'bounced', attempts: 1 });
      const events = await sql(
        orm,
        'select type, recipient, bounce_type, detail, at, organization_id from email_events where email_id = $1 order by id',
        [e.id],
      );
      assert.deepEqual(
        events.map((x) => [x.type, x.recipient, x.bounce_type, x.detail]),
        [
          ['sent', 'a@example.com', null, null],
          ['bounced', 'b@example.com', 'hard', '550 no such user'],
        ],
      );
      assert.ok(events.every((x) => ms(x.at) === at.getTime() && x.organization_id === org.id));
      let [row] = await sql(orm, 'select status, sent_at, updated_at from emails where id = $1', [e.id]);
      assert.deepEqual([row.status, ms(row.sent_at), ms(row.updated_at)], ['sent', at.getTime(), at.getTime()]);

      const later = new Date(at.getTime() + 60_000);
      await recordPassOutcomes(orm, { at: later, recipients: [], events: [], emails: [{ id: e.id, status: 'delivered', sent: true }] });
      [row] = await sql(orm, 'select status, sent_at from emails where id = $1', [e.id]);
      assert.deepEqual([row.status, ms(row.sent_at)], ['delivered', at.getTime()], 'sent_at keeps the first time');
    });

    it('a deferral moves a sending message back to queued with its retry, and only a sending one', async () => {
      const e = await insertEmail(orm, owner, { status: 'sending' });
      const retryAt = new Date(at.getTime() + 300_000);
      const retry = { reason: 'deferred' as const, at: retryAt, reply: '451 later' };
      await recordPassOutcomes(orm, { at, recipients: [], events: [], emails: [{ id: e.id, status: 'queued', sent: false, retry }] });
      let [row] = await sql(orm, 'select status, retry_reason, retry_at, last_reply, deferrals, claimed_by from emails where id = $1', [
        e.id,
      ]);
      assert.deepEqual(
        [row.status, row.retry_reason, ms(row.retry_at), row.last_reply, row.deferrals, row.claimed_by],
        ['queued', 'deferred', retryAt.getTime(), '451 later', 1, null],
      );
      // Claimed again by a new run meanwhile: a late second write of the old deferral changes nothing.
      await sql(orm, `update emails set status = 'sending', retry_reason = null, retry_at = null, claimed_by = 'run-2' where id = $1`, [
        e.id,
      ]);
      await sql(orm, `update emails set status = 'delivered' where id = $1`, [e.id]);
      await recordPassOutcomes(orm, { at, recipients: [], events: [], emails: [{ id: e.id, status: 'queued', sent: false, retry }] });
      [row] = await sql(orm, 'select status, retry_reason, deferrals from emails where id = $1', [e.id]);
      assert.deepEqual([row.status, row.retry_reason, row.deferrals], ['delivered', null, 1]);
    });

    it('all or nothing: one bad event rolls back the recipient states and statuses of the whole pass', async () => {
      const e = await insertEmail(orm, owner, { status: 'sending' });
      const a = await insertRecipient(orm, e.id, 'a@example.com', { state: 'in_flight', attempts: 1 });
      await assert.rejects(
        recordPassOutcomes(orm, {
          at,
          recipients: [{ id: a.id, state: 'bounced', tried: 0 }],
          // bounce_type is checked by the table: not one of hard, soft, undetermined.
          events: [
            { emailId: e.id, organizationId: org.id, type: 'bounced', recipient: 'a@example.com', bounceType: 'weird', detail: null },
          ],
          emails: [{ id: e.id, status: 'bounced', sent: false }],
        }),
      );
      assert.deepEqual(await recipient(a.id), { state: 'in_flight', attempts: 1 });
      assert.equal((await sql(orm, 'select status from emails where id = $1', [e.id]))[0].status, 'sending');
      assert.deepEqual(await sql(orm, 'select 1 from email_events where email_id = $1', [e.id]), []);
    });
  });
});
