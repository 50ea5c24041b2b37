import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Domain, Email, Organization, type KeyMode, type Plan } from '../../db/entities';
import type { Clock } from '../../core/clock';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { nextUtcMidnight, utcDay } from '../../core/limits/caps';
import { Outbox } from '../../worker/outbox';
import { SendCaps } from '../../worker/send-caps';
import { PLATFORM_SCOPE_ID } from '../../db/sql/reserve-send';
import { newDatabase } from '../support/pg';
import { RoomEngine } from '../support/room-engine';

const DAY_MS = 86_400_000;

/**
 * The daily caps at dispatch, on a real database with the outbox and the release step, under a
 * clock the test steps across UTC midnight. The engine is a recorder: what the outbox starts is
 * what would be sent. Each test runs on its own simulated days, so the platform's counter (one
 * per day for the whole database) starts empty for it.
 */
describe('Daily send caps: reserve at dispatch, park, release when the UTC day turns', function () {
  this.timeout(60_000);
  let orm: Orm;
  const silent = pino({ level: 'silent' });
  let dayOffset = 0;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_caps'));
    await migrate(orm);
  });
  after(async () => orm.close());
  beforeEach(async () => {
    // Each test starts with nothing waiting: the outbox and the release see every organization.
    await orm.em.fork().nativeUpdate(Email, {}, { enqueuedAt: new Date(), waitingReason: null, waitingUntil: null });
  });

  /** A clock a few seconds before a UTC midnight some days ahead (a fresh platform day per test). */
  function steppedClock(): Clock & { aheadMs: number; day(): string } {
    dayOffset += 3;
    const now = Date.now();
    const beforeMidnight = nextUtcMidnight(new Date(now + dayOffset * DAY_MS)).getTime() - 5_000;
    return {
      aheadMs: beforeMidnight - now,
      now() {
        return new Date(Date.now() + this.aheadMs);
      },
      day() {
        return utcDay(this.now());
      },
    };
  }

  interface Setup {
    orgId: string;
    domains: Domain[];
    keys: Record<KeyMode, string>;
    clock: ReturnType<typeof steppedClock>;
    engine: RoomEngine;
    caps: SendCaps;
    outbox: Outbox;
  }

  async function setup(
    opts: { plan?: Plan; cap?: number | null; platform?: number; domains?: number; warmup?: boolean } = {},
  ): Promise<Setup> {
    const org = await createOrganization(orm, `Caps ${Date.now()}`, opts.plan ?? 'standard');
    if (opts.cap !== undefined) await orm.em.fork().nativeUpdate(Organization, { id: org.id }, { dailySendCap: opts.cap });
    const domains: Domain[] = [];
    for (let i = 0; i < (opts.domains ?? 1); i++) {
      domains.push(
        await createDomain(orm, org.id, `d${i}-${org.id.slice(-12)}.example.test`, { verified: true, warmup: opts.warmup ?? true }),
      );
    }
    const keys = { live: '', test: '' } as Record<KeyMode, string>;
    for (const mode of ['live', 'test'] as const) {
      keys[mode] = hashToken((await createKey(orm, org.id, { name: mode, permission: 'send', mode, rateLimit: 1000 })).token);
    }
    const clock = steppedClock();
    const engine = new RoomEngine();
    engine.rooms = null;
    const caps = new SendCaps({ orm, platformDailyCap: opts.platform ?? 0, clock, log: silent });
    return { orgId: org.id, domains, keys, clock, engine, caps, outbox: new Outbox(orm, engine, silent, { caps, clock }) };
  }

  async function send(s: Setup, n: number, opts: { mode?: KeyMode; domain?: number; recipients?: number } = {}): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const to = Array.from({ length: opts.recipients ?? 1 }, (_, k) => `r${i}-${k}@example.com`);
      const prepared = prepareEmail(
        { from: `app@${s.domains[opts.domain ?? 0].name}`, to, subject: 's', text: 't' },
        { inBatch: false, now: new Date() },
      );
      const [r] = await acceptEmails(
        { orm, dispatch: () => undefined, store: new GroupStore(orm, silent) },
        { tokenHash: s.keys[opts.mode ?? 'live'] },
        [prepared],
        {
          cost: 1,
        },
      );
      if (r instanceof ServiceError || typeof r === 'symbol') assert.fail(String(r));
      ids.push(r.id);
    }
    return ids;
  }

  /** Outbox passes until nothing due is left (parked mail is not due). */
  async function drain(s: Setup): Promise<void> {
    for (let i = 0; i < 20; i++) {
      const pass = await s.outbox.runOnce();
      if (!pass.more) return;
    }
  }

  const started = (s: Setup) => s.engine.started.map((j) => j.emailId);
  const waiting = async (ids: string[]) =>
    (await orm.em.fork().find(Email, { id: { $in: ids } }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((e) => [
      e.id,
      e.waitingReason,
    ]);
  async function used(scope: string, scopeId: string, day: string): Promise<number | null> {
    const [row] = await orm.em
      .fork()
      .getConnection()
      .execute(`select used from send_counters where scope = ? and scope_id = ? and day = ?::date`, [scope, scopeId, day]);
    return row ? Number(row.used) : null;
  }

  it('the organization cap parks what does not fit (still queued, with when its day turns); the day turn releases it in creation order', async () => {
    const s = await setup({ plan: 'free', cap: 3 });
    const ids = await send(s, 5);
    await drain(s);
    assert.deepEqual(started(s), ids.slice(0, 3));
    assert.deepEqual(await waiting(ids), [
      [ids[0], null],
      [ids[1], null],
      [ids[2], null],
      [ids[3], 'organization_daily_cap'],
      [ids[4], 'organization_daily_cap'],
    ]);
    const parked = await orm.em.fork().findOneOrFail(Email, { id: ids[3] });
    assert.equal(parked.status, 'queued');
    assert.equal(parked.waitingUntil?.toISOString(), nextUtcMidnight(s.clock.now()).toISOString());
    assert.equal(await used('organization', s.orgId, s.clock.day()), 3);

    // Same day: a release pass wakes nothing, and nothing more starts.
    assert.equal(await s.caps.release(), 0);
    await drain(s);
    assert.equal(started(s).length, 3);

    // The clock crosses midnight: the release wakes the parked mail, oldest first, and the outbox reserves it on the new day.
    s.clock.aheadMs += 10_000;
    assert.equal(await s.caps.release(), 2);
    await drain(s);
    assert.deepEqual(started(s), ids);
    assert.deepEqual(await waiting(ids.slice(3)), [
      [ids[3], null],
      [ids[4], null],
    ]);
    assert.equal(await used('organization', s.orgId, s.clock.day()), 2);
  });

  it('the domain cap (warm-up stage 1: 200 a day) counts each recipient and holds only that domain; the lowest cap wins', async () => {
    const s = await setup({ domains: 2 });
    const first = await send(s, 5, { recipients: 50 });
    const other = await send(s, 2, { domain: 1, recipients: 50 });
    await drain(s);
    assert.deepEqual(started(s).sort(), [...first.slice(0, 4), ...other].sort(), 'the other domain goes on');
    assert.deepEqual((await waiting(first)).at(-1), [first[4], 'domain_daily_cap']);
    assert.equal(await used('domain', s.domains[0].id, s.clock.day()), 200);
    assert.equal(await used('organization', s.orgId, s.clock.day()), 300);
    // The next day the domain's held message goes out.
    s.clock.aheadMs += 10_000;
    assert.equal(await s.caps.release(), 1);
    await drain(s);
    assert.ok(started(s).includes(first[4]));
    assert.equal(await used('domain', s.domains[0].id, s.clock.day()), 50);

    // The organization's cap, lower than what the domain has left, now stops mail first.
    const low = await setup({ plan: 'free', domains: 1 });
    const many = await send(low, 2, { recipients: 50 });
    const last = await send(low, 1, { recipients: 50 });
    await drain(low);
    assert.deepEqual(started(low), many);
    assert.deepEqual(await waiting(last), [[last[0], 'organization_daily_cap']]);
  });

  it('a scheduled message due on a capped day parks like any other, and goes out the day after', async () => {
    const s = await setup({ plan: 'free', cap: 1 });
    const [now] = await send(s, 1);
    const due = new Date(s.clock.now().getTime() + 1_000);
    const prepared = prepareEmail(
      { from: `app@${s.domains[0].name}`, to: 'later@example.com', subject: 's', text: 't', scheduled_at: due.toISOString() },
      { inBatch: false, now: s.clock.now() },
    );
    const [r] = await acceptEmails(
      { orm, dispatch: () => undefined, store: new GroupStore(orm, silent) },
      { tokenHash: s.keys.live },
      [prepared],
      {
        cost: 1,
      },
    );
    if (r instanceof ServiceError || typeof r === 'symbol') assert.fail(String(r));
    await drain(s);
    assert.deepEqual(started(s), [now], 'not due yet: it waits in the outbox');
    s.clock.aheadMs += 2_000;
    await drain(s);
    assert.deepEqual(await waiting([r.id]), [[r.id, 'organization_daily_cap']]);
    s.clock.aheadMs += 10_000;
    await s.caps.release();
    await drain(s);
    assert.deepEqual(started(s), [now, r.id]);
  });

  it('the platform cap holds every organization; a message that does not fit takes nothing from any counter', async () => {
    const s = await setup({ platform: 3 });
    const ids = await send(s, 3);
    const big = await send(s, 1, { recipients: 2 });
    await drain(s);
    assert.deepEqual(started(s), ids);
    assert.deepEqual(await waiting(big), [[big[0], 'platform_daily_cap']]);
    assert.equal(await used('organization', s.orgId, s.clock.day()), 3, 'the parked message took nothing');
    assert.equal(await used('domain', s.domains[0].id, s.clock.day()), 3);
    s.clock.aheadMs += 10_000;
    assert.equal(await s.caps.release(), 1);
    await drain(s);
    assert.deepEqual(started(s), [...ids, ...big]);
    assert.equal(await used('platform', PLATFORM_SCOPE_ID, s.clock.day()), 2);
  });

  it('test mail ignores every cap and counts toward none', async () => {
    const s = await setup({ plan: 'free', cap: 1, platform: 1 });
    const ids = await send(s, 3, { mode: 'test' });
    await drain(s);
    assert.deepEqual(started(s), ids);
    assert.equal(await used('organization', s.orgId, s.clock.day()), null);
  });

  it('a canceled parked message leaves the park and is never reserved', async () => {
    const s = await setup({ plan: 'free', cap: 1 });
    const [sent, parked] = await send(s, 2);
    await drain(s);
    assert.deepEqual(started(s), [sent]);
    // What POST /emails/:id/cancel does (test/api/caps.test.ts runs it through the API).
    await orm.em
      .fork()
      .nativeUpdate(Email, { id: parked, status: 'queued' }, { status: 'canceled', waitingReason: null, waitingUntil: null });
    await drain(s);
    s.clock.aheadMs += 10_000;
    await s.caps.release();
    await drain(s);
    const row = await orm.em.fork().findOneOrFail(Email, { id: parked });
    assert.equal(row.status, 'canceled');
    assert.equal(row.reservedOn, null);
    assert.equal(await used('organization', s.orgId, s.clock.day()), null, 'nothing reserved on the new day');
  });

  it('warm-up moves up one stage after a good day, and not after a day with 3% hard bounces', async () => {
    const s = await setup({ domains: 2 });
    await send(s, 2, { recipients: 50 });
    const bad = await send(s, 2, { domain: 1, recipients: 50 });
    await drain(s);
    assert.equal(started(s).length, 4);
    // Three hard bounces on the second domain's 100 recipients of that day.
    for (const address of ['r0-0@example.com', 'r0-1@example.com', 'r0-2@example.com']) {
      await orm.em
        .fork()
        .getConnection()
        .execute(
          `insert into email_events (email_id, organization_id, type, recipient, at, bounce_type) values (?, ?, 'bounced', ?, now(), 'hard')`,
          [bad[0], s.orgId, address],
        );
    }
    // Next UTC day, first dispatch: the rule runs once per domain.
    s.clock.aheadMs += 10_000;
    await send(s, 1);
    await send(s, 1, { domain: 1 });
    await drain(s);
    const stages = await orm.em.fork().find(Domain, { id: { $in: s.domains.map((d) => d.id) } });
    const stageOf = (id: string) => stages.find((d) => d.id === id)!.warmupStage;
    assert.equal(stageOf(s.domains[0].id), 2, '100 of 200 sent, no bounces: stage 2 (500 a day)');
    assert.equal(stageOf(s.domains[1].id), 1, '3% hard bounces: stays at stage 1');

    // A day under half its stage does not advance either: the first domain sent 1 of 500 today.
    s.clock.aheadMs += DAY_MS;
    await send(s, 1);
    await drain(s);
    assert.equal((await orm.em.fork().findOneOrFail(Domain, { id: s.domains[0].id })).warmupStage, 2);
  });

  it('parking takes no queue room: one pass parks a capped backlog, and the log says the cap was reached once', async () => {
    const s = await setup({ plan: 'free', cap: 1 });
    const lines: { msg: string; reason?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    s.caps = new SendCaps({ orm, platformDailyCap: 0, clock: s.clock, log });
    s.outbox = new Outbox(orm, s.engine, silent, { caps: s.caps, clock: s.clock });
    s.engine.room = async () => 2;
    const ids = await send(s, 30);
    await s.outbox.runOnce();
    assert.deepEqual(started(s), ids.slice(0, 1));
    assert.equal((await waiting(ids)).filter(([, r]) => r === 'organization_daily_cap').length, 29);
    await send(s, 3);
    await drain(s);
    assert.deepEqual(
      lines.filter((l) => l.msg.startsWith('daily send cap reached')).map((l) => l.reason),
      ['organization_daily_cap'],
    );
  });

  it('counters stay exact, and passes never deadlock, when several outboxes (two connection pools) reserve at once for two organizations', async () => {
    const s = await setup({ plan: 'free', cap: 37, warmup: false });
    const s2 = await setup({ plan: 'free', cap: 23, warmup: false });
    const ids: string[] = [];
    const ids2: string[] = [];
    // Alternating, so chunks of 3 take the two organizations in either order (o1 o2 o1, o2 o1 o2).
    for (let i = 0; i < 40; i++) {
      ids.push(...(await send(s, 1)));
      ids2.push(...(await send(s2, 1)));
    }
    const other = await openOrm(orm.config.get('clientUrl')!);
    // Each pass claims 3 messages (SKIP LOCKED: disjoint ones), so 20 passes reserve against the same counters at once.
    s.engine.room = async () => 3;
    try {
      const outboxes = [s.outbox, new Outbox(other, s.engine, silent, { caps: s.caps, clock: s.clock })];
      await Promise.all(Array.from({ length: 20 }, (_, i) => outboxes[i % 2].runOnce()));
      await drain(s);
    } finally {
      await other.close();
    }
    assert.equal(new Set(started(s)).size, 37 + 23);
    assert.equal(started(s).length, 37 + 23, 'each started once');
    assert.equal(await used('organization', s.orgId, s.clock.day()), 37);
    assert.equal(await used('organization', s2.orgId, s.clock.day()), 23);
    assert.equal((await waiting(ids)).filter(([, r]) => r === 'organization_daily_cap').length, 3);
    assert.equal((await waiting(ids2)).filter(([, r]) => r === 'organization_daily_cap').length, 17);
  });

  /** Counts the reserving statements (the one that locks counters) the outbox runs while `fn` does. */
  async function reservingStatements(fn: () => Promise<void>): Promise<number> {
    const conn = orm.em.getConnection();
    const execute = conn.execute;
    let n = 0;
    conn.execute = ((...args: Parameters<typeof execute>) => {
      if (typeof args[0] === 'string' && args[0].includes('for update of c')) n += 1;
      return execute.apply(conn, args);
    }) as typeof execute;
    try {
      await fn();
    } finally {
      conn.execute = execute;
    }
    return n;
  }

  it('one chunk of one organization: one reserving statement admits the first messages in claim order, checked one by one against the running total, and parks the rest', async () => {
    const s = await setup({ plan: 'free', cap: 10, warmup: false });
    const lines: { msg: string; reason?: string; scopeId?: string | null }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    s.caps = new SendCaps({ orm, platformDailyCap: 0, clock: s.clock, log });
    s.outbox = new Outbox(orm, s.engine, silent, { caps: s.caps, clock: s.clock });
    // A minute's margin before midnight: the whole test is one day.
    s.clock.aheadMs -= 60_000;
    const same = await send(s, 8, { recipients: 2 });
    assert.equal(
      await reservingStatements(async () => void (await s.outbox.runOnce())),
      1,
      'one statement for the chunk, not one per message',
    );
    assert.deepEqual(started(s), same.slice(0, 5));
    assert.deepEqual(await waiting(same), [
      ...same.slice(0, 5).map((id) => [id, null]),
      ...same.slice(5).map((id) => [id, 'organization_daily_cap']),
    ]);
    assert.equal(await used('organization', s.orgId, s.clock.day()), 10);
    assert.equal(await used('domain', s.domains[0].id, s.clock.day()), 10);

    // Mixed sizes on a fresh day: 3 + 4 = 7; 5 would make 12 (parked); 2 makes 9 and 1 makes 10 (each
    // checked against what the earlier ones took); 4 would make 14 (parked).
    s.clock.aheadMs += DAY_MS;
    lines.length = 0;
    const mixed: string[] = [];
    for (const n of [3, 4, 5, 2, 1, 4]) mixed.push(...(await send(s, 1, { recipients: n })));
    await s.outbox.runOnce();
    assert.deepEqual(started(s).slice(5), [mixed[0], mixed[1], mixed[3], mixed[4]]);
    assert.deepEqual(await waiting(mixed), [
      [mixed[0], null],
      [mixed[1], null],
      [mixed[2], 'organization_daily_cap'],
      [mixed[3], null],
      [mixed[4], null],
      [mixed[5], 'organization_daily_cap'],
    ]);
    assert.equal(await used('organization', s.orgId, s.clock.day()), 10);
    const reserved = await orm.em.fork().find(Email, { id: { $in: mixed } });
    assert.deepEqual(reserved.filter((e) => e.reservedOn === s.clock.day()).length, 4, 'only the admitted ones are stamped with the day');
    assert.deepEqual(
      lines.filter((l) => l.msg.startsWith('daily send cap reached')).map((l) => [l.reason, l.scopeId]),
      [['organization_daily_cap', s.orgId]],
      'logged once for the two parked messages',
    );
  });

  it('a chunk of two organizations, four domains and every cap gives what reserving each message in turn gives', async () => {
    const s = await setup({ plan: 'standard', cap: 300, domains: 2, platform: 260 });
    const s2 = await setup({ plan: 'free', domains: 2 });
    const lines: { msg: string; reason?: string; scopeId?: string | null }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    s.caps = new SendCaps({ orm, platformDailyCap: 260, clock: s.clock, log });
    s.outbox = new Outbox(orm, s.engine, silent, { caps: s.caps, clock: s.clock });
    s.clock.aheadMs -= 60_000;
    const day = s.clock.day();
    // Some of the day is used already: the walk starts from the counters, not from zero.
    await orm.em
      .fork()
      .getConnection()
      .execute(
        `insert into send_counters (scope, scope_id, day, used, warmup_stage) values
           ('organization', ?, ?::date, 100, null), ('domain', ?, ?::date, 120, 1), ('domain', ?, ?::date, 100, 1)`,
        [s.orgId, day, s.domains[0].id, day, s.domains[1].id, day],
      );
    const plan: [Setup, number, number][] = [
      [s, 0, 30],
      [s2, 0, 40],
      [s, 1, 50],
      [s, 0, 50],
      [s2, 1, 20],
      [s, 0, 20],
      [s, 1, 50],
      [s2, 0, 30],
      [s, 1, 50],
      [s, 0, 10],
      [s2, 1, 20],
      [s, 1, 40],
      [s, 0, 25],
      [s2, 1, 10],
      [s2, 0, 1],
    ];
    const sent: { id: string; org: string; dom: string; n: number }[] = [];
    for (const [who, d, n] of plan) {
      const [id] = await send(who, 1, { domain: d, recipients: n });
      sent.push({ id, org: who.orgId, dom: who.domains[d].id, n });
    }
    // One canceled meanwhile and one reserved today already (a pass that crashed after reserving): both start, taking nothing.
    const [canceled] = await send(s, 1, { recipients: 5 });
    await orm.em.fork().nativeUpdate(Email, { id: canceled }, { status: 'canceled' });
    const [again] = await send(s2, 1, { recipients: 5 });
    await orm.em.fork().nativeUpdate(Email, { id: again }, { reservedOn: day });

    // The reference: each message in turn, by organization then domain (uuid order), each group in claim order.
    const claimOrder: string[] = (
      await orm.em
        .fork()
        .getConnection()
        .execute(`select id from emails where id = any(?::uuid[]) order by coalesce(scheduled_at, created_at), id`, [
          `{${sent.map((m) => m.id).join(',')}}`,
        ])
    ).map((r) => String(r.id));
    const ordered = claimOrder
      .map((id) => sent.find((m) => m.id === id)!)
      .sort((a, b) => (a.org === b.org ? (a.dom < b.dom ? -1 : a.dom > b.dom ? 1 : 0) : a.org < b.org ? -1 : 1));
    const usedNow = new Map<string, number>([
      ['platform', 0],
      [s.orgId, 100],
      [s.domains[0].id, 120],
      [s.domains[1].id, 100],
    ]);
    const limit = new Map<string, number>([
      ['platform', 260],
      [s.orgId, 300],
      [s2.orgId, 100],
      ...[...s.domains, ...s2.domains].map((d) => [d.id, 200] as [string, number]),
    ]);
    const expected = new Map<string, string | null>();
    const reachedFirst: [string, string | null][] = [];
    for (const m of ordered) {
      const scopes: [string, string, string | null][] = [
        ['platform', 'platform', null],
        ['organization', m.org, m.org],
        ['domain', m.dom, m.dom],
      ];
      const over = scopes.find(([, key]) => (usedNow.get(key) ?? 0) + m.n > limit.get(key)!);
      if (over) {
        expected.set(m.id, `${over[0]}_daily_cap`);
        if (!reachedFirst.some(([r, id]) => r === `${over[0]}_daily_cap` && id === over[2]))
          reachedFirst.push([`${over[0]}_daily_cap`, over[2]]);
      } else {
        expected.set(m.id, null);
        for (const [, key] of scopes) usedNow.set(key, (usedNow.get(key) ?? 0) + m.n);
      }
    }
    // Whichever order the uuids put the organizations and domains in, the case reaches every cap.
    assert.deepEqual(new Set([...expected.values()]), new Set([null, 'platform_daily_cap', 'organization_daily_cap', 'domain_daily_cap']));

    assert.equal(await reservingStatements(async () => void (await s.outbox.runOnce())), 1);
    assert.deepEqual(new Map((await waiting(sent.map((m) => m.id))).map(([id, r]) => [id, r])), expected);
    assert.deepEqual(new Set(started(s)), new Set([...sent.filter((m) => expected.get(m.id) === null).map((m) => m.id), canceled, again]));
    for (const [key, scope] of [
      ['platform', 'platform'],
      [s.orgId, 'organization'],
      [s2.orgId, 'organization'],
      ...[...s.domains, ...s2.domains].map((d) => [d.id, 'domain']),
    ] as [string, string][]) {
      assert.equal(await used(scope, key === 'platform' ? PLATFORM_SCOPE_ID : key, day), usedNow.get(key) ?? 0, `${scope} ${key}`);
    }
    const [row] = await orm.em
      .fork()
      .getConnection()
      .execute(`select count(*)::int as n from send_counters where day = ?::date and reached_at is not null`, [day]);
    assert.equal(row.n, reachedFirst.length, 'reached_at set on each cap reached, once');
    assert.deepEqual(
      new Set(lines.filter((l) => l.msg.startsWith('daily send cap reached')).map((l) => JSON.stringify([l.reason, l.scopeId]))),
      new Set(reachedFirst.map((r) => JSON.stringify(r))),
    );
    assert.equal(lines.filter((l) => l.msg.startsWith('daily send cap reached')).length, reachedFirst.length);
  });
  describe('under the platform send rate (8 a second: windows of 2 every 250 ms)', () => {
    const WINDOW_MS = 250;
    /** Just after a window opens, so a pass's starts all fall in one window. */
    const windowStart = () => new Promise((r) => setTimeout(r, WINDOW_MS - (Date.now() % WINDOW_MS) + 5));
    const rated = (s: Setup) => new Outbox(orm, s.engine, silent, { caps: s.caps, clock: s.clock, sendRatePerSecond: 8 });
    const reserved = async (ids: string[]) =>
      (await orm.em.fork().find(Email, { id: { $in: ids } })).filter((e) => e.reservedOn !== null).length;

    it("a backlog the rate holds back is claimed a window's share at a time: the mail still waiting is neither reserved nor locked by each pass", async () => {
      const s = await setup({ cap: null });
      const ids = await send(s, 30);
      const outbox = rated(s);
      await windowStart();
      const pass = await outbox.runOnce();
      assert.deepEqual(started(s), ids.slice(0, 2));
      assert.equal(pass.full, true, 'a throttled pass looks again soon');
      assert.equal(await reserved(ids), 2, 'only what started took its allowances');
      assert.equal(await used('organization', s.orgId, s.clock.day()), 2);
      for (let i = 0; i < 40 && started(s).length < ids.length; i++) {
        await windowStart();
        await outbox.runOnce();
        assert.equal(await reserved(ids), started(s).length, 'no pass reserves more than it starts');
      }
      assert.deepEqual(started(s), ids);
    });

    it("a capped backlog under the rate is still parked whole, not a window's share at a time", async () => {
      const s = await setup({ plan: 'free', cap: 3 });
      const ids = await send(s, 40);
      const outbox = rated(s);
      for (let i = 0; i < 4; i++) {
        await windowStart();
        await outbox.runOnce();
      }
      assert.deepEqual(started(s), ids.slice(0, 3));
      const parked = (await waiting(ids)).filter(([, reason]) => reason === 'organization_daily_cap');
      assert.equal(parked.length, 37, 'every message over the cap is parked within a few windows');
    });
  });
});
