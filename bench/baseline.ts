/**
 * The yardsticks the accept path is measured against, on their own database: a bare Koa app with
 * two routes, run in a process of its own (bench/baseline-process.ts) so its CPU is read apart from
 * the service's (bench/rounds.ts).
 *
 * - POST /baseline: parses a JSON body and does one PostgreSQL insert.
 * - POST /baseline/batch: parses a JSON array (100 items in the bench) and inserts a row per item
 *   in one statement, each row as wide as a stored message with its recipient and its `queued`
 *   event (the columns of emails, recipients and email_events the store statement writes), and
 *   answers each row's id, as POST /emails/batch does.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Koa from 'koa';
import Router from '@koa/router';
import { Pool } from 'pg';
import { load, MESSAGE, POOL, SINGLE_CONCURRENCY, type LoadResult } from './phase';

/** A stored message's columns with its recipient's and its event's, as the batch baseline's rows hold them (name and type). */
const BATCH_COLUMNS: [string, string][] = [
  ['id', 'uuid'],
  ['organization_id', 'uuid'],
  ['api_key_id', 'uuid'],
  ['domain_id', 'uuid'],
  ['from_address', 'text'],
  ['to_addresses', 'jsonb'],
  ['cc_addresses', 'jsonb'],
  ['bcc_addresses', 'jsonb'],
  ['subject', 'text'],
  ['html', 'text'],
  ['text', 'text'],
  ['headers', 'jsonb'],
  ['tags', 'jsonb'],
  ['mode', 'text'],
  ['status', 'text'],
  ['message_id', 'text'],
  ['source', 'text'],
  ['stream', 'text'],
  ['track_opens', 'boolean'],
  ['track_clicks', 'boolean'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
  ['recipient_id', 'uuid'],
  ['address', 'text'],
  ['field', 'text'],
  ['state', 'text'],
  ['attempts', 'int'],
  ['event_type', 'text'],
  ['event_at', 'timestamptz'],
];

const CREATE_BATCH_TABLE = `create table if not exists bench_baseline_batch (${BATCH_COLUMNS.map(([c, t]) => `${c} ${t}${c === 'id' ? ' primary key' : ''}`).join(', ')})`;
const INSERT_BATCH = `insert into bench_baseline_batch (${BATCH_COLUMNS.map(([c]) => c).join(', ')})
  select * from json_to_recordset($1::json) as x(${BATCH_COLUMNS.map(([c, t]) => `${c} ${t}`).join(', ')})
  returning id`;

/** A batch item as the batch baseline stores it: the message's fields, its one recipient and its `queued` event. */
export function batchRow(item: Record<string, unknown>, ids: { organization: string; key: string; domain: string }, at: string) {
  const id = randomUUID();
  const to = String(item.to);
  return {
    id,
    organization_id: ids.organization,
    api_key_id: ids.key,
    domain_id: ids.domain,
    from_address: item.from,
    to_addresses: [to],
    cc_addresses: [],
    bcc_addresses: [],
    subject: item.subject,
    html: item.html ?? null,
    text: item.text ?? null,
    headers: {},
    tags: [],
    mode: 'live',
    status: 'queued',
    message_id: `<${id}@bench.test>`,
    source: 'api',
    stream: 'transactional',
    track_opens: false,
    track_clicks: false,
    created_at: at,
    updated_at: at,
    recipient_id: randomUUID(),
    address: to.toLowerCase(),
    field: 'to',
    state: 'pending',
    attempts: 0,
    event_type: 'queued',
    event_at: at,
  };
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** The baseline app on `databaseUrl` (its tables created if missing), listening on a loopback port. */
export async function startBaseline(
  databaseUrl: string,
  poolSize: number,
): Promise<{ url: string; batchUrl: string; stop: () => Promise<void> }> {
  const pool = new Pool({ connectionString: databaseUrl, max: poolSize });
  await pool.query(
    'create table if not exists bench_baseline (id bigserial primary key, body jsonb not null, created_at timestamptz not null default now())',
  );
  await pool.query(CREATE_BATCH_TABLE);
  const ids = { organization: randomUUID(), key: randomUUID(), domain: randomUUID() };
  const app = new Koa();
  const router = new Router();
  router.post('/baseline', async (ctx) => {
    const body = await readJson(ctx.req);
    const r = await pool.query('insert into bench_baseline (body) values ($1) returning id', [body]);
    ctx.body = { id: String(r.rows[0].id) };
  });
  router.post('/baseline/batch', async (ctx) => {
    const body = await readJson(ctx.req);
    if (!Array.isArray(body)) ctx.throw(400, 'a JSON array');
    const at = new Date().toISOString();
    const rows = (body as Record<string, unknown>[]).map((item) => batchRow(item, ids, at));
    const r = await pool.query<{ id: string }>(INSERT_BATCH, [JSON.stringify(rows)]);
    ctx.body = { data: r.rows.map((row) => ({ id: row.id })) };
  });
  app.use(router.routes());
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/baseline`,
    batchUrl: `http://127.0.0.1:${port}/baseline/batch`,
    stop: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await pool.end();
    },
  };
}

/** The baseline app in a process of its own (bench/baseline-process.ts). */
export interface BaselineProcess {
  pid: number;
  url: string;
  batchUrl: string;
  stop(): Promise<void>;
}

/** Starts the baseline app in a process of its own on `databaseUrl`; stopping it closes its stdin. */
export function spawnBaseline(databaseUrl: string, poolSize = POOL): Promise<BaselineProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--require', 'tsx/cjs', path.join(__dirname, 'baseline-process.ts'), JSON.stringify({ databaseUrl, poolSize })],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      if (!out.includes('\n')) return;
      const { url, batchUrl } = JSON.parse(out.slice(0, out.indexOf('\n'))) as { url: string; batchUrl: string };
      resolve({
        pid: child.pid!,
        url,
        batchUrl,
        stop: async () => {
          child.stdin.end();
          await exited;
        },
      });
    });
    child.once('exit', (code) => reject(new Error(`baseline-process.ts exited ${code} before listening`)));
  });
}

/** The single baseline's requests/s and latency: started on `databaseUrl`, loaded once discarded and once measured, stopped. */
export async function measureBaseline(databaseUrl: string): Promise<LoadResult> {
  const baseline = await spawnBaseline(databaseUrl);
  await load(baseline.url, ['none'], MESSAGE, SINGLE_CONCURRENCY).catch(() => undefined); // warm-up run discarded
  const base = await load(baseline.url, ['none'], MESSAGE, SINGLE_CONCURRENCY);
  await baseline.stop();
  return base;
}
