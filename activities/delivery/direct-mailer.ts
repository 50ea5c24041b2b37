import net from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock';
import { mxMatchesPolicy, type StsPolicy } from '../../core/delivery/mta-sts';
import { siteFor, suspends, type Shaping, type SiteLimits } from '../../core/delivery/shaping';
import { mailOptions, signedTwice, type Mailer, type OutgoingMessage, type RecipientRejection, type SendOutcome } from '../mailer';
import { byteCapture, type DualDkim } from '../dkim-sign';
import type { StsPolicies } from './mta-sts-source';
import { routeCache, spread, type DirectDns, type MxHost } from './mx-route';
import { SitePool, type Attempt, type Suspension } from './site-pools';
import type { SessionError, TlsMode } from './smtp-session';

export type { DirectDns } from './mx-route';

export interface DirectOptions {
  dns: DirectDns;
  /** SMTP_DIRECT_PORT: the port connected to on every MX (25; tests use another). */
  port: number;
  /** DIRECT_ALLOW_PRIVATE_MX: MX hosts may resolve to loopback and private addresses (tests, development). */
  allowPrivateMx: boolean;
  heloName: string;
  /** Local addresses to send from, round robin per site; [] lets the OS choose. */
  sourceIps: string[];
  shaping: Shaping;
  policies: StsPolicies;
  clock: Clock;
  log: Logger;
  /** Extra trusted roots (tests); production trusts Node's roots, which include NODE_EXTRA_CA_CERTS. */
  ca?: string[];
}

/** Where one domain's recipients stand: those settled, and those still to try with the last answer for them. */
interface Progress {
  done: SendOutcome;
  pending: string[];
  last: { code: number | null; response: string };
  /** Every try failed on TLS (or no host was allowed): what MTA-STS enforce defers on. */
  tlsOnly: boolean;
}

// A host whose STARTTLS handshake broke is spoken to in plaintext for a while instead of failing each message once first.
const PLAIN_AFTER_TLS_FAILURE_MS = 600_000;

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();
const replyOf = (e: SessionError) => ({ code: e.responseCode ?? null, response: e.response ?? e.message });
const permanent = (code: number | null) => code !== null && code >= 500;

/** The message exactly as the relay would send it (MIME, DKIM), captured as bytes to hand to any MX. */
function composer() {
  const transport = byteCapture('direct-compose');
  // A domain with an Ed25519 key as well: composed and signed with both keys first (activities/dkim-sign.ts).
  return async (msg: OutgoingMessage): Promise<Buffer> =>
    transport.sendMail(msg.dkim?.ed25519 ? await signedTwice(msg as OutgoingMessage & { dkim: DualDkim }) : mailOptions(msg));
}

/**
 * Delivery straight to each recipient domain's MX (issue 40): one transaction per domain, hosts in
 * preference order, MTA-STS as the domain publishes it, connections kept and shaped per
 * (source IP, site). A destination's trouble is an answer, never a throw: 2xx accepted, 5xx
 * rejected for good, anything else rejected with a 4xx or null code (the caller defers it).
 */
