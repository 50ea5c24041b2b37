import type Koa from 'koa';
import { createHash } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { ApiKey, Organization, Domain, type Permission } from '../../db/entities';
import { ApiError } from '../errors';

export interface AuthState {
  key: ApiKey;
  organization: Organization;
  /** The organization's verified domains, loaded with the key (every send needs them). */
  verifiedDomains: Domain[];
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

interface AuthRow {
  key: Record<string, unknown>;
  org: Record<string, unknown>;
  domains: Record<string, unknown>[];
  /** The key's rate window after this request's charge; null when the charge was refused. */
  rate: { window_start: string; used: number } | null;
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
const AUTH_SQL = `
with k as (
  select * from api_keys
   where (token_hash = ? or (previous_token_hash = ? and previous_token_expires_at > now())) and revoked_at is null
), charged as (
  insert into key_rate_windows as w (api_key_id, window_start, used)
  select k.id, date_trunc('second', now()), ?::int from k
  on conflict (api_key_id) do update
     set window_start = excluded.window_start,
         used = case when w.window_start = excluded.window_start then w.used + excluded.used else excluded.used end
   where w.window_start <> excluded.window_start
      or w.used + excluded.used <= (select coalesce(rate_limit, ${DEFAULT_RATE_LIMIT}) from k)
      or (?::boolean and w.used = 0)
  returning w.window_start, w.used
)
select row_to_json(k) as key, row_to_json(o) as org,
       coalesce((select json_agg(d) from (select id, organization_id, name, stream, status, dns_provider, dkim_selector, return_path_host, created_at from domains where organization_id = o.id and status = 'verified' and deleted_at is null) d), '[]') as domains,
       (select row_to_json(c) from charged c) as rate
  from k join organizations o on o.id = k.organization_id`;

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
    const em = orm.em.fork();
    const batch = ctx.method === 'POST' && /^\/api\/v1\/emails\/batch\/?$/.test(ctx.path);
    const cost = batch ? BATCH_RESERVATION : 1;
    const hash = hashToken(token);
    const rows: AuthRow[] = await em.getConnection().execute(AUTH_SQL, [hash, hash, cost, batch]);
    if (rows.length === 0) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    const [row] = rows;
    if (!row.rate) {
      const limit = (row.key.rate_limit as number | null) ?? DEFAULT_RATE_LIMIT;
      throw new ApiError(429, 'rate_limited', `this key allows ${limit} requests per second${batch ? ' (a batch reserves 100)' : ''}; retry in a second`, undefined, { 'Retry-After': '1' });
    }
    ctx.state.rate = { windowStart: row.rate.window_start, reserved: cost } satisfies RateCharge;
    ctx.state.auth = {
      key: em.map(ApiKey, row.key),
      organization: em.map(Organization, row.org),
      verifiedDomains: row.domains.map((d) => em.map(Domain, d)),
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
