import assert from 'node:assert/strict';
import { parseProcStat, readStat, treeSeconds, type ProcStat } from '../../bench/proc-cpu';
import { cpuMs, cpuRatios, median, rateRatios, spread, type Round } from '../../bench/rounds';

/** A /proc/<pid>/stat line as Linux writes it: 52 fields, utime … cstime the 14th to 17th. */
function statLine(pid: number, comm: string, ppid: number, utime: number, stime: number, cutime: number, cstime: number): string {
  const rest = Array.from({ length: 35 }, (_, i) => String(i + 100)).join(' ');
  return `${pid} (${comm}) S ${ppid} ${pid} ${pid} 0 -1 4194560 1200 0 0 0 ${utime} ${stime} ${cutime} ${cstime} 20 0 1 0 ${rest}\n`;
}

describe('Bench: CPU time from /proc', () => {
  it('reads the parent and utime + stime, cutime + cstime, in seconds at 100 ticks a second', () => {
    assert.deepEqual(parseProcStat(statLine(4242, 'postgres', 17, 250, 50, 1000, 200)), {
      pid: 4242,
      comm: 'postgres',
      ppid: 17,
      seconds: 3,
      childSeconds: 12,
    });
  });

  it('counts the fields from the command name’s last parenthesis (names may hold spaces and parentheses)', () => {
    const s = parseProcStat(statLine(7, 'node (worker) x) y', 1, 7, 3, 0, 0));
    assert.equal(s.comm, 'node (worker) x) y');
    assert.equal(s.ppid, 1);
    assert.equal(s.seconds, 0.1);
    assert.equal(parseProcStat(statLine(7, 'a b', 1, 100, 0, 0, 0), 1000).seconds, 0.1, 'other tick rates');
  });

  it('refuses text that is not a stat line', () => {
    assert.throws(() => parseProcStat('hello'), /not a \/proc\/<pid>\/stat line/);
    assert.throws(() => parseProcStat('12 (x) S 1 2 3'), /field 14 is not a number/);
  });

  it("a tree's CPU: the root's, its descendants', and what each waited for of ended children; nothing of others", () => {
    const row = (pid: number, ppid: number, seconds: number, childSeconds = 0): [number, ProcStat] => [
      pid,
      { pid, comm: 'postgres', ppid, seconds, childSeconds },
    ];
    const table = new Map([
      row(1, 0, 100), // init: not in the tree
      row(10, 1, 2, 5), // the postmaster, 5 s of backends that exited
      row(11, 10, 1), // a backend
      row(12, 10, 0.5, 0.25), // the autovacuum launcher and its ended workers
      row(13, 12, 0.125), // a grandchild
      row(20, 1, 9), // another process
    ]);
    assert.equal(treeSeconds(table, 10), 2 + 5 + 1 + 0.5 + 0.25 + 0.125);
    assert.equal(treeSeconds(table, 99), 0, 'a process gone');
  });

  it('reads this process (Linux): its parent, and CPU that only grows', function () {
    if (process.platform !== 'linux') this.skip();
    const a = readStat(process.pid)!;
    assert.equal(a.ppid, process.ppid);
    const until = Date.now() + 50;
    while (Date.now() < until); // spin: at least a few ticks of CPU
    assert.ok(readStat(process.pid)!.seconds >= a.seconds);
    assert.equal(readStat(2 ** 22 + 1), null, 'no such process');
  });
});

describe('Bench: rounds', () => {
  const round = (messages: number, seconds: number, cpuSeconds: number): Round => ({
    requests: messages,
    errors: 0,
    firstError: '',
    seconds,
    rps: messages / seconds,
    p50: 1,
    p99: 2,
    messages,
    cpuSeconds,
    pgSeconds: cpuSeconds / 2,
  });

  it('ratios are taken round by round, and the median of the rounds is what is judged', () => {
    const row = [round(700, 1, 1.4), round(800, 1, 1.6), round(900, 1, 1.8)];
    const base = [round(1000, 1, 1), round(1000, 1, 1), round(1000, 1, 1)];
    assert.deepEqual(rateRatios(row, base), [0.7, 0.8, 0.9]);
    assert.deepEqual(cpuRatios(row, base), [0.5, 0.5, 0.5]);
    assert.equal(cpuMs(row[0]), 2);
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 2, 3]), 2.5);
    assert.equal(spread([0.7, 0.9, 0.8], 0, 100, '%'), '80% (70–90%)');
    assert.equal(spread([1.25], 2), '1.25');
    assert.equal(spread([NaN]), '–');
  });
});
