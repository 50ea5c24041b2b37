import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
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
 * What a domain's DNS identity puts on its row: a DKIM key pair (private key sealed), the
 * return-path host (the VERP envelope sender, where bounces and complaints come back) and the
 * records to publish.
 */
function identityColumns(
  name: string,
  deps: DomainIdentityDeps,
  now: Date,
): Pick<Domain, 'dkimSelector' | 'dkimPublicKey' | 'dkimPrivateKeyEnc' | 'returnPathHost' | 'records'> {
  const identity = newDomainIdentity(name, deps.platform, now);
  return {
    dkimSelector: identity.selector,
    dkimPublicKey: identity.publicKey,
    dkimPrivateKeyEnc: deps.secrets.encrypt(identity.privateKeyPem),
    returnPathHost: identity.returnPathHost,
    records: identity.records,
  };
}

/**
 * A new domain row, shared by POST /domains and `svc domain create`. With `identity` it gets a
 * DKIM key pair (private key sealed), its return-path host and the DNS records to publish; its mail
 * is signed and carries the VERP return path. `verified` skips only the DNS wait (`svc domain
 * create --verified`: the operator checked DNS): no verification loop, the identity all the same.
 * Without `identity` the domain sends unsigned, with the From address as envelope sender: of what
 * operators run, only the development sandbox domain is made so (server/bootstrap.ts); tests and
 * benches make their fixtures' domains so too.
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
    /** With an identity, not verified: how long its verification loop re-checks DNS (the first generation's window). */
    verifyWindowMs?: number;
    /** Starts at warm-up stage 1 (default; DOMAIN_WARMUP=off passes false: no domain cap). */
    warmup?: boolean;
  },
): Domain {
  const now = opts.now ?? new Date();
  const lower = name.toLowerCase();
  return Object.assign(new Domain(), {
    id: uuidv7(),
    organizationId,
    name: lower,
    stream: opts.stream ?? 'transactional',
    status: opts.verified ? 'verified' : 'pending',
    dnsProvider: opts.dnsProvider ?? 'manual',
    warmupStage: opts.warmup === false ? null : 1,
    createdAt: now,
    ...(opts.identity
      ? {
          ...identityColumns(lower, opts.identity, now),
          ...(opts.verifyWindowMs && !opts.verified
            ? { verificationGeneration: 1, verifyingUntil: new Date(now.getTime() + opts.verifyWindowMs) }
            : {}),
        }
      : {}),
  });
}

/**
 * Issue 37, on the service's start: a domain `svc domain create --verified` made before that
 * command gave domains their identity (verified, no DKIM key, no return-path host) gets one now,
 * sealed with this service's SECRETS_KEY: a DKIM key, the return-path host and the records to
 * publish, kept beside the records it has (its tracking CNAME). From then on its mail is signed and
 * carries the VERP return path, so its bounces and complaints reach the inbound listener. Each
 * domain given one is logged (warn) with the records its owner must publish.
 * `except`: names left as they are (the development sandbox domain, server/bootstrap.ts). A domain
 * whose tracking host is the return-path host it would get is left too, with a warning. Each row is
 * written only if it still has no identity (and the same tracking host): two processes starting at
 * once give a domain one identity.
 */
export async function identifyOperatorVerifiedDomains(
  orm: Orm,
  deps: DomainIdentityDeps,
  opts: { except: string[]; log: Logger; now?: Date },
): Promise<Domain[]> {
  const em = orm.em.fork();
  const found = await em.find(
    Domain,
    {
      status: 'verified',
      deletedAt: null,
      dkimSelector: null,
      returnPathHost: null,
      ...(opts.except.length ? { name: { $nin: opts.except.map((n) => n.toLowerCase()) } } : {}),
    },
    { orderBy: { createdAt: 'asc' } },
  );
  const done: Domain[] = [];
  for (const domain of found) {
    const now = opts.now ?? new Date();
    const columns = identityColumns(domain.name, deps, now);
    if (domain.trackingHost === columns.returnPathHost) {
      opts.log.warn(
        { domainId: domain.id, name: domain.name, trackingHost: domain.trackingHost },
        'a domain made with --verified keeps sending unsigned: its tracking host is the return-path host it needs (change its tracking_host)',
      );
      continue;
    }
    const identityPurposes = new Set(columns.records.map((r) => r.purpose));
    const records = [...columns.records, ...domain.records.filter((r) => !identityPurposes.has(r.purpose))];
    const written = await em.nativeUpdate(
      Domain,
      { id: domain.id, dkimSelector: null, returnPathHost: null, trackingHost: domain.trackingHost },
      { ...columns, records },
    );
    if (!written) continue;
    const identified = Object.assign(domain, columns, { records });
    opts.log.warn(
      {
        domainId: domain.id,
        name: domain.name,
        records: records.filter((r) => identityPurposes.has(r.purpose)).map(({ type, name, value }) => ({ type, name, value })),
      },
      'a domain made with --verified now signs its mail with DKIM and takes its bounces at its return-path host: publish these records (GET /api/v1/domains/:id lists them)',
    );
    done.push(identified);
  }
  return done;
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
