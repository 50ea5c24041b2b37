import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { startLiveStack, type LiveStack } from '../support/temporal-live';
import { WebhookReceiver, type Received as HookReceived } from '../support/webhook-receiver';
import type { SmtpSink } from '../support/sink';
import type { ApiResponse } from '../support/http';
import { sleep } from '../support/wait';

/**
 * Issue 35: one scenario, run through the HTTP API on both engines, must leave the same state.
 *
 * The scenario (`scenario` below) only talks to the API (and sets rules on the SMTP sink that
 * stands in for the relay): live sends accepted, refused for now then accepted, refused for now
 * on every pass (failed), refused for good, to two recipients of which one bounces, to a
 * suppressed address; test-mode sends to the outcome addresses; a send scheduled a few seconds
 * ahead, one scheduled an hour ahead and canceled; an automation started by POST /events (a 1 s durable delay, then a
 * templated send, then a contact update); a broadcast to a topic segment (one member bounces, one
 * is on the suppression list, one has unsubscribed); a webhook subscribed to every event, whose
 * endpoint refuses one POST once (a retried delivery).
 *
 * It runs at the same time on the embedded engine (the shared DBOS service, a fresh tenant) and on
 * Temporal (test/support/temporal-live.ts: against the project's cluster on PostgreSQL, two APIs
 * with ENGINE=temporal, this process's and a `svc start` process, the scenario's requests
 * alternating between them, and two workers, this process's and a `svc worker` process, on one
 * database, namespace and task queue; CONFIRMATION_WINDOW_HOURS=0 so the outbox starts SendBatch
 * runs as the embedded engine does). Once both are settled each is reduced to an engine-neutral snapshot (no
 * ids, times, domains or per-run tags): per message (mode, recipients, subject) its status, source,
 * kind and, per recipient, its state and event types (with bounce type and detail); the broadcast's
 * status, audience size and progress; the automation run's status and step outcomes; the webhook
 * POSTs received per event type and recipient, and the deliveries per type, status and attempts;
 * the contacts' status and properties; the suppression list. The two must be equal; a difference
 * is printed path by path, embedded value beside temporal value. PARITY_PRINT=1 prints both.
 *
 * Nothing is excluded: on this scenario the engines agree on everything the snapshot holds. (A
 * live message through a relay ends `sent`, not `delivered`, on both: docs/api.md.)
 */

type As = 'send' | 'test' | 'admin';

/** What the scenario needs of an engine's stack: nothing engine-specific. */
interface Side {
  engine: 'embedded' | 'temporal';
  call: (method: string, path: string, body?: unknown, as?: As) => Promise<ApiResponse>;
  sql: (text: string, values?: unknown[]) => Promise<any[]>;
  /** The organization's verified (bulk-stream) domain. */
  domain: string;
  /** The relay of this side's service. */
  sink: SmtpSink;
  /** Where the webhook posts (the shared receiver, at a path of this side's own). */
  hookUrl: string;
  hooks: () => HookReceived[];
  /** In every address the scenario makes (`local+tag@...`); removed in the snapshot. */
  tag: string;
}

/** What the scenario made that settling and the snapshot look up by id. */
interface Made {
  webhookId: string;
  broadcastId: string;
  automationId: string;
}

