import type Router from '@koa/router';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { Domain } from '../../db/entities';
import { isUuid } from '../../db/ids';
import type { Engine } from '../../worker/engine';
import { startVerificationLoop } from '../../worker/domain-sweep';
import type { Secrets } from '../../core/secrets';
import { newDomain } from '../../core/provisioning';
import { trackingRecord, type PlatformDns } from '../../core/domains/identity';
import { checkDomain } from '../../core/domains/verification';
import type { DnsResolver } from '../../core/domains/dns';
import type { Clock } from '../../core/clock';
import type { AuthState } from '../../core/auth';
import { ServiceError, notFound, validationError } from '../../core/errors';
import type { DomainVerificationInput } from '../../workflows/domain-verification';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { readValidBody } from '../validate';
import { audit } from '../audit';
import { createDomainSchema, normalizeDomainName, updateDomainSchema, type CreateDomainBody, type UpdateDomainBody } from './schema';
import { presentDomain } from './present';
import { warmupViews, type CapsSettings } from '../../core/limits/usage';

export interface DomainRoutesDeps {
  orm: Orm;
  engine: Engine;
  log: Logger;
  maxBodyBytes: number;
  domains: {
    secrets: Secrets;
    dns: DnsResolver;
    clock: Clock;
    platform: PlatformDns;
    verification: Omit<DomainVerificationInput, 'domainId'>;
    /** DOMAIN_WARMUP: new domains start at warm-up stage 1. */
    warmup: boolean;
    /** MTA-STS hosting starts when a check verifies the domain (core/domains/verification.ts). */
    publicBase?: string;
  };
  caps: CapsSettings;
}

/** Domains a key may see: its organization's live ones, only its own when restricted. */
function visible(a: AuthState, d: Domain | null): d is Domain {
  return !!d && d.organizationId === a.organization.id && !d.deletedAt && (a.key.domainIds === null || a.key.domainIds.includes(d.id));
}

