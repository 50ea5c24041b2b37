import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { TestDns } from './dns';

export interface CfRecord {
  id: string;
  type: 'TXT' | 'MX' | 'CNAME';
  name: string;
  content: string;
  priority?: number;
  ttl: number;
  proxied?: boolean;
  comment: string | null;
}

export interface CfToken {
  id: string;
  status: 'active' | 'disabled' | 'expired';
  /** As zones list them for this token: `#zone:read`, `#dns_records:edit`, … */
  permissions: string[];
}

/** Every request the API answered: method, path, and the bearer token it carried. */
export interface CfRequest {
  method: string;
  path: string;
  token: string | null;
}

const hex = () => randomBytes(16).toString('hex');

/**
 * A Cloudflare-compatible API on loopback with the endpoints the official SDK calls when
 * publishing: token verify, zones list, and a zone's DNS records list/create/update (v4 envelope,
 * page pagination). Its zones are served by a TestDns: every write shows in DNS at once, so a
 * publish is what lookups and domain verification see.
 */
export class CloudflareApi {
  readonly tokens = new Map<string, CfToken>();
  readonly zones = new Map<string, { id: string; name: string; records: CfRecord[] }>();
  readonly requests: CfRequest[] = [];
  private server?: http.Server;
  url = '';

  constructor(private readonly dns: TestDns) {}

  /** The SDK's baseURL. */
  get baseURL(): string {
    return `${this.url}/client/v4`;
  }

  addToken(permissions = ['#zone:read', '#dns_records:edit'], status: CfToken['status'] = 'active'): string {
    const token = `cf-test-${hex()}`;
    this.tokens.set(token, { id: hex(), status, permissions });
    return token;
  }

  addZone(name: string): string {
    const id = hex();
    this.zones.set(id, { id, name: name.toLowerCase(), records: [] });
    return id;
  }

  zoneNamed(name: string) {
    return [...this.zones.values()].find((z) => z.name === name.toLowerCase());
  }

  /** A record someone else made (no comment unless given), in the zone and in DNS. */
  seed(zoneName: string, r: Omit<CfRecord, 'id' | 'ttl' | 'comment'> & { comment?: string | null }): CfRecord {
    const zone = this.zoneNamed(zoneName);
    if (!zone) throw new Error(`no zone ${zoneName}`);
    const record: CfRecord = { ttl: 300, comment: null, ...r, name: r.name.toLowerCase(), id: hex() };
    zone.records.push(record);
    this.mirror(zone.records, record.name);
    return record;
  }

  records(name: string): CfRecord[] {
    return [...this.zones.values()].flatMap((z) => z.records.filter((r) => r.name === name.toLowerCase()));
  }

  /** Rewrites the DNS answers of one name from the zone's records there. */
  private mirror(records: CfRecord[], name: string) {
    const at = records.filter((r) => r.name === name);
    const txt = at.filter((r) => r.type === 'TXT').map((r) => r.content);
    const mx = at.filter((r) => r.type === 'MX').map((r) => ({ exchange: r.content, priority: r.priority ?? 10 }));
    const cname = at.find((r) => r.type === 'CNAME');
    if (txt.length) this.dns.txt.set(name, txt);
    else this.dns.txt.delete(name);
    if (mx.length) this.dns.mx.set(name, mx);
    else this.dns.mx.delete(name);
    if (cname) this.dns.cname.set(name, cname.content);
    else this.dns.cname.delete(name);
  }

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const { status, body } = this.handle(req, Buffer.concat(chunks).toString('utf8'));
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseURL;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private handle(req: http.IncomingMessage, raw: string): { status: number; body: unknown } {
    const url = new URL(req.url ?? '/', this.url);
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? null;
    this.requests.push({ method: req.method ?? '', path: url.pathname, token: auth });
    const fail = (status: number, code: number, message: string) => ({
      status,
      body: { success: false, errors: [{ code, message }], messages: [], result: null },
    });
    const ok = (result: unknown, info?: unknown) => ({
      status: 200,
      body: { success: true, errors: [], messages: [], result, ...(info ? { result_info: info } : {}) },
    });
    const token = auth ? this.tokens.get(auth) : undefined;
    if (!token) return fail(401, 10000, 'Authentication error');
    const p = url.pathname.replace(/^\/client\/v4/, '');
    const page = <T>(items: T[]) => {
      const per = Math.min(Math.max(Number(url.searchParams.get('per_page') ?? 20) || 20, 1), 100);
      const n = Math.max(Number(url.searchParams.get('page') ?? 1) || 1, 1);
      return ok(items.slice((n - 1) * per, n * per), {
        page: n,
        per_page: per,
        count: Math.min(per, Math.max(items.length - (n - 1) * per, 0)),
        total_count: items.length,
      });
    };
    if (req.method === 'GET' && p === '/user/tokens/verify') return ok({ id: token.id, status: token.status });
    if (token.status !== 'active') return fail(403, 9109, 'Invalid access token');
    const canRead = token.permissions.includes('#zone:read');
    if (req.method === 'GET' && p === '/zones') {
      const zones = canRead ? [...this.zones.values()] : [];
      return page(zones.map((z) => ({ id: z.id, name: z.name, status: 'active', permissions: token.permissions })));
    }
    const m = /^\/zones\/([^/]+)\/dns_records(?:\/([^/]+))?$/.exec(p);
    const zone = m ? this.zones.get(m[1]) : undefined;
    if (!m || !zone) return fail(404, 7003, 'Could not route to ' + p);
    if (!canRead) return fail(403, 10000, 'Authentication error');
    if (req.method === 'GET' && !m[2]) {
      const name = (url.searchParams.get('name.exact') ?? url.searchParams.get('name'))?.toLowerCase();
      const type = url.searchParams.get('type');
      return page(zone.records.filter((r) => (!name || r.name === name) && (!type || r.type === type)));
    }
    if (!token.permissions.includes('#dns_records:edit')) return fail(403, 10000, 'Authentication error');
    let body: Partial<CfRecord>;
    try {
      body = JSON.parse(raw);
    } catch {
      return fail(400, 9207, 'Request body is invalid.');
    }
    if (!body.name || !body.type || !['TXT', 'MX', 'CNAME'].includes(body.type) || typeof body.content !== 'string') {
      return fail(400, 9000, 'DNS name, type and content are required');
    }
    const record: CfRecord = {
      id: m[2] ?? hex(),
      type: body.type,
      name: body.name.toLowerCase().replace(/\.$/, ''),
      content: body.content,
      priority: body.priority,
      ttl: body.ttl ?? 1,
      proxied: body.proxied,
      comment: body.comment ?? null,
    };
    if (!(record.name === zone.name || record.name.endsWith(`.${zone.name}`)))
      return fail(400, 9005, 'Content for name is outside the zone');
    const others = zone.records.filter((r) => r.name === record.name && r.id !== record.id);
    if ((record.type === 'CNAME' && others.length) || others.some((r) => r.type === 'CNAME')) {
      return fail(400, 81053, 'An A, AAAA, or CNAME record with that host already exists.');
    }
    if (req.method === 'POST' && !m[2]) {
      zone.records.push(record);
    } else if ((req.method === 'PUT' || req.method === 'PATCH') && m[2]) {
      const i = zone.records.findIndex((r) => r.id === m[2]);
      if (i < 0) return fail(404, 81044, 'Record does not exist.');
      const old = zone.records[i];
      zone.records[i] = record;
      if (old.name !== record.name) this.mirror(zone.records, old.name);
    } else {
      return fail(405, 10405, 'Method not allowed');
    }
    this.mirror(zone.records, record.name);
    return ok(record);
  }
}
