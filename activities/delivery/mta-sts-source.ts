import type { Logger } from 'pino';
import type { Clock } from '../../core/clock';
import { parseStsPolicy, parseStsRecord, type StsPolicy } from '../../core/delivery/mta-sts';
import type { Orm } from '../../db/orm';
import { addTlsCounts, readPolicy, recordPolicyError, upsertPolicy, type StsPolicyRow, type TlsCountRow } from '../../db/sql/mta-sts';
import { fetchPolicyText, type AddressDns } from './https-policy-fetch';

export interface StsPolicies {
  /** The domain's policy for this attempt: cached (PostgreSQL) while valid, fetched when the TXT id changed or it expired; null: no policy. */
  policyFor(domain: string): Promise<StsPolicy | null>;
  /** Fetches again now (an enforce failure re-checks before deferring). */
  refresh(domain: string): Promise<StsPolicy | null>;
  /** Counts one TLS session outcome for TLS-RPT (per policy domain and UTC day; batched writes are fine). */
  report(policyDomain: string, ok: boolean): void;
  /** Writes pending counts (called on close and by tests). */
  flush(): Promise<void>;
}

/** The lookups the source needs; DirectDns (activities/delivery/direct-mailer.ts) fits. */
export interface StsDns extends AddressDns {
  resolveTxt(name: string): Promise<string[][]>;
}

export interface StsPoliciesDeps {
  orm: Orm;
  dns: StsDns;
  clock: Clock;
  log: Logger;
  /** The policy host may resolve to loopback and private addresses (tests, development). */
  allowPrivate: boolean;
  /** Extra trusted roots for the policy hosts' certificates (tests). */
  ca?: string[];
  /** The policy hosts' HTTPS port (tests); 443 otherwise. */
  httpsPort?: number;
  /** How long an answer is kept in the process (default MEMO_MS); tests of the lookup itself set 0. */
  memoMs?: number;
}

/**
 * After a failed fetch of an id, messages to the domain go on with what is cached (or no policy)
 * for this long before the id is fetched again, so a broken policy host does not cost every
 * message a fetch. `refresh` ignores it.
 */
const RETRY_FAILED_FETCH_MS = 5 * 60_000;
/**
 * An answer is kept this long in the process: a burst to one domain pays one TXT lookup and one
 * database read, not one per message; a forced re-check is made at most once per domain in it.
 */
const MEMO_MS = 60_000;
/** Domains remembered at most (answers and failures); past it the oldest go. */
const MEMO_DOMAINS = 10_000;
/** Pending TLS-RPT counts are written at most this long after the first of them. */
const FLUSH_AFTER_MS = 5_000;

const normalize = (domain: string) => domain.toLowerCase().replace(/\.$/, '');

/**
 * RFC 8461 §5.1 as a sender: the `_mta-sts` TXT id says whether the cached policy is current; a
 * new id, or an expired policy, is fetched over HTTPS; when the TXT or the fetch fails, a cached
 * policy still within its max_age applies; without one there is no policy.
 */
