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
}

const TOKEN_RE = /^svc_(live|test)_[A-Za-z0-9_-]{20,100}$/;

/** Bearer authentication: the token is looked up by its SHA-256, never stored in clear. */
export function authMiddleware(orm: Orm): Koa.Middleware {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) {
      throw new ApiError(401, 'missing_api_key', 'send your API key as "Authorization: Bearer <API_KEY>"');
    }
    const token = m[1];
    if (!TOKEN_RE.test(token)) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    // One round trip: the key, its organization and the organization's verified domains.
    const em = orm.em.fork();
    const rows: AuthRow[] = await em.getConnection().execute(
      `select row_to_json(k) as key, row_to_json(o) as org,
              coalesce((select json_agg(d) from domains d where d.organization_id = o.id and d.status = 'verified'), '[]') as domains
         from api_keys k join organizations o on o.id = k.organization_id
        where k.token_hash = ? and k.revoked_at is null`,
      [hashToken(token)],
    );
    if (rows.length === 0) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    const [row] = rows;
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
