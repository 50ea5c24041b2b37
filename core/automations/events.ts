import * as yup from 'yup';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import type { Logger } from 'pino';
import { recordEvents, type EventRequest, type RecordedEvent } from '../../db/sql/record-events';
import { GroupCommit } from '../group-commit';
import { invalidKey, rateLimited } from '../auth';
import { ServiceError, validationError, type ErrorDetail } from '../errors';
import { bodySchema, fromYup, isPlainObject } from '../validate';
import { contactEmail } from '../contacts/schema';
import { MAX_EVENT_NAME } from './limits';
import { parseProperties, tooManyProperties, type PropertyPatch } from '../contacts/rules';

/** POST /events's body, beside parseProperties' rules for `data` (also the OpenAPI document's, api/events/openapi.ts). */
export const eventSchema = bodySchema({
  name: yup.string().strict().required('name is required').min(1).max(MAX_EVENT_NAME),
  email: yup.string().strict().required('email is required').max(320),
  // Checked by parseProperties (the contact property rules).
  data: yup.mixed(),
  id: yup.string().strict().min(1).max(MAX_EVENT_NAME),
});

export interface EventInput {
  name: string;
  email: string;
  data: PropertyPatch;
  id: string;
}

/** POST /events's body (spec: POST /events): every rule as one 422 validation_error. */
export function parseEvent(body: unknown): EventInput {
  if (!isPlainObject(body)) throw validationError('body must be a JSON object');
  const details: ErrorDetail[] = [];
  try {
    eventSchema.validateSync(body, { abortEarly: false });
  } catch (e) {
    if (!(e instanceof yup.ValidationError)) throw e;
    details.push(...(fromYup(e).details ?? []));
  }
  const data = body.data === undefined ? { patch: { set: {}, remove: [] }, details: [] } : parseProperties(body.data, 'data');
  details.push(...data.details);
  const email = contactEmail(body.email);
  if (email === undefined) details.push({ field: 'email', message: 'email must be one email address (local@domain)' });
  if (details.length) throw validationError(details.map((d) => d.message).join('; '), details);
  return { name: body.name as string, email: email!, data: data.patch, id: (body.id as string | undefined) ?? randomUUID() };
}

const CHECK_VIOLATION = '23514';

/** The CHECK each daily quota is (db/sql/record-events.ts), and the code its violation answers. */
const QUOTA_CONSTRAINTS = {
  event_quotas_contacts: 'contact_quota_exceeded',
  event_quotas_runs: 'run_quota_exceeded',
} as const;

const ATTEMPTS = 3;

export const eventTestKeyRefused = () => new ServiceError('test_key_not_allowed', 'test keys cannot post events');

/**
 * Records an event (db/sql/record-events.ts, grouped with concurrent ones by GroupEvents): the
 * statement authenticates and charges the key, upserts the contact, starts the runs of matching
 * automations, resumes this contact's runs waiting for it, and spends the day's quotas, or does
 * none of it (401, 429, 403 for a test key).
 */
export async function postEvent(
  events: GroupEvents,
  tokenHash: string,
  input: EventInput,
): Promise<{ id: string; runs: number; resumed: number; created: boolean }> {
  for (let attempt = 1; ; attempt++) {
    const now = Date.now();
    let row;
    try {
      row = await events.record({
        tokenHash,
        email: input.email,
        newContactId: uuidv7(now),
        set: input.data.set,
        remove: input.data.remove,
        name: input.name,
        eventId: input.id,
      });
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      if (e.code === CHECK_VIOLATION && e.constraint && e.constraint in QUOTA_CONSTRAINTS) {
        const code = QUOTA_CONSTRAINTS[e.constraint as keyof typeof QUOTA_CONSTRAINTS];
        throw new ServiceError(
          code,
          code === 'contact_quota_exceeded'
            ? 'the daily quota of contacts created through events is spent (resets at 00:00 UTC)'
            : 'the daily quota of automation runs started by events is spent (resets at 00:00 UTC)',
        );
      }
      if (e.code === CHECK_VIOLATION && e.constraint === 'contacts_properties_limit') throw tooManyProperties();
      throw err;
    }
    if (!row.known) throw invalidKey();
    if (!row.admitted) throw rateLimited(row.rate_limit);
    if (row.mode !== 'live') throw eventTestKeyRefused();
    // The contact was created by a concurrent request after this statement's snapshot: the next
    // statement sees it (and is charged like any request).
    if (row.contact_id === null && attempt < ATTEMPTS) continue;
    if (row.contact_id === null) throw new Error('event contact neither inserted nor found');
    return { id: input.id, runs: row.runs, resumed: row.resumed, created: row.created };
  }
}

/**
 * Group commit for events (core/group-commit.ts), as for contact upserts: concurrent events are
 * authenticated, charged and recorded by one statement. A group never holds two events for one
 * address (a statement changes a row once): the later one waits for the next group, so one
 * contact's events apply in arrival order. A failed group (one event over a quota) runs again one
 * event per statement, so only that event is refused.
 */
export class GroupEvents {
  private readonly groups: GroupCommit<EventRequest, RecordedEvent>;

  constructor(orm: Orm, log: Logger, maxInFlight = 1, maxGroup = 200) {
    this.groups = new GroupCommit((requests) => recordEvents(orm, requests, new Date()), {
      maxInFlight,
      accepts: (group, next) => group.length < maxGroup && !group.some((r) => r.email === next.email),
      onGroupFailure: (err, requests) => log.debug({ err, requests }, 'a group of events failed; running them one by one'),
    });
  }

  record(request: EventRequest): Promise<RecordedEvent> {
    return this.groups.submit(request);
  }
}
