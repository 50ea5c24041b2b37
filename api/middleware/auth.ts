import type Koa from 'koa';
import { createHash } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { ApiKey, Organization, type Permission } from '../../db/entities';
import { ApiError } from '../errors';

export interface AuthState {
  key: ApiKey;
  organization: Organization;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
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
    const em = orm.em.fork();
    const key = await em.findOne(ApiKey, { tokenHash: hashToken(token), revokedAt: null });
    if (!key) throw new ApiError(401, 'invalid_api_key', 'API key is not valid');
    const organization = await em.findOneOrFail(Organization, { id: key.organizationId });
    ctx.state.auth = { key, organization } satisfies AuthState;
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
