import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { claimInbound, knownReturnPathHost, markInboundProcessed, storeInbound } from '../../db/sql/inbound-messages';
import { concurrently, insertDomain, insertOrganization, openTestDb, sql } from '../support/db-fixtures';

describe('db/sql/inbound-messages: known return-path hosts; a stored message is applied once, by one processor', function () {
  let orm: Orm;

  before(async () => {
    orm = await openTestDb('db_inbound_messages');
  });
  after(async () => orm.close());
  // The queue is global: each test starts with nothing pending.
  beforeEach(async () => {
    await sql(orm, "update inbound_messages set processed_at = now(), outcome = 'test' where processed_at is null");
  });

  const store = (n: number) =>
    storeInbound(orm, { remoteAddress: '192.0.2.1', mailFrom: '', rcptTo: [`b+${n}@rp.example.test`], raw: Buffer.from(`m${n}`) });

  it("knownReturnPathHost: a live domain's return-path host, whatever its case; not a deleted domain's, not an unknown one", async () => {
    const org = await insertOrganization(orm);
    await insertDomain(orm, org.id, { return_path_host: 'bounces.live.example.test' });
    await insertDomain(orm, org.id, { return_path_host: 'bounces.gone.example.test', deleted_at: new Date() });
    assert.equal(await knownReturnPathHost(orm, 'bounces.live.example.test'), true);
    assert.equal(await knownReturnPathHost(orm, 'Bounces.LIVE.example.test'), true);
    assert.equal(await knownReturnPathHost(orm, 'bounces.gone.example.test'), false);
    assert.equal(await knownReturnPathHost(orm, 'live.example.test'), false);
  });

  it('storeInbound keeps the message as received; claimInbound hands out the oldest pending one', async () => {
    const raw = Buffer.from('From: x\r\n\r\nbody\xff', 'latin1');
    const id = await storeInbound(orm, { remoteAddress: null, mailFrom: null, rcptTo: ['a@rp.example.test', 'b@rp.example.test'], raw });
    const [row] = await sql(orm, 'select remote_address, mail_from, rcpt_to, size, raw, processed_at from inbound_messages where id = $1', [
      id,
    ]);
    assert.deepEqual(
      [row.remote_address, row.mail_from, row.rcpt_to, row.size, row.processed_at],
      [null, null, ['a@rp.example.test', 'b@rp.example.test'], raw.length, null],
    );
    assert.ok(raw.equals(row.raw));
    const later = await store(2);
    const claimed = await orm.em.fork().transactional((em) => claimInbound(em));
    assert.ok(claimed);
    assert.deepEqual({ id: claimed.id, rcptTo: claimed.rcptTo }, { id, rcptTo: ['a@rp.example.test', 'b@rp.example.test'] });
    assert.ok(claimed.raw.equals(raw));
    assert.notEqual(claimed.id, later);
  });

  it('markInboundProcessed stamps the message with its outcome, and it is not claimed again; nothing pending, null', async () => {
    const id = await store(1);
    await orm.em.fork().transactional(async (em) => {
      const m = await claimInbound(em);
      assert.equal(m?.id, id);
      await markInboundProcessed(em, m!.id, { result: 'bounce', emailId: null, recipientId: null });
    });
    const [row] = await sql(orm, 'select outcome, processed_at is not null as done from inbound_messages where id = $1', [id]);
    assert.deepEqual(row, { outcome: 'bounce', done: true });
    assert.equal(await orm.em.fork().transactional((em) => claimInbound(em)), null);
  });

  it('a claim rolled back (a crash while applying) leaves the message pending for the next processor', async () => {
    const id = await store(1);
    await assert.rejects(
      orm.em.fork().transactional(async (em) => {
        const m = await claimInbound(em);
        await markInboundProcessed(em, m!.id, { result: 'bounce', emailId: null, recipientId: null });
        throw new Error('crash');
      }),
      /crash/,
    );
    assert.equal((await orm.em.fork().transactional((em) => claimInbound(em)))?.id, id);
  });

  it('race: a message held by one processor is skipped by another, which takes the next one', async () => {
    const first = await store(1);
    const second = await store(2);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let claimedFirst!: (id: string | undefined) => void;
    const firstClaim = new Promise<string | undefined>((r) => (claimedFirst = r));
    const holder = orm.em.fork().transactional(async (em) => {
      claimedFirst((await claimInbound(em))?.id);
      await held;
    });
    assert.equal(await firstClaim, first);
    const other = await orm.em.fork().transactional(async (em) => (await claimInbound(em))?.id);
    release();
    await holder;
    assert.equal(other, second);
  });

  it('race: concurrent processors apply each message exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await store(i));
    const applied = await concurrently(4, async (p) => {
      const mine: string[] = [];
      for (;;) {
        const id = await orm.em.fork().transactional(async (em) => {
          const m = await claimInbound(em);
          if (m) await markInboundProcessed(em, m.id, { result: `p${p}`, emailId: null, recipientId: null });
          return m?.id ?? null;
        });
        if (id === null) return mine;
        mine.push(id);
      }
    });
    const all = applied.flat();
    assert.equal(all.length, 12);
    assert.deepEqual([...all].sort(), [...ids].sort());
  });
});
