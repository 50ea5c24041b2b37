import type { Orm } from '../db/orm';
import type { ApiKey, Organization } from '../db/entities';
import { authenticateToken } from '../db/sql/authenticate';
import { DEFAULT_RATE_LIMIT } from '../db/sql/rate-window';
import type { PgTimestamp } from '../db/sql/pg-types';
import { ServiceError } from './errors';

/** What a request knows of its key and organization: read-only rows, not managed entities. */
export type AuthKey = Pick<ApiKey, 'id' | 'organizationId' | 'name' | 'permission' | 'mode' | 'domainIds' | 'rateLimit'>;
export type AuthOrganization = Pick<Organization, 'id' | 'name' | 'plan'>;

export interface AuthState {
  key: AuthKey;
  organization: AuthOrganization;
  /** Set when an operator acts through the console: audit rows name them, and ADMIN keys may be minted. */
  operator?: { email: string };
}

/**
 * The console calls the API in process (console/api.ts) with the operator's authority on the
 * request object itself: a symbol no client can send, so no header or token can claim it.
 */
export const CONSOLE_AUTH = Symbol('console operator');

/** What a request was charged, so a reservation can give back what it did not use. */
export interface Charge {
  keyId: string;
  windowStart: PgTimestamp;
  cost: number;
}

export const invalidKey = () => new ServiceError('invalid_api_key', 'API key is not valid');

/** 429 for a key over its rate; `reserved`: what the refused request (a batch) tried to reserve. */
export function rateLimited(rateLimit: number | null, reserved?: number): ServiceError {
  const limit = rateLimit ?? DEFAULT_RATE_LIMIT;
  return new ServiceError(
    'rate_limited',
    reserved !== undefined
      ? `this key allows ${limit} requests per second, and a batch needs an empty second or room for its reservation of ${reserved}; retry in a second`
      : `this key allows ${limit} requests per second; retry in a second`,
    undefined,
    { 'Retry-After': '1' },
  );
}

/**
 * Finds the key of a token (by its SHA-256) and charges `cost` to its request window, one round
 * trip (db/sql/authenticate.ts). Throws 401 for an unknown, revoked or expired token and 429 when
 * the window has no room (rule: db/sql/rate-window.ts).
 */
export async function authenticate(
  orm: Orm,
  tokenHash: string,
  cost: number,
  batch: boolean,
): Promise<{ auth: AuthState; charge: Charge }> {
  const row = await authenticateToken(orm, tokenHash, cost, batch);
  if (!row) throw invalidKey();
  if (!row.admitted) throw rateLimited(row.rate_limit, batch ? cost : undefined);
  return {
    auth: {
      key: {
        id: row.id,
        organizationId: row.organization_id,
        name: row.name,
        permission: row.permission,
        mode: row.mode,
        domainIds: row.domain_ids,
        rateLimit: row.rate_limit,
      },
      organization: { id: row.organization_id, name: row.org_name, plan: row.plan },
    },
    charge: { keyId: row.id, windowStart: row.window_start, cost },
  };
}
