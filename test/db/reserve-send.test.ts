import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { ensureCounters, PLATFORM_SCOPE_ID, reserveChunk, type ChunkMessage, type ParkedMessage } from '../../db/sql/reserve-send';
import { insertEmail, insertRecipient, insertRow, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';
import { dayOf, inTransaction, releasedTogether, values } from '../support/db-fixtures-rz';

type Sender = Awaited<ReturnType<typeof insertSender>>;

describe('db/sql/reserve-send: daily allowances reserved for a chunk of claimed messages', function () {
  let orm: Orm;
  // The platform's counter is one row per day for the whole database: each test has days of its own.
  let dayNo = 0;
  const nextDay = () => dayOf(++dayNo);
  const until = new Date('2031-12-31T00:00:00.000Z');

  before(async () => {
    orm = await openTestDb('db_reserve_send');
  });
  after(async () => orm.close());

  /** A queued message with `n` recipients (plus `suppressed` ones, which take no allowance). */
  async function message(owner: EmailOwner, n: number, over: Record<string, unknown> = {}, suppressed = 0): Promise<string> {
    const e = await insertEmail(orm, owner, over);
    for (let i = 0; i < n; i++) await insertRecipient(orm, e.id, `r${i}@example.com`);
    for (let i = 0; i < suppressed; i++) await insertRecipient(orm, e.id, `s${i}@example.com`, { state: 'suppressed' });
    return e.id;
  }
  const m = (
    id: string,
    s: Sender,
    limits: ChunkMessage['limits'] = { organization: null, domain: null },
    warmupStage: number | null = null,
  ): ChunkMessage => ({
    id,
    organizationId: s.organization.id,
    domainId: s.domain.id,
    limits,
    warmupStage,
  });
  /** The counters of the day for the message's scopes (ensureCounters), then the reservation, in one transaction each. */
  async function reserve(day: string, platformLimit: number | null, messages: ChunkMessage[]): Promise<ParkedMessage[]> {
    await inTransaction(orm, (em) =>
      ensureCounters(em, [
        { scope: 'platform', scopeId: PLATFORM_SCOPE_ID, day, stage: null },
        ...messages.flatMap((x) => [
          { scope: 'organization', scopeId: x.organizationId, day, stage: null },
          { scope: 'domain', scopeId: x.domainId, day, stage: x.warmupStage },
        ]),
      ]),
    );
    return inTransaction(orm, (em) => reserveChunk(em, { day, until, platformLimit, messages }));
  }
  const counter = async (scope: string, scopeId: string, day: string) =>
    (
      await sql(orm, `select used, warmup_stage, reached_at from send_counters where scope = $1 and scope_id = $2 and day = $3`, [
        scope,
        scopeId,
        day,
      ])
    )[0];
  const emailRow = async (id: string) =>
    (await sql(orm, `select reserved_on::text as reserved_on, waiting_reason, waiting_until from emails where id = $1`, [id]))[0];

  describe('ensureCounters', () => {
    it('creates the missing rows at zero with their stage, and leaves existing ones as they are', async () => {
      const s = await insertSender(orm);
      const day = nextDay();
      await insertRow(orm, 'send_counters', { scope: 'organization', scope_id: s.organization.id, day, used: 12 });
      await inTransaction(orm, (em) =>
        ensureCounters(em, [
          { scope: 'organization', scopeId: s.organization.id, day, stage: null },
          { scope: 'domain', scopeId: s.domain.id, day, stage: 2 },
        ]),
      );
      assert.equal((await counter('organization', s.organization.id, day)).used, 12);
      const d = await counter('domain', s.domain.id, day);
      assert.deepEqual([d.used, d.warmup_stage], [0, 2]);
      await inTransaction(orm, (em) => ensureCounters(em, []));
    });
  });

  describe('reserveChunk', () => {
    it('every message fits: each scope counts the recipients (suppressed ones not), each message is stamped with the day', async () => {
      const s = await insertSender(orm);
      const day = nextDay();
      const a = await message(s.owner, 2, {}, 1);
      const b = await message(s.owner, 3);
      const parked = await reserve(day, 1000, [
        m(a, s, { organization: 100, domain: 100 }, 4),
        m(b, s, { organization: 100, domain: 100 }, 4),
      ]);
      assert.deepEqual(parked, []);
      assert.equal((await counter('platform', PLATFORM_SCOPE_ID, day)).used, 5);
      assert.equal((await counter('organization', s.organization.id, day)).used, 5);
      const d = await counter('domain', s.domain.id, day);
      assert.deepEqual([d.used, d.warmup_stage, d.reached_at], [5, 4, null]);
      assert.deepEqual(await emailRow(a), { reserved_on: day, waiting_reason: null, waiting_until: null });
    });

    it('a message over the organization’s cap is parked until the day ends; a later smaller one still fits', async () => {
      const s = await insertSender(orm);
      const day = nextDay();
      const ids = [await message(s.owner, 2), await message(s.owner, 2), await message(s.owner, 1)];
      const limits = { organization: 3, domain: null };
      const parked = await reserve(
        day,
        null,
        ids.map((id) => m(id, s, limits)),
      );
      assert.deepEqual(parked, [{ id: ids[1], reason: 'organization_daily_cap', firstToday: true }]);
      const o = await counter('organization', s.organization.id, day);
      assert.equal(o.used, 3);
      assert.ok(o.reached_at, 'the cap is marked reached');
      const row = await emailRow(ids[1]);
      assert.deepEqual([row.reserved_on, row.waiting_reason, ms(row.waiting_until)], [null, 'organization_daily_cap', until.getTime()]);
      assert.equal((await emailRow(ids[2])).reserved_on, day);
    });

    it('the first cap in lock order names the reason: platform, then organization, then domain', async () => {
      const day = nextDay();
      const s = await insertSender(orm);
      const [p, o, d] = [await message(s.owner, 6), await message(s.owner, 4), await message(s.owner, 3)];
      const parked = await reserve(day, 5, [
        m(p, s, { organization: 1, domain: 1 }), // over every cap: the platform's is named
        m(o, s, { organization: 2, domain: 1 }),
        m(d, s, { organization: 10, domain: 2 }),
      ]);
      assert.deepEqual(
        parked.map((x) => [x.id, x.reason]),
        [
          [p, 'platform_daily_cap'],
          [o, 'organization_daily_cap'],
          [d, 'domain_daily_cap'],
        ],
      );
      assert.equal((await counter('platform', PLATFORM_SCOPE_ID, day)).used, 0);
    });

    it('without a platform limit the platform is not counted; null caps are not checked', async () => {
      const day = nextDay();
      const s = await insertSender(orm);
      const id = await message(s.owner, 4);
      assert.deepEqual(await reserve(day, null, [m(id, s)]), []);
      assert.equal((await counter('platform', PLATFORM_SCOPE_ID, day)).used, 0);
      assert.equal((await counter('domain', s.domain.id, day)).used, 4);
    });

    it('the cap is reported first once per day: a later pass parking at the same cap says so', async () => {
      const day = nextDay();
      const s = await insertSender(orm);
      const limits = { organization: 1, domain: null };
      const [a, b, c] = [await message(s.owner, 1), await message(s.owner, 1), await message(s.owner, 1)];
      const first = await reserve(day, null, [m(a, s, limits), m(b, s, limits)]);
      const second = await reserve(day, null, [m(c, s, limits)]);
      assert.deepEqual(first, [{ id: b, reason: 'organization_daily_cap', firstToday: true }]);
      assert.deepEqual(second, [{ id: c, reason: 'organization_daily_cap', firstToday: false }]);
    });

    it('a message no longer queued, or already reserved today, takes nothing and is not touched', async () => {
      const day = nextDay();
      const s = await insertSender(orm);
      const canceled = await message(s.owner, 3, { status: 'canceled' });
      const done = await message(s.owner, 3, { reserved_on: day });
      const fresh = await message(s.owner, 1);
      const limits = { organization: 1, domain: 1 };
      assert.deepEqual(await reserve(day, null, [m(canceled, s, limits), m(done, s, limits), m(fresh, s, limits)]), []);
      assert.equal((await counter('organization', s.organization.id, day)).used, 1);
      assert.equal((await emailRow(canceled)).reserved_on, null);
    });

    it('one organization’s cap never parks another organization’s mail', async () => {
      const day = nextDay();
      const s1 = await insertSender(orm);
      const s2 = await insertSender(orm);
      const a = await message(s1.owner, 2);
      const b = await message(s2.owner, 2);
      const parked = await reserve(day, null, [m(a, s1, { organization: 1, domain: null }), m(b, s2, { organization: 5, domain: null })]);
      assert.deepEqual(
        parked.map((x) => x.id),
        [a],
      );
      assert.equal((await counter('organization', s1.organization.id, day)).used, 0);
      assert.equal((await counter('organization', s2.organization.id, day)).used, 2);
    });

    /**
     * The race: outbox passes of several processes reserve mail of one organization at once. They
     * queue on its counter row, each deciding against what the others took: exactly the cap is
     * reserved, and the cap is reported first exactly once.
     */
    it('race: concurrent passes of one organization reserve exactly its cap, and report reaching it once', async () => {
      const day = nextDay();
      const s = await insertSender(orm);
      const limits = { organization: 5, domain: null };
      const chunks: ChunkMessage[][] = [];
      for (let i = 0; i < 4; i++) chunks.push([m(await message(s.owner, 1), s, limits), m(await message(s.owner, 1), s, limits)]);
      await inTransaction(orm, (em) =>
        ensureCounters(em, [
          { scope: 'organization', scopeId: s.organization.id, day, stage: null },
          { scope: 'domain', scopeId: s.domain.id, day, stage: null },
        ]),
      );
      const results = values(
        await releasedTogether(
          orm,
          [
            [
              'select 1 from send_counters where scope = $1 and scope_id = $2 and day = $3 for update',
              ['organization', s.organization.id, day],
            ],
          ],
          chunks.map((messages) => () => inTransaction(orm, (em) => reserveChunk(em, { day, until, platformLimit: null, messages }))),
        ),
      );
      const parked = results.flat();
      assert.equal(parked.length, 3, JSON.stringify(results));
      assert.equal(parked.filter((p) => p.firstToday).length, 1);
      assert.equal((await counter('organization', s.organization.id, day)).used, 5);
      const [stamped] = await sql(orm, `select count(*)::int as n from emails where organization_id = $1 and reserved_on = $2`, [
        s.organization.id,
        day,
      ]);
      assert.equal(stamped.n, 5, 'every reserved message counted once');
    });

    /** Passes whose chunks hold two organizations in opposite orders lock their counters in one order: no deadlock. */
    it('race: concurrent passes over two organizations in opposite orders never deadlock, and each cap holds', async () => {
      const day = nextDay();
      const s1 = await insertSender(orm);
      const s2 = await insertSender(orm);
      const limits = { organization: 2, domain: 3 };
      const chunks: ChunkMessage[][] = [];
      for (let i = 0; i < 6; i++) {
        const a = m(await message(s1.owner, 1), s1, limits);
        const b = m(await message(s2.owner, 1), s2, limits);
        chunks.push(i % 2 ? [a, b] : [b, a]);
      }
      await inTransaction(orm, (em) =>
        ensureCounters(
          em,
          [s1, s2].flatMap((s) => [
            { scope: 'organization', scopeId: s.organization.id, day, stage: null },
            { scope: 'domain', scopeId: s.domain.id, day, stage: null },
          ]),
        ),
      );
      const results = values(
        await releasedTogether(
          orm,
          [
            [
              `select 1 from send_counters where scope = 'domain' and scope_id = any($1) and day = $2 for update`,
              [[s1.domain.id, s2.domain.id], day],
            ],
          ],
          chunks.map((messages) => () => inTransaction(orm, (em) => reserveChunk(em, { day, until, platformLimit: null, messages }))),
        ),
      );
      assert.equal(results.flat().length, 8);
      assert.equal((await counter('organization', s1.organization.id, day)).used, 2);
      assert.equal((await counter('organization', s2.organization.id, day)).used, 2);
    });
  });
});