export function createStsPolicies(deps: StsPoliciesDeps): StsPolicies {
  const { orm, clock, log } = deps;
  const inflight = new Map<string, Promise<StsPolicy | null>>();
  const failed = new Map<string, { id: string; until: number }>();

  async function txtId(domain: string): Promise<string | null> {
    try {
      // A TXT record may arrive in 255-byte chunks; they form one string.
      const answers = await deps.dns.resolveTxt(`_mta-sts.${domain}`);
      return parseStsRecord(answers.map((chunks) => chunks.join('')))?.id ?? null;
    } catch {
      // No record, or DNS failing for now: either way only a cached policy can apply (§5.1).
      return null;
    }
  }

  function usable(row: StsPolicyRow | null): StsPolicy | null {
    if (!row || row.policyId === null || row.mode === null || row.maxAge === null) return null;
    if (row.expiresAt.getTime() <= clock.now().getTime()) return null;
    return { id: row.policyId, mode: row.mode, mx: row.mx, maxAgeSeconds: row.maxAge };
  }

  async function fetchAndStore(domain: string, id: string, cached: StsPolicy | null): Promise<StsPolicy | null> {
    const at = clock.now();
    const text = await fetchPolicyText(`mta-sts.${domain}`, {
      dns: deps.dns,
      allowPrivate: deps.allowPrivate,
      ca: deps.ca,
      port: deps.httpsPort,
    });
    const policy = 'error' in text ? text : parseStsPolicy(id, text.body);
    if ('error' in policy) {
      log.warn({ domain, policyId: id, error: policy.error, keptCached: cached !== null }, 'MTA-STS policy fetch failed');
      remember(failed, domain, { id, until: at.getTime() + RETRY_FAILED_FETCH_MS });
      await recordPolicyError(orm, { domain, error: policy.error, at }).catch((err) =>
        log.error({ err, domain }, 'could not record the MTA-STS fetch error'),
      );
      return cached;
    }
    failed.delete(domain);
    // A policy fetched applies to this attempt even if it could not be cached.
    await upsertPolicy(orm, { domain, policyId: id, mode: policy.mode, mx: policy.mx, maxAge: policy.maxAgeSeconds, at }).catch((err) =>
      log.error({ err, domain }, 'could not cache the MTA-STS policy'),
    );
    return policy;
  }

  async function resolve(domain: string, force: boolean): Promise<StsPolicy | null> {
    const [id, row] = await Promise.all([txtId(domain), readPolicy(orm, domain)]);
    const cached = usable(row);
    if (id === null) {
      // Without a TXT id there is nothing new to fetch; a forced re-check asks for the cached id again.
      return force && cached ? fetchAndStore(domain, cached.id, cached) : cached;
    }
    if (!force) {
      if (cached?.id === id) return cached;
      const f = failed.get(domain);
      if (f?.id === id && f.until > clock.now().getTime()) return cached;
    }
    return fetchAndStore(domain, id, cached);
  }

  const memo = new Map<string, { policy: StsPolicy | null; at: number; refreshedAt: number }>();
  const remember = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key);
    if (map.size >= MEMO_DOMAINS) map.delete(map.keys().next().value!);
    map.set(key, value);
  };

  /** Concurrent attempts to one domain share one lookup and fetch; answers are kept MEMO_MS. */
  function once(domain: string, force: boolean): Promise<StsPolicy | null> {
    const d = normalize(domain);
    const now = clock.now().getTime();
    const m = memo.get(d);
    const keep = deps.memoMs ?? MEMO_MS;
    if (m && (force ? now - m.refreshedAt < keep : now - m.at < keep)) return Promise.resolve(m.policy);
    const key = `${force ? 'refresh' : 'policy'}:${d}`;
    let p = inflight.get(key);
    if (!p) {
      p = resolve(d, force)
        .then((policy) => {
          const at = clock.now().getTime();
          remember(memo, d, { policy, at, refreshedAt: force ? at : (memo.get(d)?.refreshedAt ?? 0) });
          return policy;
        })
        .finally(() => inflight.delete(key));
      inflight.set(key, p);
    }
    return p;
  }

  let pending = new Map<string, TlsCountRow>();
  let timer: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    const rows = [...pending.values()];
    pending = new Map();
    try {
      await addTlsCounts(orm, rows);
    } catch (err) {
      // Put the counts back so the next flush writes them.
      for (const r of rows) add(r.policy_domain, r.day, r.successes, r.failures);
      throw err;
    }
  }

  function add(policyDomain: string, day: string, successes: number, failures: number): void {
    const key = `${policyDomain} ${day}`;
    const row = pending.get(key) ?? { policy_domain: policyDomain, day, successes: 0, failures: 0 };
    row.successes += successes;
    row.failures += failures;
    pending.set(key, row);
    if (!timer) {
      timer = setTimeout(() => {
        flush().catch((err) => log.error({ err }, 'could not write TLS-RPT counts'));
      }, FLUSH_AFTER_MS);
      timer.unref();
    }
  }

  return {
    policyFor: (domain) => once(domain, false),
    refresh: (domain) => once(domain, true),
    report(policyDomain, ok) {
      const day = clock.now().toISOString().slice(0, 10);
      add(normalize(policyDomain), day, ok ? 1 : 0, ok ? 0 : 1);
    },
    flush,
  };
}
