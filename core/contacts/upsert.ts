import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import type { ContactRow } from '../../db/sql/contact-row';
import { upsertContact as upsertStatement } from '../../db/sql/upsert-contact';
import type { AuthState } from '../auth';
import { tooManyProperties } from './rules';
import type { ContactUpsert } from './schema';

const DEADLOCK = '40P01';
const CHECK_VIOLATION = '23514';
const ATTEMPTS = 3;

/**
 * Upserts a contact by email (spec: POST /contacts), with its topics and the triggers the write
 * fires, in one statement (db/sql/upsert-contact.ts). The automations' `contact.created` fires only
 * for keys without a domain restriction (spec: Authentication 4). The one writer of contacts:
 * POST /events will come through here too.
 */
export async function upsertContact(orm: Orm, a: AuthState, input: ContactUpsert): Promise<{ contact: ContactRow; created: boolean }> {
  let created = false;
  for (let attempt = 1; ; attempt++) {
    const now = new Date();
    try {
      const row = await upsertStatement(orm, {
        newId: uuidv7(now.getTime()),
        organizationId: a.organization.id,
        email: input.email,
        firstName: input.firstName,
        lastName: input.lastName,
        status: input.status,
        set: input.properties.set,
        remove: input.properties.remove,
        topics: input.topics.map((slug) => ({ id: uuidv7(now.getTime()), slug })),
        fireCreated: a.key.domainIds === null,
        now,
      });
      created ||= row.created;
      // A topic created by another request at this very moment was not seen: run again (every
      // part is idempotent), now that it is committed and visible.
      if (row.topics_applied < input.topics.length && attempt < ATTEMPTS) continue;
      const { created: _c, topics_applied: _t, ...contact } = row;
      return { contact, created };
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      if (e.code === CHECK_VIOLATION && e.constraint === 'contacts_properties_limit') throw tooManyProperties();
      if (e.code === DEADLOCK && attempt < ATTEMPTS) continue;
      throw err;
    }
  }
}
