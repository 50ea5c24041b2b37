import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { Pool } from 'pg';
import { load, MESSAGE, POOL, SINGLE_CONCURRENCY, type LoadResult } from './phase';

/** The yardstick: a bare Koa route that parses JSON and does one PostgreSQL insert. */
export async function startBaseline(databaseUrl: string, poolSize: number): Promise<{ url: string; stop: () => Promise<void> }> {
  const pool = new Pool({ connectionString: databaseUrl, max: poolSize });
  await pool.query(
    'create table if not exists bench_baseline (id bigserial primary key, body jsonb not null, created_at timestamptz not null default now())',
  );
  const app = new Koa();
  const router = new Router();
  router.post('/baseline', async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const c of ctx.req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const r = await pool.query('insert into bench_baseline (body) values ($1) returning id', [body]);
    ctx.body = { id: String(r.rows[0].id) };
  });
  app.use(router.routes());
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/baseline`,
    stop: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await pool.end();
    },
  };
}

/** The baseline's requests/s and latency: started on `databaseUrl`, loaded once discarded and once measured, stopped. */
export async function measureBaseline(databaseUrl: string): Promise<LoadResult> {
  const baseline = await startBaseline(databaseUrl, POOL);
  await load(baseline.url, ['none'], MESSAGE, SINGLE_CONCURRENCY).catch(() => undefined); // warm-up run discarded
  const base = await load(baseline.url, ['none'], MESSAGE, SINGLE_CONCURRENCY);
  await baseline.stop();
  return base;
}
