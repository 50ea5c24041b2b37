import type Router from '@koa/router';
import { LockMode } from '@mikro-orm/core';
import type { Orm } from '../../db/orm';
import { ApiKey, ApiKeyToken } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { newApiKey, newToken, foreignDomainIds } from '../../core/provisioning';
import type { AuthState } from '../../core/auth';
import { ServiceError, notFound, validationError } from '../../core/errors';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { readValidBody } from '../validate';
import { audit } from '../audit';
import { createKeySchema, type CreateKeyBody } from './schema';
import { presentKey } from './present';
import { keysLastUsed } from '../../db/sql/key-last-used';

/** How long a rotated-out token keeps working (spec: 24 hours), each token its own 24 hours. */
export const ROTATION_GRACE_MS = 24 * 3600 * 1000;

const notMintable = (what: string) =>
  new ServiceError(
    'admin_key_not_mintable',
    `${what} ADMIN keys through the API is not allowed; ADMIN keys are created and rotated in the console`,
  );

/** A domain-restricted caller manages only keys confined to its own domains. */
function manages(a: AuthState, k: ApiKey): boolean {
  if (a.key.domainIds === null) return true;
  return k.domainIds !== null && k.domainIds.every((d) => a.key.domainIds!.includes(d));
}

export function keyRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');

  async function findManaged(ctx: ApiContext): Promise<ApiKey> {
    const a = auth(ctx);
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('key');
    const key = await deps.orm.em.fork().findOne(ApiKey, { id, organizationId: a.organization.id });
    // Another organization's key, or one outside a restricted caller's domains: not found, not forbidden.
    if (!key || !manages(a, key)) throw notFound('key');
    return key;
  }

  /** The tokens each key may still be called with (its current one, and those within their grace). */
  async function tokensOf(keys: ApiKey[]): Promise<Map<string, ApiKeyToken[]>> {
    const rows = keys.length
      ? await deps.orm.em
          .fork()
          .find(
            ApiKeyToken,
            { apiKeyId: { $in: keys.map((k) => k.id) }, $or: [{ expiresAt: null }, { expiresAt: { $gt: new Date() } }] },
            { orderBy: { createdAt: 'desc' } },
          )
      : [];
    const by = new Map<string, ApiKeyToken[]>(keys.map((k) => [k.id, []]));
    for (const t of rows) by.get(t.apiKeyId)!.push(t);
    return by;
  }

  const present = async (key: ApiKey) =>
    presentKey(key, (await tokensOf([key])).get(key.id)!, (await keysLastUsed(deps.orm, [key.id])).get(key.id) ?? null);

  router.post('/keys', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateKeyBody = await readValidBody(ctx, createKeySchema, deps.maxBodyBytes);
    if (body.permission === 'admin' && !a.operator) throw notMintable('Minting');
    const domainIds = body.domain_ids ?? null;
    if (a.key.domainIds !== null) {
      if (domainIds === null) {
        throw new ServiceError('forbidden_domain', 'a domain-restricted key cannot mint an unrestricted key; pass domain_ids');
      }
      const foreign = domainIds.filter((d) => !a.key.domainIds!.includes(d));
      if (foreign.length)
        throw new ServiceError('forbidden_domain', `this key cannot grant domains it does not hold: ${foreign.join(', ')}`);
    }
    const em = deps.orm.em.fork();
    const missing = domainIds ? await foreignDomainIds(em, a.organization.id, domainIds) : [];
    if (missing.length) {
      throw validationError(
        `unknown domain(s): ${missing.join(', ')}`,
        missing.map((d) => ({ field: 'domain_ids', message: `no domain ${d} in this organization` })),
      );
    }
    const { key, tokenRow, token } = newApiKey(a.organization.id, {
      name: body.name,
      permission: body.permission,
      mode: body.mode,
      domainIds,
      rateLimit: body.rate_limit,
    });
    em.persist(key);
    em.persist(tokenRow);
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
    ctx.body = { ...presentKey(key, [tokenRow]), token };
  });

  router.get('/keys', admin, async (ctx) => {
    const a = auth(ctx);
    const keys = (
      await deps.orm.em.fork().find(ApiKey, { organizationId: a.organization.id }, { orderBy: { createdAt: 'desc', id: 'desc' } })
    ).filter((k) => manages(a, k));
    const [tokens, used] = await Promise.all([
      tokensOf(keys),
      keysLastUsed(
        deps.orm,
        keys.map((k) => k.id),
      ),
    ]);
    ctx.body = { object: 'list', data: keys.map((k) => presentKey(k, tokens.get(k.id)!, used.get(k.id) ?? null)) };
  });

  router.get('/keys/:id', admin, async (ctx) => {
    ctx.body = await present(await findManaged(ctx));
  });

  router.post('/keys/:id/rotate', admin, async (ctx) => {
    const a = auth(ctx);
    const key = await findManaged(ctx);
    if (key.permission === 'admin' && !a.operator) throw notMintable('Rotating');
    if (key.revokedAt) throw new ServiceError('key_revoked', 'a revoked key cannot be rotated; create a new key');
    const current = (await tokensOf([key])).get(key.id)!.find((t) => t.expiresAt === null);
    const now = new Date();
    const expires = new Date(now.getTime() + ROTATION_GRACE_MS);
    const { token, tokenRow } = newToken(key, now);
    await deps.orm.em.fork().transactional(async (em) => {
      // The key row, locked: a revocation waits for this rotation or wins before it.
      if (!(await em.findOne(ApiKey, { id: key.id, revokedAt: null }, { fields: ['id'], lockMode: LockMode.PESSIMISTIC_WRITE }))) {
        throw new ServiceError('key_revoked', 'a revoked key cannot be rotated; create a new key');
      }
      // Conditional on the token the caller replaced: of two concurrent rotations the second finds
      // it superseded already and is refused. Tokens rotated out before keep their own 24 hours.
      const superseded = current
        ? await em.nativeUpdate(ApiKeyToken, { tokenHash: current.tokenHash, expiresAt: null }, { expiresAt: expires })
        : 0;
      if (superseded !== 1) {
        throw new ServiceError('rotation_conflict', 'the key was rotated at the same moment; read it again');
      }
      em.persist(tokenRow);
      audit(em, a, 'key.rotated', { type: 'key', id: key.id }, { previous_token_expires_at: expires.toISOString() });
    });
    ctx.body = { ...(await present(key)), token };
  });

  router.delete('/keys/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const key = await findManaged(ctx);
    const em = deps.orm.em.fork();
    if (!key.revokedAt) {
      key.revokedAt = new Date();
      // Immediate: authentication skips revoked keys, whichever of their tokens is presented.
      if ((await em.nativeUpdate(ApiKey, { id: key.id, revokedAt: null }, { revokedAt: key.revokedAt })) === 1) {
        audit(em, a, 'key.revoked', { type: 'key', id: key.id }, { name: key.name });
        await em.flush();
      }
    }
    ctx.body = { ...(await present(key)), revoked: true };
  });

  return router;
}
