import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator } from '../support/console';

/**
 * Every console route against what a browser (or anyone) can send: odd ids in the path, odd query
 * strings, odd forms. No answer is a 5xx, a refused post writes nothing, and a post without the
 * session's CSRF token is refused. Routes are read from the console's sources, so a new page is
 * fuzzed without being listed.
 */
const ROOT = path.resolve(__dirname, '../..');

function declaredRoutes(): { method: string; path: string }[] {
  const dir = path.join(ROOT, 'console/pages');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...fs.readFileSync(path.join(dir, f), 'utf8').matchAll(/\brouter\.(get|post)\(\s*[`']([^`']+)[`']/g)])
    .map((m) => ({ method: m[1].toUpperCase(), path: m[2] }));
}

const ODD_IDS = [
  '00000000-0000-7000-8000-000000000000',
  'none',
  '%00',
  'x'.repeat(5000),
  '..%2F..%2Fetc',
  '%E0%A4%A',
  '__proto__',
  'constructor',
];

const QUERIES = [
  'status=%00',
  'status=__proto__',
  '__proto__=1',
  'constructor=1&toString=2',
  'status=a&status=b',
  'since=99999-01-01T00:00&until=0000-01-01T00:00',
  'since=%00&until=x',
  'cursor=garbage',
  'cursor=%FF%FE',
  'limit=-1',
  `to=${'a'.repeat(20_000)}`,
  'images=1&done=%3Cscript%3E',
  'next=https://evil.example/',
  'hours=-5&org=none',
  'hours=1e309',
  'actor=key:%00&action=%00',
  '%E0%A4%A=1',
];

const FORMS: { name: string; raw: string; type?: string }[] = [
  { name: 'empty', raw: '' },
  { name: 'nul', raw: 'name=%00&email=a%00b&url=%00&slug=%00' },
  { name: 'proto', raw: '__proto__=1&constructor=2&name=__proto__&email=__proto__' },
  { name: 'repeated', raw: 'name=a&name=b&permission=admin&permission=send&ids=1&ids=2' },
  { name: 'bad utf-8', raw: 'name=%FF%FE&email=%C0%AF' },
  { name: 'huge', raw: `name=${'a'.repeat(70_000)}` },
  { name: 'long values', raw: `name=${'a'.repeat(5_000)}&email=${'b'.repeat(5_000)}@example.com&url=http://${'c'.repeat(3000)}.example` },
  { name: 'extreme numbers', raw: 'rate_limit=1e309&daily_send_cap=-99999999999999999999&stage=NaN&hours=Infinity' },
  { name: 'extreme dates', raw: 'since=99999-12-31T00:00&scheduled_at=0000-00-00' },
  { name: 'json', raw: '{"name":"x"}', type: 'application/json' },
  {
    name: 'multipart',
    raw: '--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n--x--',
    type: 'multipart/form-data; boundary=x',
  },
];

describe('console fuzz: no 5xx, no writes on refusal, CSRF on every post', function () {
  this.timeout(600_000);
  let env: TestEnv;
  let t: Tenant;
  let c: ConsoleClient;

  /** The tenant's rows that a console write could touch, as one digest. */
  async function fingerprint(): Promise<string> {
    const [row] = await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(
        `select md5(coalesce((select string_agg(x, ',' order by x) from (
            select row_to_json(o)::text as x from organizations o
            union all select row_to_json(d)::text from domains d where d.organization_id = ?
            union all select row_to_json(k)::text from api_keys k where k.organization_id = ?
            union all select row_to_json(tp)::text from topics tp where tp.organization_id = ?
            union all select row_to_json(sg)::text from segments sg where sg.organization_id = ?
            union all select row_to_json(w)::text from webhook_endpoints w where w.organization_id = ?
            union all select row_to_json(sp)::text from suppressions sp where sp.organization_id = ?
            union all select row_to_json(c)::text from contacts c where c.organization_id = ?
            union all select (to_jsonb(op) - 'password_hash')::text from operators op
          ) r), '')) || ':' || (select count(*) from audit_log) || ':' || (select count(*) from emails where status = 'unconfirmed') as f`,
        Array(7).fill(t.orgId),
      );
    return row.f;
  }

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    const op = await newOperator(env, null);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
  });

  it('finds the console routes in its sources', () => {
    const routes = declaredRoutes();
    assert.ok(routes.length >= 30, `only ${routes.length} routes found`);
  });

  it('answers every odd path, query and form without a 5xx, and a refused post writes nothing', async () => {
    const failures: string[] = [];
    let requests = 0;
    const fill = (p: string, id: string) => p.replace(':org', t.orgId).replace(/:[a-z_]+/g, id);
    const raw = async (method: string, p: string, body?: string, type = 'application/x-www-form-urlencoded') => {
      const res = await fetch(env.url + p, {
        method,
        redirect: 'manual',
        headers: {
          cookie: (c as unknown as { cookieHeader(): string }).cookieHeader(),
          ...(body !== undefined ? { 'content-type': type } : {}),
        },
        body,
      });
      requests++;
      return { status: res.status, text: await res.text() };
    };
    for (const r of declaredRoutes().filter((x) => x.path.startsWith('/console') && !x.path.includes('sign-out'))) {
      const real = fill(r.path, 'none');
      // Odd ids in every place of the path (the organization's too), each once; odd queries and forms on the path itself.
      const odd = [
        ...ODD_IDS.map((id) => fill(r.path, id)),
        ...(r.path.includes(':org') ? ODD_IDS.map((id) => r.path.replace(':org', id).replace(/:[a-z_]+/g, 'x')) : []),
      ];
      if (r.method === 'GET') {
        for (const p of odd) {
          const a = await raw('GET', p);
          if (a.status >= 500) failures.push(`GET ${p.slice(0, 100)} → ${a.status}`);
        }
        for (const q of ['', ...QUERIES]) {
          const a = await raw('GET', q ? `${real}?${q}` : real);
          if (a.status >= 500) failures.push(`GET ${real}?${q.slice(0, 40)} → ${a.status}`);
        }
        continue;
      }
      const post = async (p: string, f: { name: string; raw: string; type?: string }, token = true) => {
        const before = await fingerprint();
        const body = f.type || !token ? f.raw : `_csrf=${encodeURIComponent(c.csrf)}&${f.raw}`;
        const a = await raw('POST', p, body, f.type);
        const where = `POST ${p.slice(0, 100)} [${f.name}${token ? '' : ', no CSRF token'}] → ${a.status}`;
        if (a.status >= 500) failures.push(where);
        if (a.status >= 400 && (await fingerprint()) !== before) failures.push(`${where} wrote something`);
        return a;
      };
      for (const p of odd) await post(p, FORMS[0]);
      for (const f of FORMS) await post(real, f);
      if (!r.path.includes('sign-in') && !r.path.includes('set-password')) {
        const a = await post(real, { name: 'plausible', raw: 'name=x&email=x@example.com' }, false);
        if (a.status !== 403) failures.push(`POST ${r.path} without its CSRF token → ${a.status}, not 403`);
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${requests} requests failed`);
  });
});
