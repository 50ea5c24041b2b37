import type { Orm } from '../orm';
import type { KeyMode, Permission, Plan } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { keyForToken } from './key-for-token';
import { chargeRequest } from './rate-window';
import type { PgTimestamp } from './pg-types';

export interface AuthenticatedRow {
  id: string;
  organization_id: string;
  name: string;
  permission: Permission;
  mode: KeyMode;
  domain_ids: string[] | null;
  rate_limit: number | null;
  org_name: string;
  plan: Plan;
  /** The window this request was charged to. */
  window_start: PgTimestamp;
  /** The window had room for the request (see rate-window.ts). */
  admitted: boolean;
}

/**
 * Finds the key of a token and charges its request window, in one round trip. Parameters: $1 the
 * token's SHA-256, $2 the cost, $3 whether a batch's admission applies. No row: no such live key.
 */
const AUTHENTICATE: PreparedStatement = {
  name: 'authenticate_v4',
  text: `
with k as (
  select a.* from ${keyForToken('$1')}
), charged as (${chargeRequest('k', '$2::int', '$3::boolean')})
select k.id, k.organization_id, k.name, k.permission, k.mode, k.domain_ids, k.rate_limit, o.name as org_name, o.plan,
       c.window_start, c.admitted
  from k join organizations o on o.id = k.organization_id cross join charged c`,
};

export async function authenticateToken(orm: Orm, tokenHash: string, cost: number, batch: boolean): Promise<AuthenticatedRow | null> {
  const [row] = await runPrepared<AuthenticatedRow>(orm, AUTHENTICATE, [tokenHash, cost, batch]);
  return row ?? null;
}