export function createDirectMailer(o: DirectOptions): Mailer {
  const compose = composer();
  const routeOf = routeCache(o.dns, o.allowPrivateMx, () => o.clock.now().getTime());
  const pools = new Map<string, SitePool>();
  const turn = new Map<string, number>();
  const plainUntil = new Map<string, number>();
  const ips = o.sourceIps.length > 0 ? o.sourceIps : [''];

  const poolFor = (ip: string, site: string, limits: SiteLimits) => {
    const key = `${ip}|${site}`;
    let pool = pools.get(key);
    if (!pool) pools.set(key, (pool = new SitePool(limits, o.clock)));
    return pool;
  };

  /** The next source IP for the site, round robin, skipping those it is suspended for; else the earliest-ending suspension. */
  function sourceFor(site: string, limits: SiteLimits): { ip: string; pool: SitePool } | { held: Suspension } {
    const start = turn.get(site) ?? 0;
    let earliest: Suspension | null = null;
    for (let k = 0; k < ips.length; k++) {
      const ip = ips[(start + k) % ips.length];
      const pool = poolFor(ip, site, limits);
      const held = pool.suspendedNow();
      if (!held) {
        turn.set(site, (start + k + 1) % ips.length);
        return { ip, pool };
      }
      if (!earliest || held.until < earliest.until) earliest = held;
    }
    return { held: earliest! };
  }

  const reject = (addresses: string[], r: Omit<RecipientRejection, 'address'>): RecipientRejection[] =>
    addresses.map((address) => ({ address: address.toLowerCase(), ...r }));

  /**
   * Tries the hosts until every recipient is settled or none is left to try: one preference level
   * at a time, where any address of the level will do (so a kept connection to any of them is
   * used, and a new one goes to the first of the shuffled level); an address that failed is
   * dropped, one whose STARTTLS handshake broke is tried once more in plaintext (not under
   * MTA-STS enforce). When the site gets suspended for the source IP, again from the next one.
   */
  async function viaHosts(
    domain: string,
    site: { key: string; limits: SiteLimits },
    hosts: MxHost[],
    policy: StsPolicy | null,
    rcpts: string[],
    from: string,
    raw: Buffer,
  ): Promise<Progress> {
    const p: Progress = {
      done: { accepted: [], rejected: [] },
      pending: rcpts,
      last: { code: null, response: 'no MX host to try' },
      tlsOnly: true,
    };
    const enforce = policy?.mode === 'enforce';
    const reported = policy !== null && policy.mode !== 'none';
    const justFailedTls = new Set<string>();
    const tlsFor = (address: string): TlsMode =>
      enforce ? 'verify' : (plainUntil.get(address) ?? 0) > o.clock.now().getTime() ? 'plain' : 'opportunistic';
    for (;;) {
      const source = sourceFor(site.key, site.limits);
      if ('held' in source) {
        const { until, reply } = source.held;
        p.done.rejected.push(...reject(p.pending, { code: null, response: `site suspended: ${reply}`, suspendedUntil: until }));
        return { ...p, pending: [], tlsOnly: false };
      }
      const family = net.isIP(source.ip);
      const left = hosts.flatMap((h) =>
        h.addresses.filter((a) => family === 0 || net.isIP(a) === family).map((address) => ({ h, address })),
      );
      const session = { heloName: o.heloName, localAddress: source.ip || undefined, ca: o.ca };
      let suspended = false;
      while (left.length > 0 && p.pending.length > 0 && !suspended) {
        const level = left.filter((c) => c.h.priority === left[0].h.priority);
        const targets = level.map((c) => ({ host: c.h.name, address: c.address, port: o.port, tls: tlsFor(c.address) }));
        const a = await source.pool.run(targets, session, { from, to: p.pending }, raw);
        if ('suspended' in a) {
          suspended = true;
          break;
        }
        const { target } = a;
        const failure = 'unreachable' in a ? a.unreachable : 'refused' in a ? a.refused : null;
        const fresh = 'unreachable' in a ? null : a.fresh;
        // Each new session counts for the TLS report, but not the plaintext retry just after a failed handshake (counted as that failure).
        if (reported && fresh && !(target.tls === 'plain' && justFailedTls.has(target.address))) {
          o.policies.report(domain, fresh.secure && fresh.tlsVerified && mxMatchesPolicy(policy, target.host));
        }
        const used = left.findIndex((c) => c.address === target.address && c.h.name === target.host);
        if (failure?.code === 'ETLS') {
          if (reported) o.policies.report(domain, false);
          p.last = { code: null, response: `TLS with ${target.host} failed: ${failure.message}` };
          if (target.tls === 'opportunistic') {
            plainUntil.set(target.address, o.clock.now().getTime() + PLAIN_AFTER_TLS_FAILURE_MS);
            justFailedTls.add(target.address);
          } else left.splice(used, 1);
          continue;
        }
        p.tlsOnly = false;
        left.splice(used, 1);
        const reply = settle(p, a).find((r) => suspends(site.limits, r.code, r.response));
        if (reply) {
          const s = source.pool.suspend(reply.response);
          o.log.warn(
            { site: site.key, sourceIp: source.ip || null, until: s.until, reply: reply.response },
            'direct delivery: site suspended',
          );
          suspended = true;
        }
      }
      if (!suspended) return p;
    }
  }

  /**
   * Folds one attempt's answers into the progress: accepted and 5xx replies settle a recipient,
   * anything else leaves it for the next host. A connection that failed before MAIL FROM (refused,
   * a 4xx or 5xx greeting) is the host's answer, not the recipients': it never settles them.
   * Returns the replies seen, to check for throttling.
   */
  function settle(p: Progress, a: Attempt): { code: number | null; response: string }[] {
    const failure = 'unreachable' in a ? a.unreachable : 'refused' in a ? a.refused : null;
    const perRecipient = 'sent' in a ? a.sent.rejectedErrors : (failure?.rejectedErrors ?? []);
    const accepted = new Set(('sent' in a ? a.sent.accepted : []).map((r) => r.toLowerCase()));
    const own = new Map(
      perRecipient.map((r) => [(r.recipient ?? '').toLowerCase(), { code: r.responseCode ?? null, response: r.response ?? r.message }]),
    );
    const whole = failure && perRecipient.length === 0 ? replyOf(failure) : null;
    const final = !('unreachable' in a);
    const still: string[] = [];
    for (const rcpt of p.pending) {
      const lower = rcpt.toLowerCase();
      const reply = own.get(lower) ?? whole;
      if (accepted.has(lower)) p.done.accepted.push(lower);
      else if (final && reply && permanent(reply.code)) p.done.rejected.push({ address: lower, ...reply });
      else {
        still.push(rcpt);
        if (reply) p.last = reply;
      }
    }
    p.pending = still;
    return whole ? [whole] : [...own.values()];
  }

  /** One recipient domain: route, policy, hosts; MTA-STS enforce re-reads the policy once before deferring. */
  async function toDomain(domain: string, rcpts: string[], from: string, raw: Buffer): Promise<SendOutcome> {
    const route = await routeOf(domain);
    if (!('hosts' in route)) return { accepted: [], rejected: reject(rcpts, route) };
    // The site is the whole MX set, whichever hosts a policy lets this message use.
    const site = siteFor(
      o.shaping,
      route.hosts.map((h) => h.name),
    );
    let policy: StsPolicy | null;
    try {
      policy = await o.policies.policyFor(domain);
    } catch (e) {
      // Delivering without a policy that may be enforce could send in plaintext what must not be: wait instead.
      o.log.warn({ domain, err: e }, 'direct delivery: MTA-STS policy lookup failed');
      return { accepted: [], rejected: reject(rcpts, { code: null, response: 'MTA-STS policy lookup failed' }) };
    }
    const done: SendOutcome = { accepted: [], rejected: [] };
    let pending = rcpts;
    for (let refreshed = false; ; refreshed = true) {
      const enforce = policy?.mode === 'enforce';
      const hosts = enforce ? route.hosts.filter((h) => mxMatchesPolicy(policy!, h.name)) : route.hosts;
      if (enforce && hosts.length === 0) o.policies.report(domain, false);
      const p = await viaHosts(domain, site, spread(hosts), policy, pending, from, raw);
      done.accepted.push(...p.done.accepted);
      done.rejected.push(...p.done.rejected);
      pending = p.pending;
      if (pending.length === 0) return done;
      if (!enforce || !p.tlsOnly) {
        done.rejected.push(...reject(pending, p.last));
        return done;
      }
      const why = hosts.length === 0 ? 'no MX host matches the policy' : p.last.response;
      if (refreshed) {
        o.log.info({ domain, reason: why }, 'direct delivery: deferred by MTA-STS enforce');
        done.rejected.push(...reject(pending, { code: null, response: `MTA-STS policy (enforce) of ${domain} not met: ${why}` }));
        return done;
      }
      policy = await o.policies.refresh(domain).catch(() => policy);
    }
  }

  return {
    finalDestination: true,
    defers: true,
    async send(msg) {
      const raw = await compose(msg);
      const byDomain = new Map<string, string[]>();
      for (const rcpt of msg.envelope.to) byDomain.set(domainOf(rcpt), [...(byDomain.get(domainOf(rcpt)) ?? []), rcpt]);
      // One domain's unexpected failure must not lose what the others' MX took (their answers stand).
      const settled = await Promise.allSettled([...byDomain].map(([domain, rcpts]) => toDomain(domain, rcpts, msg.envelope.from, raw)));
      const outcomes = settled.map((r, i): SendOutcome => {
        if (r.status === 'fulfilled') return r.value;
        const [domain, rcpts] = [...byDomain][i];
        o.log.error({ err: r.reason, domain, errorId: 'direct_domain_failed' }, 'direct delivery: a recipient domain failed unexpectedly');
        return { accepted: [], rejected: reject(rcpts, { code: null, response: 'local error while delivering; tried again later' }) };
      });
      return { accepted: outcomes.flatMap((x) => x.accepted), rejected: outcomes.flatMap((x) => x.rejected) };
    },
    close() {
      for (const pool of pools.values()) pool.close();
    },
  };
}
