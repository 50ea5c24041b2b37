import { uuidv7 } from '../../db/ids';
import type { ContactRow } from '../../db/sql/contact-row';
import { invalidKey, rateLimited } from '../auth';
import { ServiceError } from '../errors';
import type { GroupUpsert } from './group-upsert';
import { tooManyProperties } from './rules';
import type { ContactUpsert } from './schema';

const DEADLOCK = '40P01';
const CHECK_VIOLATION = '23514';
const ATTEMPTS = 3;

export const testKeyRefused = () => new ServiceError('test_key_not_allowed', 'test keys cannot write contacts or subscriptions');

/**
 * Upserts a contact by email (spec: POST /contacts), with its topics and the triggers the write
 * fires, in the statement that also authenticates and charges the caller's key (grouped with
 * concurrent upserts: group-upsert.ts). The one writer of contacts: POST /events will come
 * through here too.
 */
export async function upsertContact(
  upserts: GroupUpsert,
  tokenHash: string,
  input: ContactUpsert,
): Promise<{ contact: ContactRow; created: boolean }> {
  let created = false;
  for (let attempt = 1; ; attempt++) {
    const now = Date.now();
    let row;
    try {
      row = await upserts.upsert({
        tokenHash,
        newId: uuidv7(now),
        email: input.email,
        firstName: input.firstName,
        lastName: input.lastName,
        status: input.status,
        set: input.properties.set,
        remove: input.properties.remove,
        topics: input.topics.map((slug) => ({ id: uuidv7(now), slug })),
      });
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      if (e.code === CHECK_VIOLATION && e.constraint === 'contacts_properties_limit') throw tooManyProperties();
      if (e.code === DEADLOCK && attempt < ATTEMPTS) continue;
      throw err;
    }
    if (!row.known) throw invalidKey();
    if (!row.admitted) throw rateLimited(row.rate_limit);
    if (row.mode !== 'live') throw testKeyRefused();
    const { req: _q, known: _k, admitted: _a, mode: _m, rate_limit: _r, created: isNew, topics_applied, ...contact } = row;
    created ||= isNew === true;
    // A topic created by another request at this very moment was not seen: run again (every
    // part is idempotent, and a retry is charged like any request), now that it is visible.
    if (topics_applied < input.topics.length && attempt < ATTEMPTS) continue;
    return { contact: contact as ContactRow, created };
  }
}
