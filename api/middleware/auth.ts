import type Koa from 'koa';
import { createHash } from 'node:crypto';
import type { Orm } from '../../db/orm';
import type { ApiKey, Organization, Permission } from '../../db/entities';
import { ApiError } from '../errors';
import { runPrepared, type PreparedStatement } from '../../db/prepared';

/** What a request knows of its key and organization: read-only rows, not managed entities. */
export type AuthKey = Pick<ApiKey, 'id' | 'organizationId' | 'name' | 'permission' | 'mode' | 'domainIds' | 'rateLimit'>;
export type AuthOrganization = Pick<Organization, 'id' | 'name' | 'plan'>;

export interface AuthState {
  key: AuthKey;
  organization: AuthOrganization;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

interface AuthRow {
  id: string;
  organization_id: string;
  name: string;
  permission: Permission;
  mode: ApiKey['mode'];
  domain_ids: string[] | null;
  rate_limit: number | null;
  org_name: string;
  plan: Organization['plan'];
  /** False when the rate charge was refused. */
  charged: boolean;
}

/** The spec's default per-key request rate, per second. */
export const DEFAULT_RATE_LIMIT = 10;

const TOKEN_RE = /^svc_(live|test)_[A-Za-z0-9_-]{20,100}$/;

/**
 * Authentication with the rate charge, returning the key and its organization. Parameters: $1 the
 * token's SHA-256, $2 the cost, $3 whether a batch's admission applies. (Sends are authenticated
 * and charged by the statement that stores them instead, api/emails/store-sql.ts, by the same
 * admission rules; there a send refused for its rate still counts within its second.)
 *
 * The key is found by the token's SHA-256 (the current token, or the previous one within 24 h of
 * a rotation), and the charge lands on the key's one-second window in key_rate_windows. The
 * window lives in PostgreSQL, so every API process sharing the database enforces one limit, and
 * it costs no extra round trip. `charged` is empty when the charge was refused.
 *
 * Admission (spec, Limits): a request costs 1 and passes while the window has room. A batch costs
 * one per message (up to 100); it passes when the window is empty (so a batch sent in an empty
 * second always passes, even at the default cap of 10) or when it still fits under the key's cap.
 */
const AUTH: PreparedStatement = {
  name: 'auth_v2',
  text: `
with k as (
  select * from api_keys
   where (token_hash = $1 or (previous_token_hash = $1 and previous_token_expires_at > now())) and revoked_at is null
), charged as (
  insert into key_rate_windows as w (api_key_id, window_start, used)
  select k.id, date_trunc('second', now()), $2::int from k
  on conflict (api_key_id) do update
     set window_start = excluded.window_start,
         used = case when w.window_start = excluded.window_start then w.used + excluded.used else excluded.used end
   where w.window_start <> excluded.window_start
      or w.used + excluded.used <= (select coalesce(rate_limit, ${DEFAULT_RATE_LIMIT}) from k)
      or ($3::boolean and w.used = 0)
  returning w.window_start, w.used
)
select k.id, k.organization_id, k.name, k.permission, k.mode, k.domain_ids, k.rate_limit, o.name as org_name, o.plan,
       exists (select 1 from charged) as charged
  from k join organizations o on o.id = k.organization_id`,
};

export const invalidKey = () => new ApiError(401, 'invalid_api_key', 'API key is not valid');

export function rateLimited(rateLimit: number | null, batch: boolean): ApiError {
  const limit = rateLimit ?? DEFAULT_RATE_LIMIT;
  return new ApiError(
    429,
    'rate_limited',
    `this key allows ${limit} requests per second${batch ? ' (a batch costs one per message)' : ''}; retry in a second`,
    undefined,
    { 'Retry-After': '1' },
  );
}

/** A request whose authentication is left to the statement that stores its messages. */
export interface Credentials {
  tokenHash: string;
}

/** POST /emails and POST /emails/batch: authenticated and charged by the statement that stores the mail. */
const STORE_ROUTE = /^\/api\/v1\/emails(\/batch)?\/?$/;
/**
 * Bodies up to this size are read before the key is known (their authentication rides on the
 * store statement, saving a round trip per send); larger ones, or ones of unknown length, are
 * read only once the key is known to exist.
 */
const DEFERRED_AUTH_MAX_BODY = 256 * 1024;

/** Authenticates and charges `cost`; sets ctx.state.auth (and ctx.state.charged for a cost), or throws 401 / 429. */
export async function authenticate(orm: Orm, ctx: Koa.Context, tokenHash: string, cost: number, batch = false): Promise<AuthState> {
  const [row] = await runPrepared<AuthRow>(orm, AUTH, [tokenHash, cost, batch]);
  if (!row) throw invalidKey();
  if (!row.charged) throw rateLimited(row.rate_limit, batch);
  const state: AuthState = {
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
  };
  ctx.state.auth = state;
  if (cost > 0) ctx.state.charged = true;
  return state;
}

/** Bearer authentication and the per-key rate limit: the token is looked up by its SHA-256, never stored in clear. */
export function authMiddleware(orm: Orm): Koa.Middleware {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) {
      throw new ApiError(401, 'missing_api_key', 'send your API key as "Authorization: Bearer <API_KEY>"');
    }
    const token = m[1];
    if (!TOKEN_RE.test(token)) throw invalidKey();
    const tokenHash = hashToken(token);
    if (ctx.method === 'POST' && STORE_ROUTE.test(ctx.path)) {
      ctx.state.credentials = { tokenHash } satisfies Credentials;
      const declared = Number(ctx.get('content-length') || NaN);
      // Cost 0: only whether the key exists; the store statement charges.
      if (!(declared <= DEFERRED_AUTH_MAX_BODY)) await authenticate(orm, ctx, tokenHash, 0);
      return next();
    }
    await authenticate(orm, ctx, tokenHash, 1);
    await next();
  };
}

const RANK: Record<Permission, number> = { send: 0, full: 1, admin: 2 };

/** Tiers are ordered: FULL can do what SEND can, ADMIN what FULL can. */
export function requirePermission(permission: Permission): Koa.Middleware {
  return async (ctx, next) => {
    const { key } = ctx.state.auth as AuthState;
    if (permission === 'admin' && key.mode === 'test') {
      throw new ApiError(403, 'test_key_not_allowed', 'test keys cannot use management endpoints');
    }
    if (RANK[key.permission] < RANK[permission]) {
      throw new ApiError(403, 'forbidden', `this endpoint needs a ${permission.toUpperCase()} key`);
    }
    await next();
  };
}

export function auth(ctx: Koa.Context): AuthState {
  return ctx.state.auth as AuthState;
}
