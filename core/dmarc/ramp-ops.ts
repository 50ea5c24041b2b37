import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import { Domain, type DnsRecord } from '../../db/entities';
import { dmarcStats } from '../../db/sql/dmarc-reports';
import {
  clearDmarcRequest,
  insertDmarcRamp,
  readDmarcRamp,
  recordDmarcVerdict,
  refuseDmarcRequest,
  setDmarcRequest,
  setDmarcStep,
  stopDmarcRamp,
  type DmarcRampRequest,
  type DmarcRampRow,
  type DmarcVerdictRecord,
} from '../../db/sql/dmarc-ramps';
import { dkimRotationInProgress } from '../domains/dkim-keys';
import { operatorAudit } from '../limits/operator';
import {
  DMARC_GATE,
  dmarcAlignmentFallen,
  dmarcGate,
  dmarcRecordName,
  dmarcRecordValue,
  nextDmarcStep,
  previousDmarcStep,
  type DmarcStep,
} from './ramp';
import type { ApplyDmarcRequestResult, CheckDmarcGateResult } from '../../workflows/dmarc-ramp';

export interface RampDomain {
  id: string;
  organizationId: string;
  name: string;
}

export class DmarcRampRefused extends Error {
  constructor(readonly reason: 'no_return_path' | 'running' | 'not_running') {
    super(reason);
  }
}

const DAY_MS = 86_400_000;

/** The gate from the reports at the current step, and whether recent alignment fell. */
export async function dmarcVerdict(
  orm: Orm,
  ramp: Pick<DmarcRampRow, 'domain_id' | 'step' | 'step_since'>,
  now: Date,
): Promise<DmarcVerdictRecord> {
  const domainId = ramp.domain_id;
  const [atStep, recent, rotating] = await Promise.all([
    dmarcStats(orm, { domainId, from: new Date(ramp.step_since), to: now }),
    dmarcStats(orm, { domainId, from: new Date(now.getTime() - DMARC_GATE.recentDays * DAY_MS), to: now }),
    dkimRotationInProgress(orm, domainId),
  ]);
  const v = dmarcGate(ramp.step, atStep, rotating);
  return { holds: v.holds, reasons: v.reasons, days: v.days, oursRate: v.oursRate, fallen: dmarcAlignmentFallen(ramp.step, recent) };
}

