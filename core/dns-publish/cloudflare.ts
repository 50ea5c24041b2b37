import Cloudflare from 'cloudflare';
import { MANAGED_COMMENT, type Wanted, type ZoneRecord } from './rules';

/**
 * The few calls publishing makes, through the official SDK. `baseURL` is Cloudflare's unless
 * CLOUDFLARE_API_BASE_URL says otherwise (tests: a local Cloudflare-compatible API). The token is
 * passed in for each use and never kept, printed or logged: the SDK's own logging is off, and its
 * errors are reduced to Cloudflare's status and message before anything sees them.
 */
export interface CloudflareSettings {
  baseURL?: string;
}

export interface Zone {
  id: string;
  name: string;
  /** What the token may do in the zone, as Cloudflare lists it (`#zone:read`, `#dns_records:edit`, …). */
  permissions: string[];
}

/** A Cloudflare refusal or an unreachable API, in words safe to show and store (no token). */
export class CloudflareFailure extends Error {}

/** Records of a name are written with this TTL (seconds): short, so a change is seen soon. */
export const RECORD_TTL = 300;

const MAX_ZONES = 1000;

export function client(token: string, settings: CloudflareSettings): Cloudflare {
  // The other credentials are named null: the SDK would otherwise take them from the environment.
  return new Cloudflare({
    apiToken: token,
    apiKey: null,
    apiEmail: null,
    userServiceKey: null,
    baseURL: settings.baseURL ?? null,
    maxRetries: 1,
    timeout: 20_000,
    logLevel: 'off',
  });
}

async function guarded<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof Cloudflare.APIError) {
      const first = err.errors?.[0]?.message;
      throw new CloudflareFailure(`${what}: ${err.status ?? 'no answer'}${first ? ` ${first}` : ''}`);
    }
    throw new CloudflareFailure(`${what}: ${err instanceof Error ? err.name : 'failed'}`);
  }
}

/** The token's id and status (GET /user/tokens/verify). */
export function verifyToken(cf: Cloudflare): Promise<{ id: string; status: string }> {
  return guarded('token verify', async () => {
    const r = await cf.user.tokens.verify();
    return { id: r.id, status: r.status };
  });
}

export function listZones(cf: Cloudflare): Promise<Zone[]> {
  return guarded('zones list', async () => {
    const zones: Zone[] = [];
    for await (const z of cf.zones.list({ per_page: 50 })) {
      zones.push({ id: z.id, name: z.name.toLowerCase(), permissions: z.permissions ?? [] });
      if (zones.length >= MAX_ZONES) break;
    }
    return zones;
  });
}

/** Every record at one name (all types: a CNAME there rules the others out). */
export function recordsAt(cf: Cloudflare, zoneId: string, name: string): Promise<ZoneRecord[]> {
  return guarded('records list', async () => {
    const out: ZoneRecord[] = [];
    for await (const r of cf.dns.records.list({ zone_id: zoneId, name: { exact: name }, per_page: 100 })) {
      out.push({
        id: r.id,
        type: r.type,
        name: r.name,
        content: r.content ?? '',
        priority: 'priority' in r ? r.priority : undefined,
        comment: r.comment ?? null,
      });
    }
    return out;
  });
}

function body(w: Wanted) {
  const common = { name: w.name, ttl: RECORD_TTL, content: w.content, comment: MANAGED_COMMENT };
  if (w.type === 'MX') return { ...common, type: 'MX' as const, priority: w.priority };
  // The tracking host must answer its CNAME as is, not Cloudflare's proxy addresses.
  if (w.type === 'CNAME') return { ...common, type: 'CNAME' as const, proxied: false };
  return { ...common, type: 'TXT' as const };
}

export function createRecord(cf: Cloudflare, zoneId: string, w: Wanted): Promise<string> {
  return guarded('record create', async () => (await cf.dns.records.create({ zone_id: zoneId, ...body(w) })).id);
}

export function updateRecord(cf: Cloudflare, zoneId: string, id: string, w: Wanted): Promise<string> {
  return guarded('record update', async () => (await cf.dns.records.update(id, { zone_id: zoneId, ...body(w) })).id);
}
