/**
 * CPU seconds of processes, read from /proc (Linux): what the bench's CPU-per-message figures
 * (bench/rounds.ts) and the Temporal phase (bench/temporal-cpu.ts) are made of. The parsing is
 * pure (parseProcStat); elsewhere than Linux the readers answer null.
 */
import fs from 'node:fs';

/** Linux's clock ticks a second (sysconf(_SC_CLK_TCK)), 100 on every platform Node runs Linux on. */
export const TICKS = 100;

/** One /proc/<pid>/stat line, the fields the bench reads. */
export interface ProcStat {
  pid: number;
  /** The command name (at most 15 characters): `postgres` for PostgreSQL's processes. */
  comm: string;
  ppid: number;
  /** utime + stime: the process's own CPU, seconds. */
  seconds: number;
  /** cutime + cstime: its exited children it waited for, seconds (PostgreSQL's ended backends). */
  childSeconds: number;
}

/**
 * Parses /proc/<pid>/stat (proc(5)): `pid (comm) state ppid …`, utime, stime, cutime and cstime
 * being fields 14 to 17 counted from pid = 1. The command may hold spaces and parentheses, so the
 * fields after it are counted from its last `)`.
 */
export function parseProcStat(line: string, ticks = TICKS): ProcStat {
  const close = line.lastIndexOf(')');
  const pid = Number(line.slice(0, line.indexOf(' ')));
  if (close < 0 || !Number.isInteger(pid)) throw new Error(`not a /proc/<pid>/stat line: ${line.slice(0, 80)}`);
  // Fields from the state (3) on: f[0] is field 3, so field k is f[k - 3].
  const f = line
    .slice(close + 2)
    .trim()
    .split(' ');
  const num = (field: number) => {
    const v = Number(f[field - 3]);
    if (!Number.isFinite(v)) throw new Error(`/proc/${pid}/stat: field ${field} is not a number`);
    return v;
  };
  return {
    pid,
    comm: line.slice(line.indexOf('(') + 1, close),
    ppid: num(4),
    seconds: (num(14) + num(15)) / ticks,
    childSeconds: (num(16) + num(17)) / ticks,
  };
}

/** Every process's /proc/<pid>/stat, by pid; null off Linux. */
export function procTable(): Map<number, ProcStat> | null {
  if (process.platform !== 'linux') return null;
  const table = new Map<number, ProcStat>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat) table.set(stat.pid, stat);
  }
  return table;
}

/** One process's /proc/<pid>/stat; null when it is gone (or off Linux). */
export function readStat(pid: number): ProcStat | null {
  try {
    return parseProcStat(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/**
 * A process's CPU with its descendants' (its own, its living descendants', and what every one of
 * them waited for of children that ended: a PostgreSQL backend that exited counts in the
 * postmaster's cutime).
 */
export function treeSeconds(table: Map<number, ProcStat>, root: number): number {
  const children = new Map<number, number[]>();
  for (const [pid, row] of table) {
    const siblings = children.get(row.ppid);
    if (siblings) siblings.push(pid);
    else children.set(row.ppid, [pid]);
  }
  let total = 0;
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop()!;
    const row = table.get(pid);
    if (row) total += row.seconds + row.childSeconds;
    stack.push(...(children.get(pid) ?? []));
  }
  return total;
}
