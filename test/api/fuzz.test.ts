import assert from 'node:assert/strict';
import http from 'node:http';
import { ERRORS } from '../../core/errors';
import { createDomain, createKey } from '../../core/provisioning';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { inboxApp } from '../support/inbox-app';
import { WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait';
import { declaredRoutes } from '../support/api-routes';
import { createSecrets } from '../../core/secrets';
import { platformDns } from '../../core/domains/identity';
import { ensureHosting } from '../../core/domains/mta-sts-hosting';

/**
 * Every endpoint against the shapes that once produced 500s (deep nesting, NUL and lone surrogates
 * inside it, `__proto__`-like keys, extreme dates, NUL in queries, huge values, odd content types):
 * each answer is a 4xx (or a 2xx where the endpoint ignores the input), never a 5xx, and a refused
 * request writes nothing. A new route fails the coverage check until it joins ROUTES.
 */
interface Route {
  method: string;
  /** With :email, :key, :domain, :contact, :topic, :segment, :template, :n, :webhook, :delivery, :id placeholders. */
  path: string;
  /** Reads a JSON body. */
  body?: boolean;
  /** A recipient's page (no API key): refusals are HTML pages, not catalogued JSON errors. */
  page?: boolean;
}

const ROUTES: Route[] = [
  { method: 'GET', path: '/health' },
  { method: 'GET', path: '/ready' },
  { method: 'POST', path: '/api/v1/emails', body: true },
  { method: 'POST', path: '/api/v1/emails/batch', body: true },
  { method: 'GET', path: '/api/v1/emails/:email' },
  { method: 'GET', path: '/api/v1/emails' },
  { method: 'POST', path: '/api/v1/emails/:email/cancel' },
  { method: 'POST', path: '/api/v1/keys', body: true },
  { method: 'GET', path: '/api/v1/keys' },
  { method: 'GET', path: '/api/v1/keys/:key' },
  { method: 'POST', path: '/api/v1/keys/:key/rotate' },
  { method: 'DELETE', path: '/api/v1/keys/:key' },
  { method: 'POST', path: '/api/v1/domains', body: true },
  { method: 'GET', path: '/api/v1/domains' },
  { method: 'GET', path: '/api/v1/domains/:domain' },
  { method: 'POST', path: '/api/v1/domains/:domain/verify' },
  { method: 'PATCH', path: '/api/v1/domains/:domain', body: true },
  { method: 'DELETE', path: '/api/v1/domains/:domain' },
  { method: 'GET', path: '/api/v1/organization' },
  { method: 'PATCH', path: '/api/v1/organization', body: true },
  { method: 'GET', path: '/api/v1/audit-log' },
  { method: 'POST', path: '/api/v1/contacts', body: true },
  { method: 'GET', path: '/api/v1/contacts' },
  { method: 'GET', path: '/api/v1/contacts/:contact' },
  { method: 'POST', path: '/api/v1/contacts/:contact/subscriptions', body: true },
  { method: 'DELETE', path: '/api/v1/contacts/:contact' },
  { method: 'POST', path: '/api/v1/topics', body: true },
  { method: 'GET', path: '/api/v1/topics' },
  { method: 'GET', path: '/api/v1/topics/:topic' },
  { method: 'PATCH', path: '/api/v1/topics/:topic', body: true },
  { method: 'DELETE', path: '/api/v1/topics/:topic' },
  { method: 'POST', path: '/api/v1/segments', body: true },
  { method: 'GET', path: '/api/v1/segments' },
  { method: 'GET', path: '/api/v1/segments/:segment' },
  { method: 'DELETE', path: '/api/v1/segments/:segment' },
  { method: 'POST', path: '/api/v1/templates', body: true },
  { method: 'GET', path: '/api/v1/templates' },
  { method: 'GET', path: '/api/v1/templates/:template' },
  { method: 'PATCH', path: '/api/v1/templates/:template', body: true },
  { method: 'POST', path: '/api/v1/templates/:template/publish' },
  { method: 'GET', path: '/api/v1/templates/:template/versions/:n' },
  { method: 'POST', path: '/api/v1/templates/:template/render', body: true },
  // After the routes that need the template.
  { method: 'DELETE', path: '/api/v1/templates/:template' },
  { method: 'POST', path: '/api/v1/webhooks', body: true },
  { method: 'GET', path: '/api/v1/webhooks' },
  { method: 'GET', path: '/api/v1/webhooks/:webhook' },
  { method: 'PATCH', path: '/api/v1/webhooks/:webhook', body: true },
  { method: 'POST', path: '/api/v1/webhooks/:webhook/rotate-secret' },
  { method: 'GET', path: '/api/v1/webhooks/:webhook/deliveries' },
  { method: 'POST', path: '/api/v1/webhooks/:webhook/deliveries/:delivery/retry' },
  { method: 'POST', path: '/api/v1/webhooks/:webhook/recover', body: true },
  // After the routes that need the webhook.
  { method: 'DELETE', path: '/api/v1/webhooks/:webhook' },
  { method: 'POST', path: '/api/v1/suppressions', body: true },
  { method: 'GET', path: '/api/v1/suppressions' },
  { method: 'DELETE', path: '/api/v1/suppressions/:suppression' },
  { method: 'POST', path: '/api/v1/broadcasts', body: true },
  { method: 'GET', path: '/api/v1/broadcasts' },
  { method: 'GET', path: '/api/v1/broadcasts/:broadcast' },
  { method: 'POST', path: '/api/v1/broadcasts/:broadcast/cancel' },
  { method: 'POST', path: '/api/v1/events', body: true },
  { method: 'POST', path: '/api/v1/automations', body: true },
  { method: 'GET', path: '/api/v1/automations' },
  { method: 'GET', path: '/api/v1/automations/:automation' },
  { method: 'PUT', path: '/api/v1/automations/:automation', body: true },
  { method: 'PATCH', path: '/api/v1/automations/:automation', body: true },
  { method: 'GET', path: '/api/v1/automations/:automation/runs' },
  { method: 'GET', path: '/api/v1/automation-runs/:run' },
  { method: 'POST', path: '/api/v1/automation-runs/:run/cancel' },
  // After the routes that need the automation and its run.
  { method: 'DELETE', path: '/api/v1/automations/:automation' },
  { method: 'GET', path: '/u/:token', page: true },
  { method: 'POST', path: '/u/:token', body: true, page: true },
  { method: 'GET', path: '/t/o/:token', page: true },
  { method: 'GET', path: '/t/c/:token', page: true },
  // MTA-STS hosting (issue 41): the policy (404 JSON for a Host that names no hosted host) and TLS-RPT reports.
  { method: 'GET', path: '/.well-known/mta-sts.txt' },
  { method: 'POST', path: '/tlsrpt/:report', body: true },
  { method: 'GET', path: '/inbox' },
  { method: 'GET', path: '/inbox/messages.json' },
  { method: 'GET', path: '/inbox/:id' },
  { method: 'GET', path: '/inbox/:id/raw' },
  { method: 'GET', path: '/api/v1/openapi.json' },
  { method: 'GET', path: '/docs' },
  { method: 'GET', path: '/docs/redoc.standalone.js' },
];

const deep = (open: string, inner: string, close: string, n = 10_000) => open.repeat(n) + inner + close.repeat(n);
const FAR = [
  '+275760-09-13T00:00:00.000Z',
  '0000-01-01T00:00:00Z',
  '-271821-04-20T00:00:00Z',
  '+275760-09-13',
  '0000-01-01',
  '-271821-04-20',
];

/** Raw bodies: what a client can put on the wire. */
const BODIES: { name: string; raw: string; type?: string }[] = [
  { name: 'deep array', raw: deep('[', '', ']') },
  { name: 'deep object', raw: deep('{"a":', '1', '}') },
  { name: 'deep object with NUL', raw: deep('{"a":', '"\\u0000"', '}') },
  { name: 'deep array with a lone surrogate', raw: deep('[', '"\\ud800"', ']') },
  { name: '65 levels', raw: deep('[', '1', ']', 65) },
  {
    name: 'prototype keys',
    raw: '{"__proto__":{"admin":true},"constructor":{"prototype":{"polluted":1}},"toString":"x","hasOwnProperty":1}',
  },
  {
    name: 'prototype keys nested',
    raw: '{"name":"k","permission":"send","mode":"live","headers":{"__proto__":"x"},"tags":[{"__proto__":{}}]}',
  },
  {
    name: 'NUL in every value',
    raw: JSON.stringify({
      name: 'a\u0000',
      from: 'a\u0000@x.test',
      to: 'b@x.test',
      subject: '\u0000',
      text: 't',
      postal_address: '\u0000',
      permission: 'send',
      mode: 'live',
    }),
  },
  { name: 'NUL in a key', raw: '{"na\\u0000me":"k"}' },
  { name: 'lone surrogates', raw: '{"name":"\\udfff","subject":"\\ud800","text":"\\ud800","from":"\\ud800@x.test","to":"a@x.test"}' },
  ...FAR.map((d) => ({
    name: `scheduled_at ${d}`,
    raw: JSON.stringify({ from: 'a@x.test', to: 'b@x.test', subject: 's', text: 't', scheduled_at: d }),
  })),
  { name: 'huge numbers', raw: '{"rate_limit":1e400,"daily_send_cap":99999999999999999999999,"limit":-1e308,"name":1e308}' },
  { name: 'numbers near the int4 edge', raw: '{"rate_limit":2147483648,"daily_send_cap":2147483648}' },
  {
    name: 'huge string',
    raw: JSON.stringify({ name: 'x'.repeat(3_000_000), subject: 'x'.repeat(3_000_000), from: 'a@x.test', to: 'b@x.test', text: 't' }),
  },
  { name: 'huge array', raw: JSON.stringify(Array.from({ length: 20_000 }, () => ({}))) },
  { name: 'many keys', raw: JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))) },
  {
    name: 'wrong types',
    raw: '{"from":["a@x.test"],"to":{"a":1},"subject":1,"html":false,"headers":[],"tags":"x","attachments":{},"name":[],"permission":{},"domain_ids":"x","stream":1}',
  },
  {
    name: 'audience shapes with prototype keys',
    raw: '{"email":"__proto__@x.test","properties":{"__proto__":{"x":1},"constructor":"c"},"topics":["__proto__","constructor"],"topic":"__proto__","state":"subscribed","slug":"__proto__","filter":{"all":[{"__proto__":{"status":"SUBSCRIBED"}}]},"subscriptions":[{"__proto__":{}}]}',
  },
  {
    name: 'audience values at the extremes',
    raw: `{"email":"a@x.test","properties":{"n":1e400,"m":-1e400,"big":99999999999999999999999,"s":"\\ud800","nul":"a\\u0000"},"first_name":"\\udfff","filter":{"all":[${'{"status":"SUBSCRIBED"},'.repeat(30)}{"status":"SUBSCRIBED"}]},"name":"x"}`,
  },
  {
    name: 'audience nesting within the depth limit',
    raw: `{"email":"a@x.test","properties":${deep('{"a":', '1', '}', 60)},"filter":${deep('{"all":[', '1', ']}', 30)},"subscriptions":${deep('[', '1', ']', 60)}}`,
  },
  {
    name: 'template shapes with prototype keys',
    raw: '{"from":"a@x.test","to":"b@x.test","template":{"slug":"fuzz-template","data":{"__proto__":{"name":"x"},"constructor":{"prototype":1},"name.__proto__":1}},"name":"__proto__","subject":"{{constructor}}","variables":[{"key":"__proto__","type":"string"},{"__proto__":{}}],"version":"__proto__","data":{"__proto__":1}}',
  },
  {
    name: 'template data at the extremes',
    raw: `{"from":"a@x.test","to":"b@x.test","template":{"slug":"fuzz-template","version":1e400,"data":{"name":${deep('{"a":', '1', '}', 60)},"n":1e400}},"version":99999999999999999999,"data":{"name":"\ud800${'x'.repeat(3000)}","extra":${deep('[', '1', ']', 60)}},"subject":"{{${'a.'.repeat(500)}a}}","html":"${'{{#if a}}'.repeat(2000)}"}`,
  },
  {
    name: 'template data that renders too big',
    raw: JSON.stringify({
      from: 'a@x.test',
      to: 'b@x.test',
      template: { slug: 'fuzz-template', data: { name: 'x'.repeat(2_100_000) } },
      data: { name: 'x'.repeat(2_100_000) },
    }),
  },
  {
    name: 'suppression addresses that are not one mailbox',
    raw: '{"email":"a@x.test, b@x.test","reason":"bounce"}',
  },
  {
    name: 'tracking and topic shapes with prototype keys',
    raw: '{"from":"a@x.test","to":"b@x.test","subject":"s","html":"<a href=\\"https://x.test/\\">x</a>","kind":"bulk.x","topic":"__proto__","track":{"opens":true,"clicks":true,"__proto__":{"x":1}}}',
  },
  {
    name: 'tracking and topic of the wrong types',
    raw: '{"from":"a@x.test","to":["b@x.test","c@x.test"],"subject":"s","text":"t","kind":"bulk.x","track":{"opens":"yes","clicks":null},"topic":{"slug":1}}',
  },
  {
    name: 'track null, topic with NUL',
    raw: '{"from":"a@x.test","to":"b@x.test","subject":"s","text":"t","kind":"bulk.x","track":null,"topic":"a\\u0000"}',
  },
  {
    name: 'topic huge',
    raw: JSON.stringify({
      from: 'a@x.test',
      to: 'b@x.test',
      subject: 's',
      text: 't',
      kind: 'bulk.x',
      topic: 'x'.repeat(100_000),
      track: {},
    }),
  },
  {
    name: 'broadcast shapes with prototype keys',
    raw: '{"segment_id":"__proto__","from":"a@x.test","topic":"__proto__","kind":"broadcast.__proto__","subject":"s","text":"t","template":{"__proto__":{"slug":"x"}},"scheduled_at":"+275760-09-13T00:00:00.000Z","name":"\\u0000"}',
  },
  {
    name: 'broadcast values of the wrong types',
    raw: '{"segment_id":["a"],"from":{"a":1},"topic":1,"kind":false,"subject":[],"html":{},"template":"slug","scheduled_at":0}',
  },
  { name: 'suppression address with a display name', raw: '{"email":"Ann <ann@x.test>"}' },
  { name: 'suppression address with NUL and line breaks', raw: '{"email":"ann\\u0000@x.test\\r\\nBcc: b@x.test"}' },
  { name: 'suppression address too long', raw: JSON.stringify({ email: `${'a'.repeat(64)}@${'b'.repeat(250)}.test` }) },
  {
    name: 'webhook shapes with prototype keys and NUL',
    raw: '{"url":"http://exa\\u0000mple.com/","events":["__proto__","constructor"],"since":"+275760-09-13T00:00:00.000Z","enabled":"true","description":{"__proto__":1}}',
  },
  {
    name: 'webhook values at the extremes',
    raw: `{"url":"javascript:alert(1)//${'x'.repeat(3000)}","events":"email.sent","since":"0000-01-01T00:00:00Z","description":"${'d'.repeat(600)}"}`,
  },
  {
    name: 'webhook lists repeated and odd addresses',
    raw: `{"url":"https://[::ffff:127.0.0.1]:99999/","events":[${'"email.sent",'.repeat(40)}"email.sent"],"since":"2026-02-30T00:00:00Z"}`,
  },
  {
    name: 'tracking host shapes with prototype keys',
    raw: '{"tracking_host":{"__proto__":{"x":1},"constructor":"c"},"__proto__":{"tracking_host":"links.x.test"}}',
  },
  { name: 'tracking host with NUL', raw: '{"tracking_host":"links\\u0000.x.test"}' },
  { name: 'tracking host with a lone surrogate', raw: '{"tracking_host":"\\ud800.x.test"}' },
  { name: 'tracking host nested within the depth limit', raw: `{"tracking_host":${deep('{"a":', '"links.x.test"', '}', 60)}}` },
  { name: 'tracking host as a list', raw: `{"tracking_host":[${'"links.x.test",'.repeat(1000)}"links.x.test"]}` },
  { name: 'tracking host huge', raw: JSON.stringify({ tracking_host: `${'a.'.repeat(1_500_000)}test` }) },
  { name: 'tracking host numbers', raw: '{"tracking_host":1e400}' },
  { name: 'tracking host odd names', raw: '{"tracking_host":"-links-.x.test"}' },
  { name: 'a tracking host', raw: '{"tracking_host":"Links.Fuzz.Example."}' },
  {
    name: 'automation shapes with prototype keys',
    raw: '{"name":"__proto__","trigger":{"__proto__":{"event":"a"},"constructor":1},"steps":[{"type":"update_contact","properties":{"__proto__":{"x":1}},"topics":["__proto__",{"__proto__":{}}]},{"__proto__":{"type":"delay"}},{"type":"condition","if":{"__proto__":{"status":"subscribed"}},"then":[]}]}',
  },
  {
    name: 'automation conditions nested to the JSON limit',
    raw: `{"name":"deep","trigger":{"event":"e"},"steps":${deep('[{"type":"condition","if":{"status":"subscribed"},"then":', '[]', '}]', 20)}}`,
  },
  {
    name: 'automation durations and steps at the extremes',
    raw: `{"name":"x","trigger":{"event":"${'e'.repeat(200)}"},"steps":[{"type":"delay","duration":"P99999999999999999999D"},{"type":"delay","duration":1e400},{"type":"delay","duration":-0},{"type":"wait_for_event","event":"e","timeout":"PT-1S"},{"type":"send_email","from":"a@x.test, b@x.test","template":{"slug":"fuzz-template","data":{}}},${'{"type":"delay","duration":1},'.repeat(120)}{"type":"delay","duration":"P1W2D"}]}`,
  },
  {
    name: 'automation values of the wrong types',
    raw: '{"name":1,"enabled":"yes","trigger":"signed_up","steps":{"type":"delay"}}',
  },
  {
    name: 'event shapes with prototype keys',
    raw: '{"name":"__proto__","email":"a@x.test","data":{"__proto__":{"x":1},"constructor":{"prototype":1}},"id":{"__proto__":"x"}}',
  },
  {
    name: 'event values at the extremes',
    raw: `{"name":"\\u0000","email":"${'a'.repeat(400)}@x.test","data":{"n":1e400,"s":"\\ud800"},"id":"${'i'.repeat(200)}"}`,
  },
  {
    name: 'a TLS report with prototype keys',
    type: 'application/tlsrpt+json',
    raw: '{"__proto__":{"organization-name":"x"},"organization-name":"__proto__","report-id":{"__proto__":1},"date-range":{"start-datetime":"+275760-09-13T00:00:00.000Z"},"policies":[{"__proto__":{}}]}',
  },
  {
    name: 'a TLS report at the extremes',
    type: 'application/tlsrpt+json',
    raw: `{"organization-name":"\\u0000","report-id":"${'r'.repeat(3000)}","date-range":{"start-datetime":"0000-01-01T00:00:00Z"},"policies":[{"policy":{"policy-domain":"x"},"summary":{"total-successful-session-count":1e400,"total-failure-session-count":-1}}]}`,
  },
  {
    name: 'a TLS report counting past bigint',
    type: 'application/tlsrpt+json',
    raw: '{"organization-name":"o","report-id":"r","date-range":{"start-datetime":"2031-01-01T00:00:00Z"},"policies":[{"policy":{"policy-domain":"fuzz"},"summary":{"total-successful-session-count":99999999999999999999999,"total-failure-session-count":0}}]}',
  },
  { name: 'a TLS report nested deep', type: 'application/tlsrpt+json', raw: deep('{"policies":[', '1', ']}', 40) },
  { name: 'a TLS report typed gzip that is not', type: 'application/tlsrpt+gzip', raw: '{"a":1}' },
  { name: 'a scalar', raw: '"text"' },
  { name: 'null', raw: 'null' },
  { name: 'broken', raw: '{"a":' },
  { name: 'upper-case media type', raw: '{}', type: 'APPLICATION/JSON' },
  { name: 'latin-1 charset', raw: '{}', type: 'application/json; charset=latin1' },
  { name: 'no media type', raw: '{}', type: '' },
  { name: 'form media type', raw: 'a=1', type: 'application/x-www-form-urlencoded' },
];

