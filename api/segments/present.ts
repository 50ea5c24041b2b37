import type { Segment } from '../../db/entities';

/** The segment object; `contact_count` is counted when it is read. */
export function presentSegment(s: Segment, contactCount: number) {
  return {
    object: 'segment',
    id: s.id,
    name: s.name,
    filter: s.filter,
    contact_count: contactCount,
    created_at: s.createdAt.toISOString(),
  };
}
