import type { Orm } from '../orm';
import type { Plan } from '../entities';
import type { PgTimestamp } from './pg-types';

/**
 * The console's overview and organizations pages (issue 38): what no API route answers, since the
 * API sees one organization at a time. Each statement reads an index range, never the table:
 * - organizations: the table is small (one row per tenant), ordered by today's use (send_counters' key);
 * - waiting mail: the two partial indexes of mail not yet handed to the engine (emails_parked_idx,
 *   emails_outbox_idx), which hold only that mail;
 * - rates and the hourly series: emails_live_sent_idx (Migration20261210000000_console_overview),
 *   live mail by sent_at carrying organization_id and status, so the 7-day window is an
 *   index-only scan. Test mail never counts (the spec: test messages never touch metrics), which
 *   is why the rates are read from the messages and not from email_events (which has no mode).
 */

export interface OrganizationRow {
  id: string;
  name: string;
  plan: Plan;
  daily_send_cap: number | null;
  postal_address: string | null;
  created_at: PgTimestamp;
  /** Recipients reserved today under the organization's cap. */
  used_today: number;
}

/**
 * A page of organizations (`limit` + 1 rows: one more means a next page). `organizationId`: only
 * that one (an organization admin). `byUsage`: today's busiest first (the overview), else by name.
 */
export function listOrganizations(
  orm: Orm,
  opts: { day: string; organizationId: string | null; byUsage: boolean; limit: number; offset: number },
): Promise<OrganizationRow[]> {
  return orm.em
    .fork()
    .getConnection()
    .execute<OrganizationRow[]>(
      `select o.id, o.name, o.plan, o.daily_send_cap, o.postal_address, o.created_at, coalesce(c.used, 0)::int as used_today
         from organizations o
         left join send_counters c on c.scope = 'organization' and c.scope_id = o.id and c.day = ?::date
        where (?::uuid is null or o.id = ?::uuid)
        order by ${opts.byUsage ? 'coalesce(c.used, 0) desc,' : ''} lower(o.name), o.id
        limit ? offset ?`,
      [opts.day, opts.organizationId, opts.organizationId, Math.trunc(opts.limit) + 1, Math.trunc(opts.offset)],
    );
}

/** Why live mail has not left yet: parked behind a daily cap (its waiting_reason), scheduled, or in the outbox. */
export type WaitingKind = 'platform_daily_cap' | 'organization_daily_cap' | 'domain_daily_cap' | 'scheduled' | 'outbox';

export interface WaitingRow {
  organization_id: string;
  reason: WaitingKind;
  count: number;
}

/** Queued live messages not yet handed to the engine, per organization (of `organizationIds`) and reason. */
export function waitingMail(orm: Orm, organizationIds: string[], now: Date): Promise<WaitingRow[]> {
  if (organizationIds.length === 0) return Promise.resolve([]);
  const ids = `{${organizationIds.join(',')}}`;
  return orm.em
    .fork()
    .getConnection()
    .execute<WaitingRow[]>(
      `select organization_id, waiting_reason as reason, count(*)::int as count
         from emails
        where waiting_reason is not null and status = 'queued' and mode = 'live' and organization_id = any(?::uuid[])
        group by 1, 2
       union all
       select organization_id, case when coalesce(scheduled_at, created_at) > ? then 'scheduled' else 'outbox' end, count(*)::int
         from emails
        where enqueued_at is null and waiting_reason is null and status = 'queued' and mode = 'live' and organization_id = any(?::uuid[])
        group by 1, 2`,
      [ids, now, ids],
    );
}

/** Live messages sent in a window, and what became of them (a message's status now). */
export interface Outcomes {
  sent: number;
  delivered: number;
  bounced: number;
  complained: number;
}

export interface SendingRates {
  lastHour: Outcomes;
  lastDay: Outcomes;
  lastWeek: Outcomes;
}

const none = (): Outcomes => ({ sent: 0, delivered: 0, bounced: 0, complained: 0 });
export const emptyRates = (): SendingRates => ({ lastHour: none(), lastDay: none(), lastWeek: none() });

/** A status counted into outcomes: a complaint came after a delivery, so it counts as delivered too. */
function add(o: Outcomes, status: string, n: number): void {
  o.sent += n;
  if (status === 'delivered' || status === 'complained') o.delivered += n;
  if (status === 'bounced') o.bounced += n;
  if (status === 'complained') o.complained += n;
}

/** Parameters: now ×4, the organization (or null) ×2. Exported for its plan's test (emails_live_sent_idx). */
export const SENDING_RATES = `
select organization_id, status,
       case when sent_at >= ?::timestamptz - interval '1 hour' then 0
            when sent_at >= ?::timestamptz - interval '24 hours' then 1 else 2 end as bucket,
       count(*)::int as count
  from emails
 where mode = 'live' and sent_at is not null
   and sent_at >= ?::timestamptz - interval '7 days' and sent_at <= ?::timestamptz
   and (?::uuid is null or organization_id = ?::uuid)
 group by 1, 2, 3`;

/**
 * Per organization (null: every one), the live messages sent in the last hour, 24 hours and 7
 * days before `now`, by what became of them: one index-only scan of the 7 days, grouped in SQL.
 */
export async function sendingRates(orm: Orm, organizationId: string | null, now: Date): Promise<Map<string, SendingRates>> {
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ organization_id: string; status: string; bucket: number; count: number }[]>(SENDING_RATES, [
      now,
      now,
      now,
      now,
      organizationId,
      organizationId,
    ]);
  const out = new Map<string, SendingRates>();
  for (const r of rows) {
    const rates = out.get(r.organization_id) ?? emptyRates();
    out.set(r.organization_id, rates);
    if (r.bucket === 0) add(rates.lastHour, r.status, r.count);
    if (r.bucket <= 1) add(rates.lastDay, r.status, r.count);
    add(rates.lastWeek, r.status, r.count);
  }
  return out;
}

export interface HourRow extends Outcomes {
  /** The hour's start (ISO). */
  hour: string;
}

/**
 * The last 24 hours before `now`, hour by hour (oldest first, every hour present): live messages
 * sent in that hour and what became of them. `organizationId` null: every organization.
 */
export async function hourlySending(orm: Orm, organizationId: string | null, now: Date): Promise<HourRow[]> {
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ hour: number; status: string; count: number }[]>(
      `select floor(extract(epoch from ?::timestamptz - sent_at) / 3600)::int as hour, status, count(*)::int as count
         from emails
        where mode = 'live' and sent_at is not null
          and sent_at > ?::timestamptz - interval '24 hours' and sent_at <= ?::timestamptz
          and (?::uuid is null or organization_id = ?::uuid)
        group by 1, 2`,
      [now, now, now, organizationId, organizationId],
    );
  // Hours counted back from now (0: the last 60 minutes), so the newest bar is always a full hour.
  const hours: HourRow[] = Array.from({ length: 24 }, (_, i) => ({
    hour: new Date(now.getTime() - (24 - i) * 3_600_000).toISOString(),
    ...none(),
  }));
  for (const r of rows) {
    const slot = hours[23 - Math.min(Math.max(r.hour, 0), 23)];
    add(slot, r.status, r.count);
  }
  return hours;
}
