import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
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

export interface DomainIdentityDeps {
  secrets: Secrets;
  platform: PlatformDns;
}

/**
 * A new domain row, shared by POST /domains and `svc domain create`. With `identity` it gets a
 * DKIM key pair (private key sealed) and the DNS records to publish; without, it is the
 * operator's unsigned override (`--verified`, the sandbox domain).
 */
export function newDomain(
  organizationId: string,
  name: string,
  opts: {
    stream?: Stream;
    verified?: boolean;
    dnsProvider?: string;
    identity?: DomainIdentityDeps;
    now?: Date;
    /** With an identity: how long its verification loop re-checks DNS (the first generation's window). */
    verifyWindowMs?: number;
  },
): Domain {
  const now = opts.now ?? new Date();
  const lower = name.toLowerCase();
  const identity = opts.identity ? newDomainIdentity(lower, opts.identity.platform, now) : null;
  return Object.assign(new Domain(), {
    id: uuidv7(),
    organizationId,
    name: lower,
    stream: opts.stream ?? 'transactional',
    status: opts.verified ? 'verified' : 'pending',
    dnsProvider: opts.dnsProvider ?? 'manual',
    createdAt: now,
    ...(identity
      ? {
          dkimSelector: identity.selector,
          dkimPublicKey: identity.publicKey,
          dkimPrivateKeyEnc: opts.identity!.secrets.encrypt(identity.privateKeyPem),
          returnPathHost: identity.returnPathHost,
          records: identity.records,
          ...(opts.verifyWindowMs ? { verificationGeneration: 1, verifyingUntil: new Date(now.getTime() + opts.verifyWindowMs) } : {}),
        }
      : {}),
  });
}

/** `svc domain create` and first-run setup; the running service's verification sweep checks a pending one. */
export async function createDomain(
  orm: Orm,
  organizationId: string,
  name: string,
  opts: { stream?: Stream; verified?: boolean; identity?: DomainIdentityDeps; verifyWindowMs?: number } = {},
): Promise<Domain> {
  const em = orm.em.fork();
  await em.findOneOrFail(
    Organization,
    { id: organizationId },
    { failHandler: () => new Error(`organization ${organizationId} does not exist`) },
  );
  const domain = newDomain(organizationId, name, opts);
  await em.persistAndFlush(domain);
  return domain;
}

/** A fresh token, what is stored of it (SHA-256) and what is shown of it later (prefix). */
export function issueToken(mode: KeyMode): { token: string; tokenHash: string; tokenPrefix: string } {
  const token = `svc_${mode}_${randomBytes(24).toString('base64url')}`;
  return { token, tokenHash: hashToken(token), tokenPrefix: token.slice(0, 13) };
}

export interface NewKeyOptions {
  name: string;
  permission: Permission;
  mode: KeyMode;
  domainIds?: string[] | null;
  rateLimit?: number | null;
}

/** A new key row and its token (shown once), shared by POST /keys and `svc key create`. */
export function newApiKey(organizationId: string, opts: NewKeyOptions): { key: ApiKey; token: string } {
  const { token, tokenHash, tokenPrefix } = issueToken(opts.mode);
  const key = Object.assign(new ApiKey(), {
    id: uuidv7(),
    organizationId,
    name: opts.name,
    permission: opts.permission,
    mode: opts.mode,
    tokenHash,
    tokenPrefix,
    domainIds: opts.domainIds?.length ? [...new Set(opts.domainIds)] : null,
    rateLimit: opts.rateLimit ?? null,
    createdAt: new Date(),
  });
  return { key, token };
}

/** The ids among `domainIds` that are not domains of the organization. */
export async function foreignDomainIds(em: EntityManager, organizationId: string, domainIds: string[]): Promise<string[]> {
  const found = new Set(
    (await em.find(Domain, { id: { $in: domainIds }, organizationId, deletedAt: null }, { fields: ['id'] })).map((d) => d.id),
  );
  return domainIds.filter((d) => !found.has(d));
}

export async function createKey(orm: Orm, organizationId: string, opts: NewKeyOptions): Promise<{ key: ApiKey; token: string }> {
  const em = orm.em.fork();
  await em.findOneOrFail(
    Organization,
    { id: organizationId },
    { failHandler: () => new Error(`organization ${organizationId} does not exist`) },
  );
  if (opts.domainIds?.length && (await foreignDomainIds(em, organizationId, opts.domainIds)).length) {
    throw new Error('every --domain must be a domain of this organization');
  }
  const created = newApiKey(organizationId, opts);
  await em.persistAndFlush(created.key);
  return created;
}