export function domainRoutes(deps: DomainRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');
  const { orm } = deps;

  async function find(ctx: ApiContext): Promise<Domain> {
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('domain');
    const domain = await orm.em.fork().findOne(Domain, { id });
    if (!visible(auth(ctx), domain)) throw notFound('domain');
    return domain;
  }

  /** Domains with their `warmup` field, from one read of today's counters. */
  async function present(domains: Domain[]) {
    const views = await warmupViews(orm.em.fork(), deps.caps, domains);
    return domains.map((d) => presentDomain(d, views.get(d.id)!));
  }
  const presentOne = async (d: Domain) => (await present([d]))[0];

  async function startLoop(domain: Domain): Promise<void> {
    try {
      await startVerificationLoop(deps.engine, domain, deps.domains.verification);
    } catch (err) {
      // The domain is stored; the verification sweep (or "verify now") starts the loop later.
      deps.log.error({ err, domainId: domain.id }, 'could not start domain verification');
    }
  }

  router.post('/domains', admin, async (ctx) => {
    const a = auth(ctx);
    if (a.key.domainIds !== null) throw new ServiceError('forbidden_domain', 'a domain-restricted key cannot add a domain');
    const valid: CreateDomainBody = await readValidBody(ctx, createDomainSchema, deps.maxBodyBytes);
    const body = { ...valid, name: normalizeDomainName(valid.name) };
    if (body.dns_provider === 'cloudflare') {
      throw validationError(
        'dns_provider cloudflare (records published for you) is only offered to internal organizations; use manual and publish the records yourself',
        [{ field: 'dns_provider', message: 'only manual is available' }],
      );
    }
    const em = orm.em.fork();
    const now = deps.domains.clock.now();
    const domain = newDomain(a.organization.id, body.name, {
      stream: body.stream,
      dnsProvider: body.dns_provider,
      identity: deps.domains,
      now,
      verifyWindowMs: deps.domains.verification.windowMs,
      warmup: deps.domains.warmup,
    });
    em.persist(domain);
    audit(em, a, 'domain.created', { type: 'domain', id: domain.id }, { name: domain.name, stream: domain.stream });
    try {
      await em.flush();
    } catch (err) {
      // The partial unique index on (organization, name) of undeleted domains decides.
      if (err instanceof UniqueConstraintViolationException)
        throw new ServiceError('domain_exists', `${body.name} is already a domain of this organization`);
      throw err;
    }
    await startLoop(domain);
    ctx.status = 201;
    ctx.body = await presentOne(domain);
  });

  router.get('/domains', admin, async (ctx) => {
    const a = auth(ctx);
    const rows = await orm.em
      .fork()
      .find(Domain, { organizationId: a.organization.id, deletedAt: null }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    ctx.body = { object: 'list', data: await present(rows.filter((d) => visible(a, d))) };
  });

  router.get('/domains/:id', admin, async (ctx) => {
    ctx.body = await presentOne(await find(ctx));
  });

  /**
   * Sets or removes the tracking host. Its CNAME record replaces any earlier one in `records` and
   * is checked at once (with the others), so the answer shows whether it is already in place.
   */
  router.patch('/domains/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const domain = await find(ctx);
    const body: UpdateDomainBody = await readValidBody(ctx, updateDomainSchema, deps.maxBodyBytes);
    if (body.tracking_host === undefined) {
      ctx.body = await presentOne(domain);
      return;
    }
    const host = body.tracking_host === null ? null : normalizeDomainName(body.tracking_host);
    // Within the domain: its owner controls that zone, so no organization can point its tracked
    // links at a host another one publishes (a CNAME proves the target, not who set it up).
    if (host !== null && (!host.endsWith(`.${domain.name}`) || host === domain.returnPathHost)) {
      throw validationError(
        `tracking_host must be a host under ${domain.name} other than its return-path host (for example links.${domain.name})`,
        [{ field: 'tracking_host', message: `must be a host under ${domain.name}, not its return-path host` }],
      );
    }
    const current = domain.records.filter((r) => r.purpose === 'tracking');
    if (host === domain.trackingHost && (host === null ? !current.length : current.length === 1 && current[0].name === host)) {
      // Nothing changes (a lost record would be written again).
      ctx.body = await presentOne(domain);
      return;
    }
    const records = [
      ...domain.records.filter((r) => r.purpose !== 'tracking'),
      ...(host === null ? [] : [trackingRecord(host, deps.domains.platform)]),
    ];
    await orm.em.fork().transactional(async (em) => {
      if (!(await em.nativeUpdate(Domain, { id: domain.id, deletedAt: null }, { trackingHost: host, records }))) throw notFound('domain');
      audit(em, a, 'domain.updated', { type: 'domain', id: domain.id }, { name: domain.name, changes: { tracking_host: host } });
    });
    // The new record's status, and the others' while at it (as "verify now" does).
    if (host !== null)
      await checkDomain(
        { orm, dns: deps.domains.dns, clock: deps.domains.clock, log: deps.log, publicBase: deps.domains.publicBase },
        domain.id,
      );
    ctx.body = await presentOne(await orm.em.fork().findOneOrFail(Domain, { id: domain.id }));
  });

  /** Verify now: checks at once and answers with the result; restarts the loop if it had ended. */
  router.post('/domains/:id/verify', admin, async (ctx) => {
    const a = auth(ctx);
    const domain = await find(ctx);
    await checkDomain(
      { orm, dns: deps.domains.dns, clock: deps.domains.clock, log: deps.log, publicBase: deps.domains.publicBase },
      domain.id,
    );
    const em = orm.em.fork();
    const fresh = await em.findOneOrFail(Domain, { id: domain.id });
    audit(em, a, 'domain.verify_requested', { type: 'domain', id: domain.id }, { status: fresh.status });
    const now = deps.domains.clock.now();
    if (fresh.status === 'pending' && (!fresh.verifyingUntil || fresh.verifyingUntil < now)) {
      fresh.verificationGeneration += 1;
      fresh.verifyingUntil = new Date(now.getTime() + deps.domains.verification.windowMs);
    }
    await em.flush();
    if (fresh.verifyingUntil && fresh.verificationGeneration !== domain.verificationGeneration) await startLoop(fresh);
    ctx.body = await presentOne(fresh);
  });

  router.delete('/domains/:id', admin, async (ctx) => {
    const a = auth(ctx);
    if (a.key.domainIds !== null) throw new ServiceError('forbidden_domain', 'a domain-restricted key cannot delete a domain');
    const domain = await find(ctx);
    const em = orm.em.fork();
    // Soft delete: its messages keep pointing at it; it can no longer send and its name is free again.
    if ((await em.nativeUpdate(Domain, { id: domain.id, deletedAt: null }, { deletedAt: new Date() })) === 1) {
      audit(em, a, 'domain.deleted', { type: 'domain', id: domain.id }, { name: domain.name });
      await em.flush();
    }
    ctx.body = { object: 'domain', id: domain.id, name: domain.name, deleted: true };
  });

  return router;
}