/** The answer's body, once its status is the one expected. */
const ok = (res: ApiResponse, status: number, what: string) => {
  assert.equal(res.status, status, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

/** The scenario: the same API calls, in the same order, on either engine. */
async function scenario(s: Side): Promise<Made> {
  const addr = (local: string) => `${local}+${s.tag}@parity.example`;
  const from = `Parity <app@${s.domain}>`;
  const send = async (body: Record<string, unknown>, as: As = 'send') =>
    ok(await s.call('POST', '/api/v1/emails', { from, text: 'hello', ...body }, as), 200, `send ${JSON.stringify(body.to)}`).id as string;

  // A webhook on every event, first: deliveries are made for events recorded while it exists.
  const hook = ok(await s.call('POST', '/api/v1/webhooks', { url: s.hookUrl }, 'admin'), 201, 'webhook');

  // What the relay answers, per recipient.
  s.sink.rules.set(addr('busy'), { rcpt: 'tempfail', times: 2 });
  s.sink.rules.set(addr('down'), { rcpt: 'tempfail', times: 1000 });
  s.sink.rules.set(addr('gone'), { rcpt: 'reject', code: 550, message: '5.1.1 no such mailbox' });
  s.sink.rules.set(addr('multi-b'), { rcpt: 'reject', code: 550, message: '5.1.1 no such mailbox' });
  s.sink.rules.set(addr('bob'), { rcpt: 'reject', code: 550, message: '5.1.1 no such mailbox' });
  ok(await s.call('POST', '/api/v1/suppressions', { email: addr('listed') }, 'admin'), 201, 'suppression');

  // Live sends.
  await send({ to: addr('ok'), subject: 'Accepted' });
  await send({ to: addr('busy'), subject: 'Refused for now, then accepted' });
  await send({ to: addr('down'), subject: 'Refused for now, every time' });
  await send({ to: addr('gone'), subject: 'Refused for good' });
  await send({ to: addr('multi-a'), cc: addr('multi-b'), subject: 'Two recipients, one refused' });
  await send({ to: addr('listed'), subject: 'To a suppressed address' });
  await send({ to: addr('soon'), subject: 'Scheduled soon', scheduled_at: inSeconds(3) });
  const later = await send({ to: addr('later'), subject: 'Scheduled later', scheduled_at: inSeconds(3600) });
  ok(await s.call('POST', `/api/v1/emails/${later}/cancel`), 200, 'cancel');

  // Test mode: the outcome addresses (docs/api.md, by local part; +label ignored).
  for (const outcome of ['delivered', 'bounce', 'complaint', 'suppressionlist']) {
    await send({ to: addr(outcome), subject: `Test mode: ${outcome}` }, 'test');
  }

  // An automation started by an event: a 1 s durable delay, then a templated send.
  const template = ok(
    await s.call(
      'POST',
      '/api/v1/templates',
      {
        name: 'Welcome',
        slug: 'welcome',
        subject: 'Welcome {{first_name}}',
        text: 'Your plan: {{plan}}',
        variables: [
          { key: 'first_name', type: 'string', fallback: 'there' },
          { key: 'plan', type: 'string', fallback: 'none' },
        ],
      },
      'admin',
    ),
    201,
    'template',
  );
  ok(await s.call('POST', `/api/v1/templates/${template.id}/publish`, undefined, 'admin'), 201, 'publish');
  const automation = ok(
    await s.call(
      'POST',
      '/api/v1/automations',
      {
        name: 'Onboarding',
        trigger: { event: 'signed_up' },
        steps: [
          { type: 'delay', duration: 'PT1S' },
          { type: 'send_email', from: `Team <team@${s.domain}>`, template: { slug: 'welcome' } },
          { type: 'update_contact', properties: { welcomed: true } },
        ],
      },
      'admin',
    ),
    201,
    'automation',
  );
  const event = ok(
    await s.call('POST', '/api/v1/events', { name: 'signed_up', email: addr('frank'), data: { first_name: 'Frank', plan: 'pro' } }),
    200,
    'event',
  );
  assert.equal(event.runs, 1);

  // A broadcast to a topic's segment: ann and cat get it, bob's is refused for good, dan is on the
  // suppression list and eve unsubscribed (neither is in the audience).
  ok(await s.call('POST', '/api/v1/topics', { slug: 'news', name: 'News' }, 'admin'), 201, 'topic');
  for (const [name, extra] of [
    ['ann', {}],
    ['bob', {}],
    ['cat', {}],
    ['dan', {}],
    ['eve', { status: 'unsubscribed' }],
  ] as const) {
    ok(await s.call('POST', '/api/v1/contacts', { email: addr(name), first_name: name, topics: ['news'], ...extra }, 'admin'), 201, name);
  }
  ok(await s.call('POST', '/api/v1/suppressions', { email: addr('dan') }, 'admin'), 201, 'suppress dan');
  const segment = ok(
    await s.call('POST', '/api/v1/segments', { name: 'News readers', filter: { all: [{ topic: 'news', state: 'SUBSCRIBED' }] } }, 'admin'),
    201,
    'segment',
  );
  const broadcast = ok(
    await s.call(
      'POST',
      '/api/v1/broadcasts',
      { segment_id: segment.id, from: `News <news@${s.domain}>`, name: 'Issue 1', topic: 'news', subject: 'News', text: 'the news' },
      'admin',
    ),
    201,
    'broadcast',
  );
  return { webhookId: hook.id, broadcastId: broadcast.id, automationId: automation.id };
}

const FINAL_EMAIL = new Set(['sent', 'delivered', 'bounced', 'complained', 'failed', 'suppressed', 'canceled']);

/** Every page of a list endpoint. */
async function all(s: Side, path: string, as: As = 'admin'): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page: any = ok(await s.call('GET', `${path}${sep}limit=100${cursor ? `&cursor=${cursor}` : ''}`, undefined, as), 200, path);
    out.push(...page.data);
    cursor = page.next_cursor ?? null;
  } while (cursor);
  return out;
}

