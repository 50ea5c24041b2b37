import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, n, SECONDS, type Phase } from './phase';

export interface WebhookBenchResult {
  /** Deliveries in the burst, and how fast they reached the receiver (first to last). */
  burst: { deliveries: number; seconds: number; perSecond: number };
  /** At a steady event rate: time from the event (payload created_at) to the POST's arrival. */
  steady: { events: number; rate: number; p50: number; p99: number; max: number };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/**
 * Webhook deliveries to a receiver on loopback that answers 200 at once. Events are `email.queued`
 * of messages scheduled a day ahead, so the sends themselves cost no delivery work while the
 * webhooks are measured; the burst's events are inserted in one statement (the one extra
 * `queued` event per delivery is all the receiver checks).
 */
export async function benchWebhooks(
  service: Service,
  log: Logger,
  opts: { deliveries: number; rate: number; seconds: number },
): Promise<WebhookBenchResult> {
  const arrivals = new Map<string, { at: number; createdAt: number }[]>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const list = arrivals.get(req.url ?? '') ?? [];
      list.push({ at, createdAt: Date.parse(body.created_at) });
      arrivals.set(req.url ?? '', list);
      res.end('ok');
    });
  });
  receiver.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Bench webhooks');
  await createDomain(orm, org.id, 'hooks.bench.test', { verified: true, warmup: false });
  const admin = (await createKey(orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const keys: string[] = [];
  for (let i = 0; i < 16; i++)
    keys.push((await createKey(orm, org.id, { name: `k${i}`, permission: 'send', mode: 'test', rateLimit: 1000 })).token);
  const call = async (token: string, method: string, p: string, body: unknown) => {
    const res = await fetch(`${service.url}/api/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string }>;
  };
  const message = {
    from: 'app@hooks.bench.test',
    to: 'someone@example.com',
    subject: 'Webhook bench',
    text: 'hello',
    scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
  };
  const until = async (path: string, n: number, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while ((arrivals.get(path)?.length ?? 0) < n) {
      if (Date.now() > deadline) throw new Error(`webhooks: ${arrivals.get(path)?.length ?? 0} of ${n} arrived at ${path}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return arrivals.get(path)!;
  };

  // Burst: a backlog of deliveries, as fast as the service accepts the events.
  const burst = await call(admin, 'POST', '/webhooks', { url: `${receiverUrl}/burst`, events: ['email.queued'] });
  log.info({ deliveries: opts.deliveries }, 'webhooks: a burst of deliveries');
  // The events of one message, written in one statement: the fan-out trigger adds every delivery
  // at once, so what is measured is the delivery pipeline, not how fast events are produced.
  const { id: emailId } = await call(keys[0], 'POST', '/emails', message);
  await orm.em
    .fork()
    .getConnection()
    .execute(
      `insert into email_events (email_id, organization_id, type, recipient, at)
       select ?, ?, 'queued', 'someone@example.com', now() from generate_series(1, ?)`,
      [emailId, org.id, opts.deliveries],
    );
  const got = await until('/burst', opts.deliveries, 300_000);
  const first = Math.min(...got.map((g) => g.createdAt));
  const last = Math.max(...got.map((g) => g.at));
  const seconds = (last - first) / 1000;
  await call(admin, 'PATCH', `/webhooks/${burst.id}`, { enabled: false });

  // Steady: events at a fixed rate, each timed from its event to its arrival.
  await call(admin, 'POST', '/webhooks', { url: `${receiverUrl}/steady`, events: ['email.queued'] });
  log.info({ rate: opts.rate, seconds: opts.seconds }, 'webhooks: event to first attempt at a steady rate');
  const total = opts.rate * opts.seconds;
  const start = Date.now();
  const sends: Promise<unknown>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / opts.rate;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sends.push(call(keys[i % keys.length], 'POST', '/emails', message));
  }
  await Promise.all(sends);
  const steady = await until('/steady', total, 120_000);
  const latencies = steady.map((g) => g.at - g.createdAt);
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  return {
    burst: { deliveries: got.length, seconds, perSecond: got.length / seconds },
    steady: { events: total, rate: opts.rate, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: Math.max(...latencies) },
  };
}

/** BENCH_WEBHOOK_DELIVERIES: deliveries in the burst; BENCH_WEBHOOK_RATE: the steady event rate (per second) of the latency measurement. */
const WEBHOOK_DELIVERIES = Number(process.env.BENCH_WEBHOOK_DELIVERIES || 10_000);
const WEBHOOK_RATE = Number(process.env.BENCH_WEBHOOK_RATE || 100);

/** BENCHMARKS.md's "Webhook deliveries" section. */
function webhooksSection(r: WebhookBenchResult): string {
  return `## Webhook deliveries

One endpoint on a loopback receiver that answers 200 at once, signed as in production, on the
embedded engine: first attempts in WebhookFirstAttempts batches (one run per dispatcher pass). Burst: ${n(r.burst.deliveries)} \`email.queued\` events written in
one statement (the fan-out trigger adds the deliveries), timed from the events to the last arrival. Steady: one
send per ${f(1000 / r.steady.rate, 0)} ms for ${SECONDS} s, each timed from its event's \`created_at\` to its POST's arrival.

| Measure | Result | Goal |
|---|---|---|
| Deliveries per second (burst) | ${f(r.burst.perSecond)} (${f(r.burst.seconds)} s) | ≥ 500 |
| Event → first attempt p50 at ${r.steady.rate}/s | ${f(r.steady.p50, 0)} ms | < 1,000 ms |
| Event → first attempt p99 at ${r.steady.rate}/s | ${f(r.steady.p99, 0)} ms | < 3,000 ms |
| Event → first attempt, slowest | ${f(r.steady.max, 0)} ms | |
`;
}

/** The webhooks phase of `npm run bench` (BENCH_ONLY=webhooks): a burst of deliveries, then first-attempt latency at a steady rate. */
export const webhooksPhase: Phase<'webhooks'> = {
  name: 'webhooks',
  async run({ log, startService }) {
    const service = await startService('bench_service_webhooks');
    const r = await benchWebhooks(service, log, { deliveries: WEBHOOK_DELIVERIES, rate: WEBHOOK_RATE, seconds: SECONDS });
    await service.stop();
    return r;
  },
  section: webhooksSection,
};