/** Replaces the domain's DMARC record with the step's; the Cloudflare publisher follows `records`. */
async function publishStep(em: EntityManager, domainId: string, step: DmarcStep): Promise<Domain> {
  // Locked: a verification check writing `records` meanwhile retries on what this writes.
  const domain = await em.findOneOrFail(Domain, { id: domainId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  const record: DnsRecord = {
    purpose: 'dmarc',
    type: 'TXT',
    name: dmarcRecordName(domain.name),
    value: dmarcRecordValue(step, domain.returnPathHost!),
    required: false,
    observed: null,
    status: 'pending',
  };
  domain.records = [...domain.records.filter((r) => r.purpose !== 'dmarc'), record];
  return domain;
}

const audit = (d: { organizationId: string; id: string }, action: string, details: Record<string, unknown>, actor: string | null) =>
  operatorAudit(d.organizationId, action, { type: 'domain', id: d.id }, details, actor);

/**
 * Starts the ramp at p=none (the record added to the domain's), or a stopped ramp again at the step
 * it stopped at, under the new run id; audited. The caller starts the run after this commits.
 */
export async function startDmarcRamp(orm: Orm, domain: RampDomain, runId: string, actor: string, now = new Date()): Promise<void> {
  await orm.em.fork().transactional(async (em) => {
    const d = await em.findOneOrFail(Domain, { id: domain.id });
    if (!d.returnPathHost) throw new DmarcRampRefused('no_return_path');
    const started = await insertDmarcRamp(em, domain.id, runId, actor, now);
    if (!started) throw new DmarcRampRefused('running');
    const published = await publishStep(em, domain.id, started.step);
    const record = published.records.find((r) => r.purpose === 'dmarc')!;
    em.persist(
      started.restarted
        ? audit(domain, 'domain.dmarc_ramp_restarted', { step: started.step, record: record.value }, actor)
        : audit(domain, 'domain.dmarc_step_set', { from: null, to: 'none', record: record.value }, actor),
    );
  });
}

/** A run the ramp's row no longer names (the ramp was stopped and started again under another run). */
const superseded = (ramp: DmarcRampRow, runId: string | null | undefined) => !!runId && ramp.run_id !== runId;

/** The operator's advance, back or stop, recorded for the run to apply; refused when no ramp runs. */
export async function requestDmarcStep(
  orm: Orm,
  domain: RampDomain,
  request: DmarcRampRequest,
  actor: string,
  now = new Date(),
): Promise<void> {
  await orm.em.fork().transactional(async (em) => {
    if (!(await setDmarcRequest(em, domain.id, request, actor, now))) throw new DmarcRampRefused('not_running');
    em.persist(audit(domain, 'domain.dmarc_step_requested', { request }, actor));
  });
}

/** The daily check: the verdict recorded for the page. */
export async function checkDmarcGate(orm: Orm, domainId: string, now: Date, runId?: string | null): Promise<CheckDmarcGateResult> {
  const em = orm.em.fork();
  const ramp = await readDmarcRamp(em, domainId);
  if (!ramp || ramp.state !== 'running' || superseded(ramp, runId)) return { state: 'stopped', holds: false, requested: false };
  // Its domain deleted: the ramp stops with it (the run ends).
  if (!(await em.findOne(Domain, { id: domainId, deletedAt: null }, { fields: ['id'] }))) {
    await stopDmarcRamp(em, domainId, now);
    return { state: 'stopped', holds: false, requested: false };
  }
  const verdict = await dmarcVerdict(orm, ramp, now);
  await recordDmarcVerdict(em, domainId, verdict, now);
  return { state: 'running', holds: verdict.holds, requested: ramp.requested !== null };
}

/**
 * Applies the pending request. An advance is decided here, with the ramp row locked: the gate from
 * the reports as they are now, then a conditional step update; refused and recorded when it fails.
 */
export async function applyDmarcRequest(orm: Orm, domainId: string, now: Date, runId?: string | null): Promise<ApplyDmarcRequestResult> {
  return orm.em.fork().transactional(async (em) => {
    const ramp = await readDmarcRamp(em, domainId, true);
    if (!ramp || ramp.state !== 'running' || superseded(ramp, runId)) return { state: 'stopped', applied: 'none' };
    const domain = await em.findOneOrFail(Domain, { id: domainId }, { fields: ['organizationId', 'name'] });
    const by = ramp.requested_by;
    switch (ramp.requested) {
      case null:
        return { state: 'running', applied: 'none' };
      case 'stop':
        await stopDmarcRamp(em, domainId, now);
        em.persist(audit(domain, 'domain.dmarc_ramp_stopped', { step: ramp.step }, by));
        return { state: 'stopped', applied: 'stopped' };
      case 'back': {
        const to = previousDmarcStep(ramp.step);
        if (!to) {
          await clearDmarcRequest(em, domainId, now);
          return { state: 'running', applied: 'none' };
        }
        await setDmarcStep(em, domainId, ramp.step, to, now);
        const d = await publishStep(em, domainId, to);
        em.persist(audit(domain, 'domain.dmarc_step_set', { from: ramp.step, to, record: d.records.at(-1)!.value }, by));
        return { state: 'running', applied: 'back', by };
      }
      case 'advance': {
        const verdict = await dmarcVerdict(orm, ramp, now);
        const to = nextDmarcStep(ramp.step);
        if (!verdict.holds || !to) {
          await refuseDmarcRequest(em, domainId, verdict.reasons, by, now);
          await recordDmarcVerdict(em, domainId, verdict, now);
          em.persist(audit(domain, 'domain.dmarc_step_refused', { step: ramp.step, reasons: verdict.reasons }, by));
          return { state: 'running', applied: 'refused' };
        }
        await setDmarcStep(em, domainId, ramp.step, to, now);
        const d = await publishStep(em, domainId, to);
        em.persist(audit(domain, 'domain.dmarc_step_set', { from: ramp.step, to, record: d.records.at(-1)!.value }, by));
        return { state: 'running', applied: 'advanced', by };
      }
    }
  });
}

export function readRamp(orm: Orm, domainId: string): Promise<DmarcRampRow | null> {
  return readDmarcRamp(orm.em.fork(), domainId);
}

/** A ramp whose run could not start: stopped, so no request waits for a run that does not exist. */
export async function markDmarcRampStopped(orm: Orm, domainId: string, now = new Date()): Promise<void> {
  await stopDmarcRamp(orm.em.fork(), domainId, now);
}