/** True once nothing of the scenario can still change: every message, the broadcast, the run and every webhook delivery final. */
async function settled(s: Side, made: Made): Promise<string | true> {
  const b = ok(await s.call('GET', `/api/v1/broadcasts/${made.broadcastId}`, undefined, 'admin'), 200, 'broadcast');
  if (!['sent', 'failed', 'canceled'].includes(b.status)) return `broadcast ${b.status}`;
  const runs = await all(s, `/api/v1/automations/${made.automationId}/runs`);
  if (runs.length === 0 || runs.some((r) => !['completed', 'failed', 'canceled'].includes(r.status))) return 'automation run';
  const emails = await all(s, '/api/v1/emails', 'send');
  const open = emails.filter((e) => !FINAL_EMAIL.has(e.last_event));
  if (open.length) return `${open.length} messages not final`;
  const deliveries = await all(s, `/api/v1/webhooks/${made.webhookId}/deliveries`);
  if (deliveries.some((d) => d.status === 'pending')) return 'webhook deliveries pending';
  if (s.hooks().length < deliveries.length) return 'webhook posts';
  return true;
}

/**
 * The end state, engine-neutral: keyed by what both runs share (addresses without the tag,
 * subjects), never ids, times or the sender domain.
 */
async function snapshot(s: Side, made: Made) {
  const norm = (v: unknown) => (typeof v === 'string' ? v.replaceAll(`+${s.tag}`, '').replaceAll(s.domain, '<domain>') : v);
  const messages: Record<string, unknown> = {};
  for (const summary of await all(s, '/api/v1/emails', 'send')) {
    const e = ok(await s.call('GET', `/api/v1/emails/${summary.id}`), 200, 'email');
    const recipients: Record<string, { state: string; events: string[] }> = {};
    for (const r of await s.sql('select address, state from recipients where email_id = ? order by address', [e.id])) {
      recipients[norm(r.address) as string] = { state: r.state, events: [] };
    }
    for (const ev of e.events as { type: string; recipient: string; bounce_type?: string; detail?: string }[]) {
      const who = norm(ev.recipient) as string;
      // A recipient dropped at acceptance (suppressed) has an event and no recipient row.
      (recipients[who] ??= { state: '(none)', events: [] }).events.push(
        [ev.type, ev.bounce_type, norm(ev.detail)].filter((x) => x !== undefined).join(' '),
      );
    }
    let key = `${e.mode} ${[...e.to, ...e.cc].map(norm).sort().join(',')} "${e.subject}"`;
    for (let n = 2; key in messages; n++) key = `${key} #${n}`;
    messages[key] = { status: e.last_event, source: e.source, kind: e.kind, recipients };
  }
  const b = ok(await s.call('GET', `/api/v1/broadcasts/${made.broadcastId}`, undefined, 'admin'), 200, 'broadcast');
  const runs = (await all(s, `/api/v1/automations/${made.automationId}/runs`)).map((r) => ({
    status: r.status,
    reason: r.reason,
    contact: norm(r.contact?.email),
    history: r.history.map((h: any) => `${h.step} ${h.type} ${h.result?.outcome ?? ''}`.trim()),
  }));
  const webhookPosts: Record<string, number> = {};
  for (const h of s.hooks()) {
    const d = h.json.data;
    const k = [h.json.type, norm(d.recipient ?? d.email), d.mode, d.bounce_type].filter((x) => x !== undefined).join(' ');
    webhookPosts[k] = (webhookPosts[k] ?? 0) + 1;
  }
  const deliveries: Record<string, number> = {};
  for (const d of await all(s, `/api/v1/webhooks/${made.webhookId}/deliveries`)) {
    const k = `${d.event_type} ${d.status} attempts=${d.attempts}`;
    deliveries[k] = (deliveries[k] ?? 0) + 1;
  }
  const contacts = Object.fromEntries(
    (await all(s, '/api/v1/contacts')).map((c) => [norm(c.email), { status: c.status, properties: c.properties }]),
  );
  const suppressions = Object.fromEntries((await all(s, '/api/v1/suppressions')).map((x) => [norm(x.email), x.reason]));
  return {
    messages: sortKeys(messages),
    broadcast: { status: b.status, recipients: b.recipients, progress: b.progress, failure: b.failure },
    automationRuns: runs,
    webhookPosts: sortKeys(webhookPosts),
    webhookDeliveries: sortKeys(deliveries),
    contacts: sortKeys(contacts),
    suppressions: sortKeys(suppressions),
  };
}

