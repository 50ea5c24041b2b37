/**
 * The DMARC policy ramp, pure: the steps, the record each step publishes, and the gate that
 * decides whether the next step may be offered. The database side is core/dmarc/ramp-ops.ts.
 */

export type DmarcStep = 'none' | 'quarantine' | 'reject';
export const DMARC_STEPS: readonly DmarcStep[] = ['none', 'quarantine', 'reject'];

export const isDmarcStep = (s: unknown): s is DmarcStep => typeof s === 'string' && (DMARC_STEPS as readonly string[]).includes(s);
export const nextDmarcStep = (s: DmarcStep): DmarcStep | null => DMARC_STEPS[DMARC_STEPS.indexOf(s) + 1] ?? null;
export const previousDmarcStep = (s: DmarcStep): DmarcStep | null => DMARC_STEPS[DMARC_STEPS.indexOf(s) - 1] ?? null;

export const dmarcRecordName = (domain: string) => `_dmarc.${domain}`;
export const dmarcReportAddress = (returnPathHost: string) => `dmarc-reports@${returnPathHost}`;

/**
 * The record of a step, read the same by RFC 7489 and DMARCbis receivers: no `pct` (DMARCbis
 * dropped it; absent means 100% under RFC 7489 §6.3) and no `t=y` (DMARCbis's testing flag, which
 * RFC 7489 receivers ignore, so the two would apply different policies). adkim/aspf are left out:
 * relaxed is the default under both. The rua host is a subdomain of the domain, so no external
 * destination verification record (RFC 7489 §7.1) is needed.
 */
export const dmarcRecordValue = (step: DmarcStep, returnPathHost: string) =>
  `v=DMARC1; p=${step}; rua=mailto:${dmarcReportAddress(returnPathHost)}`;

/** The gate's thresholds; docs/domains.md states them. */
export const DMARC_GATE = {
  /** Distinct UTC days with reports at the current step. */
  minDays: 14,
  /** This service's mail aligned at least this share. */
  oursAligned: 0.995,
  /** A source above this share of the volume must pass or be marked unauthorized. */
  sourceShare: 0.01,
  /** A source "passes" when at least this share of its mail is aligned (forwarders break a few). */
  sourcePasses: 0.99,
  /** Alignment fallen: measured over this many recent days, once past `none`. */
  recentDays: 7,
} as const;

export interface GateSource {
  sourceIp: string;
  count: number;
  aligned: number;
  ours: boolean;
  unauthorized: boolean;
}

export interface GateStats {
  days: number;
  oursTotal: number;
  oursAligned: number;
  sources: GateSource[];
}

export interface GateVerdict {
  /** The next step may be offered (and an advance applied). */
  holds: boolean;
  /** Each unmet condition, in words for the page; empty when it holds. */
  reasons: string[];
  days: number;
  /** This service's aligned share, null without any of its mail in the reports. */
  oursRate: number | null;
  /** Sources above the share that neither pass nor are marked unauthorized. */
  failingSources: string[];
}

const pct = (r: number) => `${+(r * 100).toFixed(2)}%`;

/** The gate for a step forward from `step`, over the reports received since the step was set. */
export function dmarcGate(step: DmarcStep, stats: GateStats, dkimRotationInProgress: boolean): GateVerdict {
  const reasons: string[] = [];
  if (!nextDmarcStep(step)) reasons.push('p=reject is the last step.');
  if (stats.days < DMARC_GATE.minDays) reasons.push(`${stats.days} of ${DMARC_GATE.minDays} days of reports at p=${step}.`);
  const oursRate = stats.oursTotal > 0 ? stats.oursAligned / stats.oursTotal : null;
  if (oursRate === null) reasons.push("No report shows this service's mail yet.");
  else if (oursRate < DMARC_GATE.oursAligned)
    reasons.push(`This service's mail is ${pct(oursRate)} aligned (at least ${pct(DMARC_GATE.oursAligned)} needed).`);
  const total = stats.sources.reduce((n, s) => n + s.count, 0);
  const failingSources = stats.sources
    .filter((s) => total > 0 && s.count / total > DMARC_GATE.sourceShare)
    .filter((s) => !s.unauthorized && s.aligned / s.count < DMARC_GATE.sourcePasses)
    .map((s) => s.sourceIp);
  if (failingSources.length)
    reasons.push(
      `Sources above ${pct(DMARC_GATE.sourceShare)} of the volume neither pass nor are marked unauthorized: ${failingSources.join(', ')}.`,
    );
  if (dkimRotationInProgress) reasons.push('A DKIM key rotation is in progress.');
  return { holds: reasons.length === 0, reasons, days: stats.days, oursRate, failingSources };
}

/** Past `none`, this service's recent mail falling below the gate's alignment: the page proposes the step back. */
export function dmarcAlignmentFallen(step: DmarcStep, recent: GateStats): boolean {
  if (step === 'none' || recent.oursTotal === 0) return false;
  return recent.oursAligned / recent.oursTotal < DMARC_GATE.oursAligned;
}
