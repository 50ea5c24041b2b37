import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** What one attempt needs: the delivery's state, its endpoint and the event body. */
export interface AttemptRow {
  status: string;
  run: number;
  /** Attempts made in this run (a batch's first attempt counts). */
  run_attempts: number;
  endpoint_id: string;
  url: string;
  enabled: boolean;
  secret_enc: string;
  /** The rotated-out secret while it still signs (24 h after a rotation). */
  previous_secret_enc: string | null;
  body: string;
}

const LOAD: PreparedStatement = {
  name: 'load_webhook_attempt_v2',
  text: `
    select d.status, d.run, d.run_attempts, d.endpoint_id, w.url, w.enabled, w.secret_enc,
           case when w.previous_secret_until > now() then w.previous_secret_enc end as previous_secret_enc,
           e.payload::text as body
      from webhook_deliveries d
      join webhook_endpoints w on w.id = d.endpoint_id
      join webhook_events e on e.id = d.event_id
     where d.id = $1`,
};

/** The delivery about to be attempted, or null when it (or its endpoint) was deleted. */
export async function loadWebhookAttempt(orm: Orm, deliveryId: string): Promise<AttemptRow | null> {
  const [row] = await runPrepared<AttemptRow>(orm, LOAD, [deliveryId]);
  return row ?? null;
}

export interface AttemptRecord {
  deliveryId: string;
  run: number;
  /** A POST was made (false: the endpoint was disabled, nothing was sent). */
  attempted: boolean;
  succeeded: boolean;
  /** 410 Gone: the endpoint is disabled at once. */
  gone: boolean;
  statusCode: number | null;
  error: string | null;
  response: string | null;
  /** Wait before the next attempt after a failure; null: this was the last one. */
  retryInMs: number | null;
  /**
   * A batch's first attempt: when it failed with attempts left, the delivery goes back to the
   * dispatcher (enqueued_at cleared), which continues it as a WebhookDelivery run.
   */
  handBack?: boolean;
  /**
   * The workflow's time at the attempt (Temporal): next_attempt_at and the failure streak
   * (failing_since, the 5 days) are reckoned from it, so they follow the clock the workflow waits
   * on, which a time-skipping test server moves ahead of the database's. Absent: now().
   */
  at?: Date | null;
}

export interface RecordedAttempt {
  status: 'pending' | 'succeeded' | 'failed';
  next_attempt_ms: number | null;
  /** Why this attempt disabled the endpoint (`gone`, `failing`), or null. */
  disabled: string | null;
  endpoint_id: string;
  /** Given back to the dispatcher (a batch's first attempt that failed with attempts left). */
  handed_back: boolean;
}

/** Why this attempt disables endpoint `w` (null: it does not): 410 Gone, or failing for 5 days. */
const DISABLING = `case when not $3 or $4 or not w.enabled then null
                        when $5 then 'gone'
                        when w.failing_since <= coalesce($11::timestamptz, now()) - interval '5 days' then 'failing' end`;

/**
 * Records an attempt in one statement: the delivery (only if still pending in this run, so a
 * superseded run records nothing), the endpoint's failure streak, and, when this attempt
 * disables the endpoint (410 Gone, or failing for 5 days), the endpoint and an audit entry with
 * the reason. A success on a healthy endpoint writes the delivery only: the endpoint row, shared
 * by every concurrent attempt, is not touched on the hot path.
 */
const RECORD: PreparedStatement = {
  // v3: $11, the workflow's time, stands in for now() where the schedule and the failure streak are reckoned.
  // v4: the endpoint is disabled (and audited) once, by the attempt that finds it enabled under its row lock.
  name: 'record_webhook_attempt_v4',
  text: `
    with d as (
      update webhook_deliveries set
        attempts = attempts + $3::boolean::int,
        run_attempts = run_attempts + 1,
        enqueued_at = case when $10 and not ($4 or $9::int is null or $5) then null else enqueued_at end,
        status = case when $4 then 'succeeded' when $9::int is null or $5 then 'failed' else 'pending' end,
        last_status_code = $6, last_error = $7, last_response = $8,
        next_attempt_at = case when $4 or $9::int is null or $5 then null
                           else coalesce($11::timestamptz, now()) + make_interval(secs => $9::int / 1000.0) end,
        updated_at = now()
       where id = $1 and run = $2 and status = 'pending'
      returning endpoint_id, status, next_attempt_at, enqueued_at
    ), seen as (
      select w.id, w.organization_id, w.failing_since, ${DISABLING} as disabling
        from webhook_endpoints w join d on d.endpoint_id = w.id
    ), locked as (
      -- Only an attempt that may disable the endpoint locks its row, and decides again on the row
      -- as it is once the lock is held: of concurrent attempts that would disable it, one does (and
      -- writes the audit entry); a success or an ordinary failure takes no lock.
      select ${DISABLING} as disabling
        from webhook_endpoints w join seen on seen.id = w.id
       where seen.disabling is not null
         for update of w
    ), c as (
      select seen.id, seen.organization_id, seen.failing_since,
             case when seen.disabling is not null then (select locked.disabling from locked) end as disabling
        from seen
    ), w as (
      update webhook_endpoints w set
        failing_since = case when $4 then null else coalesce(w.failing_since, $11::timestamptz, now()) end,
        enabled = w.enabled and c.disabling is null,
        disabled_reason = coalesce(c.disabling, w.disabled_reason),
        updated_at = case when c.disabling is not null then now() else w.updated_at end
        from c
       where w.id = c.id and $3
         and (($4 and w.failing_since is not null) or (not $4 and (w.failing_since is null or c.disabling is not null)))
      returning w.id
    ), a as (
      insert into audit_log (id, organization_id, api_key_id, action, target_type, target_id, details, created_at)
      select svc_uuidv7(), c.organization_id, null, 'webhook.disabled', 'webhook', c.id, jsonb_build_object('reason', c.disabling), now()
        from c where c.disabling is not null
    )
    select d.status, (extract(epoch from d.next_attempt_at) * 1000)::float8 as next_attempt_ms,
           (select c.disabling from c) as disabled, d.endpoint_id, d.enqueued_at is null as handed_back,
           case when d.enqueued_at is null then pg_notify('svc_webhooks', '') end as notified
      from d`,
};

/** The delivery after the attempt, or null when a newer run (or a delete) took it first. */
export async function recordWebhookAttempt(orm: Orm, r: AttemptRecord): Promise<RecordedAttempt | null> {
  const [row] = await runPrepared<RecordedAttempt>(orm, RECORD, [
    r.deliveryId,
    r.run,
    r.attempted,
    r.succeeded,
    r.gone,
    r.statusCode,
    r.error,
    r.response,
    r.retryInMs,
    r.handBack ?? false,
    r.at ?? null,
  ]);
  return row ?? null;
}
