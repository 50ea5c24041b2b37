import type { Topic } from '../../db/entities';

export function presentTopic(t: Topic) {
  return {
    object: 'topic',
    id: t.id,
    slug: t.slug,
    name: t.name,
    default_opt_in: t.defaultOptIn,
    created_at: t.createdAt.toISOString(),
  };
}
