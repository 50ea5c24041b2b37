import type Koa from 'koa';
import { createHash } from 'node:crypto';
import type { Orm } from '../../db/orm';
import type { ApiKey, Organization, Domain, Permission } from '../../db/entities';
import { ApiError } from '../errors';
import { runPrepared, type PreparedStatement } from '../../db/prepared';

/** What a request knows of its key, organization and domains: read-only, not managed entities. */
export type AuthKey = Pick<ApiKey, 'id' | 'organizationId' | 'name' | 'permission' | 'mode' | 'domainIds' | 'rateLimit'>;
export type AuthOrganization = Pick<Organization, 'id' | 'name' | 'plan'>;
export type AuthDomain = Pick<Domain, 'id' | 'name' | 'stream' | 'status'>;

export interface AuthState {
  key: AuthKey;
  organization: AuthOrganization;
  /** The organization's verified domains, loaded with the key (every send needs them). */
  verifiedDomains: AuthDomain[];
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
  domains: AuthDomain[];
  /** The key's rate window after this request's charge; null when the charge was refused. */
  window_start: string | null;
}

/** The spec's default per-key request rate, per second. */
export const DEFAULT_RATE_LIMIT = 10;
/** What a batch reserves before its body is read (one request per message, up to 100). */
export const BATCH_RESERVATION = 100;

export interface RateCharge {
  windowStart: string;
  reserved: number;
}

const TOKEN_RE = /^svc_(live|test)_[A-Za-z0-9_-]{20,100}$/;

/**
 * One statement does authentication and the per-key rate limit: it finds the key by the token's
 * SHA-256 (the current token, or the previous one within 24 h of a rotation), charges the key's
 * one-second window in key_rate_windows, and returns the key, its organization and its verified
 * domains. The window lives in PostgreSQL, so every API process sharing the database enforces
 * one limit, and it costs no extra round trip.
 *
 * Admission (spec, Limits): a request costs 1 and passes while the window has room. A batch
 * reserves 100 before its body is read; it passes when the window is empty (so a batch that
 * starts in an empty second always passes, even at the default cap of 10) or when 100 still fit
 * under the key's cap; the route refunds what its items did not use.
 */
const AUTH: PreparedStatement = { name: 'auth_v1', text: `
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
       coalesce((select json_agg(json_build_object('id', d.id, 'name', d.name, 'stream', d.stream, 'status', d.status))
                   from domains d where d.organization_id = o.id and d.status = 'verified' and d.deleted_at is null), '[]') as domains,
       (select c.window_start::text from charged c) as window_start
  from k join organizations o on o.id = k.organization_id` };

/** Bearer authentication and the per-key rate limit: the token is looked up by its SHA-256, never stored in clear. */
export function authMiddleware(orm: Orm): Koa.Middleware {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) {
      throw new ApiError(401, 'missing_api_key', 'send your API key as "Authorization: Bearer <API_KEY>"');
    }
    const token = m[1];
    if (!TOKEN_RE.test(token)) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    const batch = ctx.method === 'POST' && /^\/api\/v1\/emails\/batch\/?$/.test(ctx.path);
    const cost = batch ? BATCH_RESERVATION : 1;
    const hash = hashToken(token);
    const rows = await runPrepared<AuthRow>(orm, AUTH, [hash, cost, batch]);
    if (rows.length === 0) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    const [row] = rows;
    if (row.window_start === null) {
      const limit = row.rate_limit ?? DEFAULT_RATE_LIMIT;
      throw new ApiError(429, 'rate_limited', `this key allows ${limit} requests per second${batch ? ' (a batch reserves 100)' : ''}; retry in a second`, undefined, { 'Retry-After': '1' });
    }
    ctx.state.rate = { windowStart: row.window_start, reserved: cost } satisfies RateCharge;
    ctx.state.auth = {
      key: { id: row.id, organizationId: row.organization_id, name: row.name, permission: row.permission, mode: row.mode, domainIds: row.domain_ids, rateLimit: row.rate_limit },
      organization: { id: row.organization_id, name: row.org_name, plan: row.plan },
      verifiedDomains: row.domains,
    } satisfies AuthState;
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

/**
 * Gives back what a batch reserved but did not use (it keeps one request per message, and at
 * least one). Only within the same window: a new second starts from zero anyway.
 */
export async function refundRate(orm: Orm, ctx: Koa.Context, used: number): Promise<void> {
  const charge = ctx.state.rate as RateCharge | undefined;
  const refund = charge ? charge.reserved - Math.max(used, 1) : 0;
  if (!charge || refund <= 0) return;
  await orm.em.fork().getConnection().execute(
    'update key_rate_windows set used = greatest(used - ?, 0) where api_key_id = ? and window_start = ?',
    [refund, (ctx.state.auth as AuthState).key.id, charge.windowStart],
  );
}
