import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm';
import { Organization, Domain, ApiKey, ApiKeyToken, type Plan, type Stream, type Permission, type KeyMode } from '../db/entities';
import { uuidv7 } from '../db/ids';
import { issueToken } from './tokens';
import { newDomainIdentity, type PlatformDns } from './domains/identity';
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
    /** Starts at warm-up stage 1 (default; DOMAIN_WARMUP=off passes false: no domain cap). */
    warmup?: boolean;
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
    warmupStage: opts.warmup === false ? null : 1,
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
  opts: { stream?: Stream; verified?: boolean; identity?: DomainIdentityDeps; verifyWindowMs?: number; warmup?: boolean } = {},
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

export interface NewKeyOptions {
  name: string;
  permission: Permission;
  mode: KeyMode;
  domainIds?: string[] | null;
  rateLimit?: number | null;
}

/** A new key, its first token's row and the token itself (shown once); shared by POST /keys and `svc key create`. */
export function newApiKey(organizationId: string, opts: NewKeyOptions): { key: ApiKey; tokenRow: ApiKeyToken; token: string } {
  const now = new Date();
  const key = Object.assign(new ApiKey(), {
    id: uuidv7(),
    organizationId,
    name: opts.name,
    permission: opts.permission,
    mode: opts.mode,
    domainIds: opts.domainIds?.length ? [...new Set(opts.domainIds)] : null,
    rateLimit: opts.rateLimit ?? null,
    createdAt: now,
  });
  const { token, tokenRow } = newToken(key, now);
  return { key, tokenRow, token };
}

/** A fresh current token for a key: the row that stores its hash, and the token (shown once). */
export function newToken(key: Pick<ApiKey, 'id' | 'mode'>, now = new Date()): { token: string; tokenRow: ApiKeyToken } {
  const { token, tokenHash, tokenPrefix } = issueToken(key.mode);
  const tokenRow = Object.assign(new ApiKeyToken(), { tokenHash, apiKeyId: key.id, tokenPrefix, createdAt: now, expiresAt: null });
  return { token, tokenRow };
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
  em.persist(created.key);
  em.persist(created.tokenRow);
  await em.flush();
  return created;
}