const cursorAt = (t: string) => Buffer.from(`v1|${t}|01a20000-0000-7000-8000-000000000000`).toString('base64url');
/** Query strings, appended to every route. */
const QUERIES: string[] = [
  '__proto__=1',
  'constructor=1',
  'toString=1',
  'hasOwnProperty=x',
  '__proto__[admin]=1',
  ...FAR.flatMap((d) => [`since=${encodeURIComponent(d)}`, `until=${encodeURIComponent(d)}`, `cursor=${cursorAt(d)}`]),
  'to=%00',
  'kind=a%00b',
  'limit=%00',
  'cursor=%00',
  'status=queued%00',
  'since=2026-01-01%00',
  'limit=1e309',
  'limit=99999999999999999999',
  'limit=-0',
  'limit=NaN',
  'limit=1&limit=2',
  'reason=bounce%00',
  'reason=__proto__',
  'email=a%00@x.test',
  'email=a@x.test&email=b@x.test',
  `email=${'a'.repeat(300)}@x.test`,
  `to=${'a'.repeat(6000)}`,
  `cursor=${'A'.repeat(6000)}`,
];

/** Authorization headers a client can send (Node's client refuses NUL and line breaks in headers). */
const AUTHORIZATIONS = [
  'Bearer',
  'Bearer ',
  'Bearer svc_live_',
  `Bearer svc_live_${'x'.repeat(5000)}`,
  'Bearer svc_live_ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ',
  'Bearer svc_test_abcdefghijklmnopqrstuvwxyz a b',
  'Basic',
  'Basic !!!!',
  `Basic ${Buffer.from('svc').toString('base64')}`,
  `Basic ${Buffer.from(':svc_live_abcdefghijklmnopqrstuvwxyz').toString('base64')}`,
  'Digest username="x"',
  'bearer svc_live_abcdefghijklmnopqrstuvwxyz',
];

