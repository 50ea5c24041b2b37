import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { isForbiddenAddress, type UrlPolicy } from '../core/webhooks/ssrf';

/** What one POST came to. */
export interface PostOutcome {
  /** The HTTP status, or null when no response came (refused address, DNS, connection, timeout). */
  statusCode: number | null;
  /** Why it failed without a status; null when a response came. */
  error: string | null;
  /** The first 4 KiB of the response body, as text. */
  body: string;
}

/** Outbound webhook seam: the real HTTP client below, or a test's fake. */
export interface WebhookPoster {
  /** POSTs `body` with `headers`; at most `concurrency` at once per endpoint (`endpointId`). */
  post(endpointId: string, url: string, headers: Record<string, string>, body: string): Promise<PostOutcome>;
  close(): void;
}

export interface WebhookHttpOptions extends UrlPolicy {
  /** Requests in flight at once to one endpoint (others wait their turn; other endpoints do not). */
  concurrencyPerEndpoint: number;
  /** Whole-request limit: a 2xx must come within it (15 s). */
  timeoutMs?: number;
}

const KEEP_BYTES = 4096;
/** Past this much response body the connection is dropped rather than drained. */
const DRAIN_BYTES = 1024 * 1024;

class ForbiddenAddress extends Error {}

/**
 * The DNS step of every new connection: all addresses of the host are resolved and the connection
 * is refused if any of them is forbidden, so DNS rebinding cannot slip a private address in
 * between a check and the connect.
 */
function guardedLookup(policy: UrlPolicy): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      if (!policy.allowPrivate && list.some((a) => isForbiddenAddress(a.address))) {
        return callback(new ForbiddenAddress('the host resolves to a forbidden address'), '', 4);
      }
      if ((options as dns.LookupAllOptions).all) (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      else callback(null, list[0].address, list[0].family);
    });
  };
}

/** First come, first served slots per endpoint. */
class Slots {
  private readonly busy = new Map<string, { n: number; waiting: (() => void)[] }>();
  constructor(private readonly limit: number) {}

  async take(key: string): Promise<() => void> {
    let s = this.busy.get(key);
    if (!s) this.busy.set(key, (s = { n: 0, waiting: [] }));
    if (s.n >= this.limit) await new Promise<void>((resolve) => s!.waiting.push(resolve));
    else s.n += 1;
    return () => {
      const next = s!.waiting.shift();
      if (next) next();
      else if (--s!.n === 0) this.busy.delete(key);
    };
  }
}

export function createWebhookHttp(opts: WebhookHttpOptions): WebhookPoster {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const lookup = guardedLookup(opts);
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: opts.concurrencyPerEndpoint * 4 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: opts.concurrencyPerEndpoint * 4 }),
  };
  const slots = new Slots(opts.concurrencyPerEndpoint);

  function once(url: URL, headers: Record<string, string>, body: string): Promise<PostOutcome> {
    return new Promise((resolve) => {
      let settled = false;
      const done = (o: PostOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(o);
      };
      const mod = url.protocol === 'https:' ? https : http;
      const req = mod.request(
        url,
        {
          method: 'POST',
          agent: agents[url.protocol as 'http:' | 'https:'],
          lookup,
          headers: {
            ...headers,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'user-agent': 'svc-mail-webhooks/1',
          },
        },
        (res) => {
          const kept: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            if (size < KEEP_BYTES) kept.push(chunk.subarray(0, KEEP_BYTES - size));
            size += chunk.length;
            if (size > DRAIN_BYTES) res.destroy();
          });
          const finish = () =>
            done({
              statusCode: res.statusCode ?? null,
              error: null,
              body: Buffer.concat(kept)
                .toString('utf8')
                .replace(/\u0000/g, ''),
            });
          res.on('end', finish);
          res.on('close', finish);
          res.on('error', finish);
        },
      );
      const timer = setTimeout(() => {
        req.destroy();
        done({ statusCode: null, error: `no response within ${timeoutMs / 1000} s`, body: '' });
      }, timeoutMs);
      req.on('error', (err) =>
        done({
          statusCode: null,
          error: err instanceof ForbiddenAddress ? 'refused: the host resolves to a private or reserved address' : describe(err),
          body: '',
        }),
      );
      req.end(body);
    });
  }

  return {
    async post(endpointId, raw, headers, body) {
      const url = new URL(raw);
      if (url.protocol !== 'https:' && !(opts.allowHttp && url.protocol === 'http:')) {
        return { statusCode: null, error: 'refused: the url must use https', body: '' };
      }
      // Node connects to a literal address without a lookup, so it is judged here.
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (!opts.allowPrivate && net.isIP(host) && isForbiddenAddress(host)) {
        return { statusCode: null, error: 'refused: a private or reserved address', body: '' };
      }
      const release = await slots.take(endpointId);
      try {
        return await once(url, headers, body);
      } finally {
        release();
      }
    },
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

/** A connection error without the caller's values: its code, or its first line. */
function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `connection failed (${code})` : err.message.split('\n')[0].slice(0, 200);
}
