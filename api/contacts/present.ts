import type { ContactRow } from '../../db/sql/contact-row';

const iso = (t: Date | string) => new Date(t).toISOString();

/** The spec's contact object. */
export function presentContact(c: ContactRow) {
  return {
    object: 'contact',
    id: c.id,
    email: c.email,
    first_name: c.first_name,
    last_name: c.last_name,
    status: c.status,
    properties: c.properties,
    subscriptions: c.subscriptions.map((s) => ({
      topic: s.topic,
      state: s.state,
      explicit: s.explicit,
      changed_at: s.changed_at === null ? null : iso(s.changed_at),
      source: s.source,
    })),
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