/** Path ids, substituted for each placeholder. */
const IDS = ['%00', '__proto__', 'constructor', 'toString', '..%2f..%2fetc', 'x'.repeat(2000), '%F0%9F%92%A9', '-1', '1e400'];

interface Answer {
  status: number;
  body: unknown;
}

function send(base: string, method: string, p: string, authorization: string | null, raw?: string, type?: string): Promise<Answer> {
  const url = new URL(base + p);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = {};
    if (authorization !== null) headers.authorization = authorization;
    if (raw !== undefined) {
      headers['content-length'] = Buffer.byteLength(raw);
      if (type !== '') headers['content-type'] = type ?? 'application/json';
    }
    const req = http.request({ host: url.hostname, port: url.port, method, path: url.pathname + url.search, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // HTML pages and raw sources stay text.
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end(raw);
  });
}

describe('API fuzz: no 5xx and no writes for anything a client can send, on every endpoint', function () {
  this.timeout(300_000);
  let env: TestEnv;
  let t: Tenant;
  let admin: string;
  let inboxUrl: string;
  let guardedInboxUrl: string;
  const stops: (() => Promise<void>)[] = [];
  const ids: Record<string, string> = {};

  /** The tenant's rows (and row counts), so a refused request can be shown to have written nothing. */
  async function fingerprint(): Promise<string> {
    const [row] = await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(
        `select md5(coalesce((select string_agg(x, ',' order by x) from (
            select row_to_json(o)::text as x from organizations o where o.id = ?
            union all select row_to_json(d)::text from domains d where d.organization_id = ?
            union all select row_to_json(k)::text from api_keys k where k.organization_id = ?
            union all select row_to_json(t)::text from api_key_tokens t join api_keys k on k.id = t.api_key_id where k.organization_id = ?
            union all select row_to_json(c)::text from contacts c where c.organization_id = ?
            union all select row_to_json(s)::text from subscriptions s join contacts c on c.id = s.contact_id where c.organization_id = ?
            union all select row_to_json(tp)::text from topics tp where tp.organization_id = ?
            union all select row_to_json(sg)::text from segments sg where sg.organization_id = ?
            union all select (to_jsonb(a) - 'consumed_at')::text from automation_triggers a where a.organization_id = ?
            union all select row_to_json(tm)::text from templates tm where tm.organization_id = ?
            union all select row_to_json(v)::text from template_versions v join templates tm on tm.id = v.template_id where tm.organization_id = ?
            union all select row_to_json(w)::text from webhook_endpoints w where w.organization_id = ?
            union all select row_to_json(sp)::text from suppressions sp where sp.organization_id = ?
            union all select row_to_json(b)::text from broadcasts b where b.organization_id = ?
            union all select row_to_json(au)::text from automations au where au.organization_id = ?
            union all select row_to_json(av)::text from automation_versions av join automations au on au.id = av.automation_id where au.organization_id = ?
            union all select (to_jsonb(ar) - 'wake_at')::text from automation_runs ar where ar.organization_id = ?
            union all select row_to_json(eq)::text from event_quotas eq where eq.organization_id = ?
          ) r), '')) || ':' || (select count(*) from emails where organization_id = ?) || ':' || (select count(*) from audit_log where organization_id = ?)
          || ':' || (select count(*) from webhook_deliveries where organization_id = ?) as f`,
        Array(21).fill(t.orgId),
      );
    return row.f;
  }

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    const orm = env.service.db.orm;
    admin = (await createKey(orm, t.orgId, { name: 'fuzz', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
    // A webhook for domain.verified only (so the fuzz's own sends add no deliveries), and one
    // delivery of it: the domain created below.
    const receiver = new WebhookReceiver();
    await receiver.start();
    stops.push(() => receiver.stop());
    ids.webhook = (
      await t.call('POST', '/api/v1/webhooks', { as: 'admin', body: { url: `${receiver.url}/fuzz`, events: ['domain.verified'] } })
    ).body.id;
    ids.domain = (await createDomain(orm, t.orgId, `fuzz-${Date.now()}.example.test`, { verified: true })).id;
    // A hosted return-path host, so a report's address is real and bodies reach the report reader.
    const identity = { secrets: createSecrets(Buffer.alloc(32, 7)), platform: platformDns('mail.fuzz.test') };
    const hosted = await createDomain(orm, t.orgId, `fuzz-sts-${Date.now()}.example.test`, { verified: true, identity });
    ids.report = (await ensureHosting(orm, hosted.id, 'https://svc.fuzz.test'))!.reportToken;
    ids.key = (await createKey(orm, t.orgId, { name: 'target', permission: 'send', mode: 'live' })).key.id;
    const sent = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: 'fuzz@example.com',
        subject: 's',
        text: 't',
        scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
      },
    });
    ids.email = sent.body.id;
    ids.topic = 'fuzz-topic';
    await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: ids.topic, name: 'Fuzz' } });
    ids.contact = (await t.call('POST', '/api/v1/contacts', { body: { email: 'fuzz@people.example', topics: [ids.topic] } })).body.id;
    ids.segment = (
      await t.call('POST', '/api/v1/segments', {
        as: 'admin',
        body: { name: 'Fuzz', filter: { all: [{ topic: ids.topic, state: 'SUBSCRIBED' }] } },
      })
    ).body.id;
    // A broadcast scheduled a day ahead: it never sends during the fuzz.
    const bulkDomain = await createDomain(orm, t.orgId, `fuzz-bulk-${Date.now()}.example.test`, { verified: true, stream: 'bulk' });
    ids.broadcast = (
      await t.call('POST', '/api/v1/broadcasts', {
        as: 'admin',
        body: {
          segment_id: ids.segment,
          from: `news@${bulkDomain.name}`,
          subject: 's',
          text: 't',
          scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
        },
      })
    ).body.id;
    assert.ok(ids.broadcast, 'the fuzz broadcast');
    ids.template = 'fuzz-template';
    await t.call('POST', '/api/v1/templates', {
      as: 'admin',
      body: {
        name: 'Fuzz',
        slug: ids.template,
        subject: 'Hi {{name}}',
        html: '<p>{{name}}</p>',
        variables: [{ key: 'name', type: 'string' }],
      },
    });
    await t.call('POST', `/api/v1/templates/${ids.template}/publish`, { as: 'admin' });
    ids.n = '1';
    // An automation whose run sleeps a day (written parked), and that run (canceled, then refused, by the fuzz).
    const automation = await t.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: { name: 'Fuzz', trigger: { event: 'fuzz-event' }, steps: [{ type: 'delay', duration: 'P1D' }] },
    });
    assert.equal(automation.status, 201, JSON.stringify(automation.body));
    ids.automation = automation.body.id;
    await t.call('POST', '/api/v1/events', { body: { name: 'fuzz-event', email: 'fuzz@people.example' } });
    ids.run = await waitFor(async () => {
      const r = (await t.call('GET', `/api/v1/automations/${ids.automation}/runs`, { as: 'admin' })).body.data[0];
      return r?.id;
    }, 'the fuzz automation run');
    ids.suppression = encodeURIComponent('fuzz-suppressed@example.com');
    await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: 'fuzz-suppressed@example.com' } });
    ids.delivery = await waitFor(async () => {
      const d = (await t.call('GET', `/api/v1/webhooks/${ids.webhook}/deliveries`, { as: 'admin' })).body.data[0];
      return d?.status === 'succeeded' ? d.id : undefined;
    }, 'the fuzz webhook delivery');
    // The development inbox's pages in front of a real inbox: open (as on loopback) and guarded (beyond).
    const open = await inboxApp(env, { adminOnly: false });
    const guarded = await inboxApp(env, { adminOnly: true });
    inboxUrl = open.url;
    guardedInboxUrl = guarded.url;
    stops.push(
      () => open.stop(),
      () => guarded.stop(),
    );
  });

  after(async () => {
    for (const stop of stops) await stop();
  });

  it('covers every route the API declares', () => {
    const norm = (r: Route) => `${r.method} ${r.path.replace(/:[a-z_]+/g, ':x')}`;
    assert.deepEqual([...new Set(declaredRoutes())].sort(), ROUTES.map(norm).sort());
  });

  it('answers every shape with a catalogued 4xx (or 2xx where the input is ignored), and a refusal writes nothing', async () => {
    const failures: string[] = [];
    let requests = 0;
    const check = async (
      r: Route,
      p: string,
      raw?: string,
      type?: string,
      label = '',
      base = r.path.startsWith('/inbox') ? inboxUrl : env.url,
      auth?: string | null,
    ) => {
      const before = await fingerprint();
      const token =
        auth !== undefined ? auth : ['/health', '/ready'].includes(r.path) || r.path.startsWith('/inbox') ? null : `Bearer ${admin}`;
      const a = await send(base, r.method, p, token, raw, type);
      requests++;
      const where = `${r.method} ${p.slice(0, 120)} [${label}] → ${a.status} ${JSON.stringify(a.body).slice(0, 200)}`;
      // Sent without a key: reaching a handler around its middleware would answer anything but these.
      if (label === 'case' && ![401, 404, 405].includes(a.status))
        return void failures.push(`${where} (another case reached a handler unguarded)`);
      if (a.status >= 500 || a.status === 0) return void failures.push(where);
      if (a.status === 429) return void failures.push(`${where} (rate limited: the shape never reached validation)`);
      const page = typeof a.body === 'string' && a.body.startsWith('<!doctype html>');
      if (r.page && page) {
        // A recipient's link refuses with its 404 page, never a JSON error.
        if (a.status !== 404) failures.push(`${where} (a recipient's page answered ${a.status})`);
        if ((await fingerprint()) !== before) failures.push(`${where} (a refused request wrote something)`);
      } else if (a.status >= 400) {
        const code = (a.body as { error?: { code?: string } })?.error?.code;
        if (!code || !(code in ERRORS)) failures.push(`${where} (no catalogued error code)`);
        if ((await fingerprint()) !== before) failures.push(`${where} (a refused request wrote something)`);
      }
    };
    const paths = (r: Route) => [
      r.path.replace(/:([a-z]+)/g, (_, k: string) => ids[k] ?? 'none'),
      ...IDS.map((id) => r.path.replace(/:([a-z]+)/g, id)),
    ];
    for (const r of ROUTES) {
      const [real, ...odd] = paths(r);
      for (const q of QUERIES) await check(r, `${real}?${q}`, undefined, undefined, q.slice(0, 40));
      for (const p of odd) await check(r, p, undefined, undefined, 'odd id');
      if (r.body) for (const b of BODIES) await check(r, real, b.raw, b.type, b.name);
      // Routing is case-sensitive: no other case of a path reaches a handler (or skips its middleware).
      for (const p of [
        real.toUpperCase(),
        real.replace(/\/([a-z])/g, (_, c: string) => `/${c.toUpperCase()}`),
        real.replace(/[a-z]+$/, (w) => w.toUpperCase()),
      ]) {
        if (p === real) continue;
        await check(r, p, r.body ? '{}' : undefined, undefined, 'case', undefined, null);
        if (r.path.startsWith('/inbox')) await check(r, p, undefined, undefined, 'case', guardedInboxUrl, null);
      }
      for (const header of AUTHORIZATIONS)
        await check(r, real, r.body ? '{}' : undefined, undefined, `authorization ${header.slice(0, 20)}`, undefined, header);
      if (r.path.startsWith('/inbox')) {
        // Beyond loopback: without a key 401, with a SEND key 403, with the ADMIN key the page; all shapes again.
        for (const q of QUERIES.slice(0, 8))
          await check(r, `${real}?${q}`, undefined, undefined, `guarded ${q}`, guardedInboxUrl, `Bearer ${admin}`);
        for (const p of odd) await check(r, p, undefined, undefined, 'guarded odd id', guardedInboxUrl, `Bearer ${admin}`);
        for (const header of AUTHORIZATIONS)
          await check(r, real, undefined, undefined, `guarded ${header.slice(0, 20)}`, guardedInboxUrl, header);
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${requests} requests failed`);
    assert.ok(requests > 500, `only ${requests} requests`);
  });
});
