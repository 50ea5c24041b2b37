import type dns from 'node:dns';
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import { isForbiddenAddress } from '../../core/webhooks/ssrf';

/** The address lookups the fetch needs (node:dns/promises Resolver fits). */
export interface AddressDns {
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
}

export interface PolicyFetchOptions {
  dns: AddressDns;
  /** Lets the policy host resolve to loopback and private addresses (tests, development). */
  allowPrivate: boolean;
  /** Extra trusted roots beside Node's (tests). */
  ca?: string[];
  /** Tests serve on another port than 443. */
  port?: number;
  timeoutMs?: number;
}

export const POLICY_PATH = '/.well-known/mta-sts.txt';
/** RFC 8461 §3.3: senders may limit the policy's size; 64 KiB is the limit its reference implementations use. */
const MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * GETs `https://<host>/.well-known/mta-sts.txt` as RFC 8461 §3.3 asks of a sender: the host's
 * certificate must be valid for its name, redirects are not followed, only a 2xx answer counts.
 * The host's addresses come from `dns` and are checked before connecting; the socket connects to
 * an address so checked (no second lookup a rebinding DNS could answer differently).
 */
export async function fetchPolicyText(host: string, o: PolicyFetchOptions): Promise<{ body: string } | { error: string }> {
  const deadline = Date.now() + (o.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const answers = await Promise.allSettled([o.dns.resolve4(host), o.dns.resolve6(host)]);
  const addresses = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value : []));
  if (addresses.length === 0) return { error: 'the policy host has no address' };
  if (!o.allowPrivate && addresses.some(isForbiddenAddress)) {
    return { error: 'refused: the policy host resolves to a private, loopback or reserved address' };
  }
  const ca = o.ca?.length ? [...tls.rootCertificates, ...o.ca] : undefined;
  let last: { error: string } = { error: 'no connection' };
  // Each address in turn while the connection itself fails; any answer from a server is final.
  for (const address of addresses) {
    const left = deadline - Date.now();
    if (left <= 0) return { error: 'no answer within the time limit' };
    const r = await getOnce(host, address, o.port ?? 443, ca, left);
    if (!('unreachable' in r)) return r;
    last = { error: r.unreachable };
  }
  return last;
}

type Attempt = { body: string } | { error: string } | { unreachable: string };

function getOnce(host: string, address: string, port: number, ca: string[] | undefined, timeoutMs: number): Promise<Attempt> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Attempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(a);
    };
    const family = address.includes(':') ? 6 : 4;
    const lookup: net.LookupFunction = (_name, options, callback) => {
      if ((options as dns.LookupAllOptions).all) {
        (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, [{ address, family }]);
      } else callback(null, address, family);
    };
    const req = https.request(
      {
        host,
        port,
        path: POLICY_PATH,
        method: 'GET',
        agent: false,
        lookup,
        ca,
        servername: host,
        headers: { 'user-agent': 'svc-mail-mta-sts/1', accept: 'text/plain' },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400) return done({ error: `redirect refused (HTTP ${status})` });
        if (status < 200 || status >= 300) return done({ error: `HTTP ${status}` });
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) return done({ error: 'the policy is larger than 64 KiB' });
          chunks.push(chunk);
        });
        res.on('end', () => done({ body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => done({ error: describe(err) }));
        res.on('close', () => done({ error: 'the connection closed before the policy ended' }));
      },
    );
    const timer = setTimeout(() => done({ error: 'no answer within the time limit' }), timeoutMs);
    req.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      // Only a failure to reach the address lets the next address be tried; a bad certificate is final.
      const unreachable = code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ECONNRESET';
      done(unreachable ? { unreachable: describe(err) } : { error: describe(err) });
    });
    req.end();
  });
}

/** An error's code (TLS verification codes name the certificate problem), or its first line. */
function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `connection failed (${code})` : err.message.split('\n')[0].slice(0, 200);
}
