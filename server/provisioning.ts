import { randomBytes } from 'node:crypto';
import type { Orm } from '../db/orm';
import { Organization, Domain, ApiKey, type Plan, type Stream, type Permission, type KeyMode } from '../db/entities';
import { uuidv7 } from './ids';
import { hashToken } from '../api/middleware/auth';
import { newDomainIdentity, type PlatformDns } from './domain-identity';
import type { Secrets } from './secrets';

/** Operator-side creation of organizations, domains and keys (the `svc` command and first-run setup). */
export async function createOrganization(orm: Orm, name: string, plan: Plan = 'free'): Promise<Organization> {
  const org = Object.assign(new Organization(), { id: uuidv7(), name, plan, createdAt: new Date() });
  await orm.em.fork().persistAndFlush(org);
  return org;
}

/**
 * `verified` is the operator's override (no DNS, no DKIM key: mail from it is unsigned). Given
 * `identity`, the domain gets a DKIM key and records to publish, like one made by POST /domains;
 * its verification then runs on "verify now".
 */
export async function createDomain(
  orm: Orm,
  organizationId: string,
  name: string,
  opts: { stream?: Stream; verified?: boolean; identity?: { secrets: Secrets; platform: PlatformDns } } = {},
): Promise<Domain> {
  const em = orm.em.fork();
  await em.findOneOrFail(Organization, { id: organizationId }, { failHandler: () => new Error(`organization ${organizationId} does not exist`) });
  const lower = name.toLowerCase();
  const identity = opts.identity ? newDomainIdentity(lower, opts.identity.platform) : null;
  const domain = Object.assign(new Domain(), {
    id: uuidv7(), organizationId, name: lower, stream: opts.stream ?? 'transactional',
    status: opts.verified ? 'verified' : 'pending', createdAt: new Date(),
    ...(identity && opts.identity
      ? {
          dkimSelector: identity.selector, dkimPublicKey: identity.publicKey, dkimPrivateKeyEnc: opts.identity.secrets.encrypt(identity.privateKeyPem),
          returnPathHost: identity.returnPathHost, records: identity.records,
        }
      : {}),
  });
  await em.persistAndFlush(domain);
  return domain;
}

export function newToken(mode: KeyMode): string {
  return `svc_${mode}_${randomBytes(24).toString('base64url')}`;
}

export async function createKey(
  orm: Orm,
  organizationId: string,
  opts: { name: string; permission: Permission; mode: KeyMode; domainIds?: string[]; rateLimit?: number },
): Promise<{ key: ApiKey; token: string }> {
  const em = orm.em.fork();
  await em.findOneOrFail(Organization, { id: organizationId }, { failHandler: () => new Error(`organization ${organizationId} does not exist`) });
  if (opts.domainIds?.length) {
    const found = await em.count(Domain, { id: { $in: opts.domainIds }, organizationId });
    if (found !== new Set(opts.domainIds).size) throw new Error('every --domain must be a domain of this organization');
  }
  const token = newToken(opts.mode);
  const key = Object.assign(new ApiKey(), {
    id: uuidv7(), organizationId, name: opts.name, permission: opts.permission, mode: opts.mode,
    tokenHash: hashToken(token), tokenPrefix: token.slice(0, 13), domainIds: opts.domainIds?.length ? opts.domainIds : null,
    rateLimit: opts.rateLimit ?? null, createdAt: new Date(),
  });
  await em.persistAndFlush(key);
  return { key, token };
}