const sortKeys = <T>(o: Record<string, T>) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Leaves of a value by path (`messages.<key>.recipients.<addr>.events`): arrays are leaves, compared whole. */
function leaves(v: unknown, path = '', out = new Map<string, unknown>()): Map<string, unknown> {
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
    for (const [k, x] of Object.entries(v)) leaves(x, path ? `${path}.${k}` : k, out);
  } else out.set(path, v);
  return out;
}

/** One line per path where the two differ: what the embedded engine left, what Temporal left. */
function parityDiff(embedded: unknown, temporal: unknown): string[] {
  const a = leaves(embedded);
  const b = leaves(temporal);
  const show = (m: Map<string, unknown>, k: string) => (m.has(k) ? JSON.stringify(m.get(k)) : '(absent)');
  return [...new Set([...a.keys(), ...b.keys()])]
    .sort()
    .filter((k) => !isDeepStrictEqual(a.get(k), b.get(k)) || a.has(k) !== b.has(k))
    .map((k) => `  ${k}\n    embedded: ${show(a, k)}\n    temporal: ${show(b, k)}`);
}

/**
 * The side's end state once it has settled and two snapshots a second apart agree. A side that
 * does not settle in 30 s (the scenario needs about 12) is snapshotted as it stands, with what it
 * still waits for in `settled`, so the comparison prints where it differs instead of a bare timeout.
 */
async function finalSnapshot(s: Side, made: Made) {
  const deadline = Date.now() + 30_000;
  let state: string | true;
  while ((state = await settled(s, made)) !== true && Date.now() < deadline) await sleep(250);
  if (state !== true) return { settled: state, ...(await snapshot(s, made)) };
  let last = await snapshot(s, made);
  for (let i = 0; i < 10; i++) {
    await sleep(1000);
    const next = await snapshot(s, made);
    if (isDeepStrictEqual(last, next)) return { settled: state, ...next };
    last = next;
  }
  return { settled: 'the state kept changing', ...last };
}

describe('Engine parity, live: one scenario on the embedded engine and on Temporal ends in the same state', function () {
  this.timeout(120_000);
  let stack: LiveStack | undefined;
  let env: TestEnv;
  let tenant: Tenant;
  const receiver = new WebhookReceiver();

  before(async function () {
    // Skips the whole file, with the reason, when no Temporal server can be had.
    // Scaled out as a deployment is: two API processes and two workers on one database and namespace.
    stack = await startLiveStack(this, { name: 'parity', confirmationWindowHours: 0, stream: 'bulk', secondProcesses: true });
    env = await sharedService();
    tenant = await newTenant(env, { stream: 'bulk' });
    await receiver.start();
    // Each side's endpoint refuses its first `email.suppressed` POST: that delivery is retried
    // (WebhookDelivery, after the schedule's 5 s) on both engines.
    const refused = new Set<string>();
    receiver.respond = (r) => {
      if (r.json.type !== 'email.suppressed' || refused.has(r.path)) return 200;
      refused.add(r.path);
      return 500;
    };
  });
  after(async () => {
    await stack?.stop();
    await receiver.stop();
  });

  it('sends, schedules, cancels, bounces, an automation, a broadcast and webhooks: the same statuses and events per recipient', async () => {
    const t = tenant;
    const s = stack!;
    const run = Date.now().toString(36);
    const embedded: Side = {
      engine: 'embedded',
      call: (method, path, body, as) => t.call(method, path, { body, as }),
      sql: (text, values = []) => env.service.db.orm.em.fork().getConnection().execute(text, values),
      domain: t.domain,
      sink: env.sink,
      hookUrl: `${receiver.url}/parity-embedded`,
      hooks: () => receiver.at('/parity-embedded'),
      tag: `e${run}`,
    };
    const temporal: Side = {
      engine: 'temporal',
      call: (method, path, body, as) => s.call(method, path, { body, as }),
      sql: (text, values = []) => s.sql(text, values),
      domain: s.domain,
      sink: s.sink,
      hookUrl: `${receiver.url}/parity-temporal`,
      hooks: () => receiver.at('/parity-temporal'),
      tag: `t${run}`,
    };

    const [a, b] = await Promise.all(
      [embedded, temporal].map(async (side) => {
        const made = await scenario(side);
        return finalSnapshot(side, made);
      }),
    );
    if (process.env.PARITY_PRINT) console.log(JSON.stringify({ embedded: a, temporal: b }, null, 1));
    const diff = parityDiff(a, b);
    if (diff.length) assert.fail(`the engines differ at ${diff.length} place(s):\n${diff.join('\n')}`);
    assert.deepEqual(a, b);
  });
});
