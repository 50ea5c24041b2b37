import Router from '@koa/router';
import type Koa from 'koa';
import type { Orm } from '../../db/orm';
import { ApiKey } from '../../db/entities';
import { isUuid } from '../../server/ids';
import { issueToken, newApiKey, foreignDomainIds } from '../../server/provisioning';
import { ApiError, notFound, validationError } from '../errors';
import { auth, requirePermission, type AuthState } from '../middleware/auth';
import { readValidBody } from '../validate';
import { audit } from '../audit';
import { createKeySchema, type CreateKeyBody } from './schema';
import { presentKey } from './present';

/** How long a rotated-out token keeps working (spec: 24 hours). */
export const ROTATION_GRACE_MS = 24 * 3600 * 1000;

const notMintable = (what: string) =>
  new ApiError(
    403,
    'admin_key_not_mintable',
    `${what} ADMIN keys through the API is not allowed; ADMIN keys are created and rotated in the console`,
  );

/** A domain-restricted caller manages only keys confined to its own domains. */
function manages(a: AuthState, k: ApiKey): boolean {
  if (a.key.domainIds === null) return true;
  return k.domainIds !== null && k.domainIds.every((d) => a.key.domainIds!.includes(d));
}

export function keyRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router {
  const router = new Router();
  const admin = requirePermission('admin');

  async function findManaged(ctx: Koa.Context): Promise<ApiKey> {
    const a = auth(ctx);
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('key');
    const key = await deps.orm.em.fork().findOne(ApiKey, { id, organizationId: a.organization.id });
    // Another organization's key, or one outside a restricted caller's domains: not found, not forbidden.
    if (!key || !manages(a, key)) throw notFound('key');
    return key;
  }

  router.post('/keys', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateKeyBody = await readValidBody(ctx, createKeySchema, deps.maxBodyBytes);
    if (body.permission === 'admin') throw notMintable('Minting');
    const domainIds = body.domain_ids ?? null;
    if (a.key.domainIds !== null) {
      if (domainIds === null)
        throw new ApiError(403, 'forbidden_domain', 'a domain-restricted key cannot mint an unrestricted key; pass domain_ids');
      const foreign = domainIds.filter((d) => !a.key.domainIds!.includes(d));
      if (foreign.length)
        throw new ApiError(403, 'forbidden_domain', `this key cannot grant domains it does not hold: ${foreign.join(', ')}`);
    }
    const em = deps.orm.em.fork();
    const missing = domainIds ? await foreignDomainIds(em, a.organization.id, domainIds) : [];
    if (missing.length)
      throw validationError(
        `unknown domain(s): ${missing.join(', ')}`,
        missing.map((d) => ({ field: 'domain_ids', message: `no domain ${d} in this organization` })),
      );
    const { key, token } = newApiKey(a.organization.id, {
      name: body.name,
      permission: body.permission,
      mode: body.mode,
      domainIds,
      rateLimit: body.rate_limit,
    });
    em.persist(key);
    audit(
      em,
      a,
      'key.created',
      { type: 'key', id: key.id },
      { name: key.name, permission: key.permission, mode: key.mode, domain_ids: key.domainIds, rate_limit: key.rateLimit },
    );
    await em.flush();
    ctx.status = 201;
    // The token appears in this response only; it is stored as a SHA-256.
    ctx.body = { ...presentKey(key), token };
  });

  router.get('/keys', admin, async (ctx) => {
    const a = auth(ctx);
    const keys = await deps.orm.em
      .fork()
      .find(ApiKey, { organizationId: a.organization.id }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    ctx.body = { object: 'list', data: keys.filter((k) => manages(a, k)).map(presentKey) };
  });

  router.get('/keys/:id', admin, async (ctx) => {
    ctx.body = presentKey(await findManaged(ctx));
  });

  router.post('/keys/:id/rotate', admin, async (ctx) => {
    const a = auth(ctx);
    const key = await findManaged(ctx);
    if (key.permission === 'admin') throw notMintable('Rotating');
    if (key.revokedAt) throw new ApiError(409, 'key_revoked', 'a revoked key cannot be rotated; create a new key');
    const { token, tokenHash, tokenPrefix } = issueToken(key.mode);
    const now = new Date();
    const expires = new Date(now.getTime() + ROTATION_GRACE_MS);
    const em = deps.orm.em.fork();
    // Conditional on the token we read: of two concurrent rotations one wins, and the token the
    // caller replaced keeps its full 24 hours.
    const changed = await em.nativeUpdate(
      ApiKey,
      { id: key.id, tokenHash: key.tokenHash, revokedAt: null },
      { tokenHash, tokenPrefix, previousTokenHash: key.tokenHash, previousTokenExpiresAt: expires, rotatedAt: now },
    );
    if (changed !== 1)
      throw new ApiError(409, 'rotation_conflict', 'the key changed while rotating (rotated or revoked meanwhile); read it again');
    audit(em, a, 'key.rotated', { type: 'key', id: key.id }, { previous_token_expires_at: expires.toISOString() });
    await em.flush();
    Object.assign(key, { tokenPrefix, previousTokenExpiresAt: expires, rotatedAt: now });
    ctx.body = { ...presentKey(key), token };
  });

  router.delete('/keys/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const key = await findManaged(ctx);
    const em = deps.orm.em.fork();
    if (!key.revokedAt) {
      key.revokedAt = new Date();
      // Immediate: the auth statement skips revoked keys, for the current and the previous token.
      if ((await em.nativeUpdate(ApiKey, { id: key.id, revokedAt: null }, { revokedAt: key.revokedAt })) === 1) {
        audit(em, a, 'key.revoked', { type: 'key', id: key.id }, { name: key.name });
        await em.flush();
      }
    }
    ctx.body = { ...presentKey(key), revoked: true };
  });

  return router;
}
