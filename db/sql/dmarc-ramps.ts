import type { EntityManager } from '@mikro-orm/postgresql';
import { runSql } from './run';
import type { PgTimestamp } from './pg-types';

export type DmarcRampStep = 'none' | 'quarantine' | 'reject';
export type DmarcRampRequest = 'advance' | 'back' | 'stop';

/** The gate's verdict as recorded for the page. */
export interface DmarcVerdictRecord {
  holds: boolean;
  reasons: string[];
  days: number;
  oursRate: number | null;
  /** This service's recent alignment fell below the gate past `none`: the page proposes the step back. */
  fallen: boolean;
}

export interface DmarcRampRow {
  domain_id: string;
  step: DmarcRampStep;
  step_since: PgTimestamp;
  run_id: string | null;
  state: 'running' | 'stopped';
  started_by: string | null;
  requested: DmarcRampRequest | null;
  requested_by: string | null;
  requested_at: PgTimestamp | null;
  verdict: DmarcVerdictRecord | null;
  verdict_at: PgTimestamp | null;
  refusal: { reasons: string[]; by: string | null } | null;
  refusal_at: PgTimestamp | null;
  updated_at: PgTimestamp;
}

const run = runSql;

export async function readDmarcRamp(em: EntityManager, domainId: string, forUpdate = false): Promise<DmarcRampRow | null> {
  const rows = await run<DmarcRampRow>(em, `select * from dmarc_ramps where domain_id = ?${forUpdate ? ' for update' : ''}`, [domainId]);
  return rows[0] ?? null;
}

/**
 * A new ramp at p=none, or a stopped one running again at the step it stopped at (under a new run
 * id, its old verdict and refusal cleared); null when the domain's ramp is running (another
 * operator's start won). `restarted`: the row was there.
 */
export async function insertDmarcRamp(
  em: EntityManager,
  domainId: string,
  runId: string,
  by: string,
  now: Date,
): Promise<{ step: DmarcRampStep; restarted: boolean } | null> {
  const rows = await run<{ step: DmarcRampStep; restarted: boolean }>(
    em,
    `insert into dmarc_ramps (domain_id, step, step_since, run_id, started_by, updated_at) values (?, 'none', ?, ?, ?, ?)
      on conflict (domain_id) do update set run_id = excluded.run_id, state = 'running', started_by = excluded.started_by,
        requested = null, requested_by = null, requested_at = null, verdict = null, verdict_at = null,
        refusal = null, refusal_at = null, updated_at = excluded.updated_at
      where dmarc_ramps.state = 'stopped'
      returning step, (xmax <> 0) as restarted`,
    [domainId, now, runId, by, now],
  );
  return rows[0] ?? null;
}

/** The operator's request, kept until the run applies it; a later request replaces an unapplied one. */
export async function setDmarcRequest(
  em: EntityManager,
  domainId: string,
  request: DmarcRampRequest,
  by: string,
  now: Date,
): Promise<boolean> {
  const rows = await run<{ domain_id: string }>(
    em,
    `update dmarc_ramps set requested = ?, requested_by = ?, requested_at = ?, updated_at = ?
      where domain_id = ? and state = 'running' returning domain_id`,
    [request, by, now, now, domainId],
  );
  return rows.length === 1;
}

export async function setDmarcStep(
  em: EntityManager,
  domainId: string,
  from: DmarcRampStep,
  to: DmarcRampStep,
  now: Date,
): Promise<boolean> {
  const rows = await run<{ domain_id: string }>(
    em,
    `update dmarc_ramps set step = ?, step_since = ?, requested = null, requested_by = null, requested_at = null,
      verdict = null, verdict_at = null, updated_at = ? where domain_id = ? and step = ? and state = 'running' returning domain_id`,
    [to, now, now, domainId, from],
  );
  return rows.length === 1;
}

export async function refuseDmarcRequest(
  em: EntityManager,
  domainId: string,
  reasons: string[],
  by: string | null,
  now: Date,
): Promise<void> {
  await run(
    em,
    `update dmarc_ramps set refusal = ?::jsonb, refusal_at = ?, requested = null, requested_by = null, requested_at = null, updated_at = ?
      where domain_id = ?`,
    [JSON.stringify({ reasons, by }), now, now, domainId],
  );
}

export async function clearDmarcRequest(em: EntityManager, domainId: string, now: Date): Promise<void> {
  await run(em, `update dmarc_ramps set requested = null, requested_by = null, requested_at = null, updated_at = ? where domain_id = ?`, [
    now,
    domainId,
  ]);
}

export async function stopDmarcRamp(em: EntityManager, domainId: string, now: Date): Promise<void> {
  await run(
    em,
    `update dmarc_ramps set state = 'stopped', requested = null, requested_by = null, requested_at = null, updated_at = ? where domain_id = ?`,
    [now, domainId],
  );
}

export async function recordDmarcVerdict(em: EntityManager, domainId: string, verdict: DmarcVerdictRecord, now: Date): Promise<void> {
  await run(em, `update dmarc_ramps set verdict = ?::jsonb, verdict_at = ?, updated_at = ? where domain_id = ?`, [
    JSON.stringify(verdict),
    now,
    now,
    domainId,
  ]);
}
