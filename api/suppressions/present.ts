import type { Suppression } from '../../db/entities';

export function presentSuppression(s: Suppression) {
  return {
    object: 'suppression',
    id: s.id,
    email: s.email,
    reason: s.reason,
    /** The message whose bounce or complaint put the address here; null for a manual entry. */
    email_id: s.sourceEmailId,
    created_at: s.createdAt.toISOString(),
  };
}
