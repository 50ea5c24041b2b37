/**
 * The columns of a new automation run, shared by the two statements that start runs (POST /events,
 * db/sql/record-events.ts; trigger rows, db/sql/automation-outbox.ts). `a` is the automation row,
 * `now` the statement's time. An automation whose first step is a long delay
 * (`park_first_seconds`) gets its run written already parked in that delay, as the workflow's own
 * park would leave it: no workflow runs for it until the delay is over (a first segment would only
 * have parked it).
 */
export const RUN_COLUMNS =
  'id, organization_id, automation_id, version, contact_id, email, dedupe_key, trigger, data, status, step, history, resume_at, resume_path, segment, created_at, updated_at';

/** The values for RUN_COLUMNS, from expressions for the run's id, organization, contact, email, dedupe key, trigger and data. */
export function runValues(v: {
  id: string;
  org: string;
  a: string;
  contact: string;
  email: string;
  key: string;
  trigger: string;
  data: string;
  now: string;
}): string {
  const until = `${v.now}::timestamptz + ${v.a}.park_first_seconds * interval '1 second'`;
  const parked = `${v.a}.park_first_seconds is not null`;
  return `${v.id}, ${v.org}, ${v.a}.id, ${v.a}.version, ${v.contact}, ${v.email}, ${v.key}, ${v.trigger}, ${v.data}, 'running',
    case when ${parked} then 'steps[0]' end,
    case when ${parked} then jsonb_build_array(jsonb_build_object('step', 'steps[0]', 'type', 'delay', 'started_at', ${v.now}::timestamptz,
      'until', ${until}, 'parked', true)) else '[]'::jsonb end,
    case when ${parked} then ${until} end, case when ${parked} then 'steps[0]' end, case when ${parked} then 1 else 0 end, ${v.now}, ${v.now}`;
}
