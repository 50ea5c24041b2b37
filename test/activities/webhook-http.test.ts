import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createWebhookHttp } from '../../activities/webhook-http';

describe('Activities: the webhook HTTP client (SSRF guard at connect time, limits)', () => {
  let server: http.Server;
  let port: number;
  const seen: string[] = [];
  const hanging: http.ServerResponse[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      req.resume();
      req.on('end', () => {
        if (req.url === '/hang' || req.url?.startsWith('/slow')) {
          if (req.url.startsWith('/slow')) setTimeout(() => res.end('slow'), 400);
          else hanging.push(res);
          return;
        }
        if (req.url === '/redirect') {
          res.writeHead(302, { location: '/target' });
          return res.end();
        }
        if (req.url === '/big') return res.end('x'.repeat(100_000));
        res.end('fine');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    for (const r of hanging) r.destroy();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('refuses loopback by literal address and by a name that resolves to it, without connecting', async () => {
    const strict = createWebhookHttp({ allowHttp: true, allowPrivate: false, concurrencyPerEndpoint: 4 });
    try {
      seen.length = 0;
      for (const url of [`http://127.0.0.1:${port}/a`, `http://localhost:${port}/b`, `http://[::ffff:127.0.0.1]:${port}/c`]) {
        const out = await strict.post('e1', url, {}, '{}');
        assert.equal(out.statusCode, null, url);
        assert.match(out.error!, /^refused: /, url);
      }
      assert.deepEqual(seen, [], 'nothing reached the server');
      const https = await createWebhookHttp({ allowHttp: false, allowPrivate: true, concurrencyPerEndpoint: 1 }).post(
        'e1',
        `http://127.0.0.1:${port}/`,
        {},
        '{}',
      );
      assert.match(https.error!, /https/);
    } finally {
      strict.close();
    }
    const open = createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 });
    try {
      const out = await open.post('e1', `http://localhost:${port}/ok`, { 'webhook-id': 'x' }, '{}');
      assert.deepEqual(out, { statusCode: 200, error: null, body: 'fine' });
    } finally {
      open.close();
    }
  });

  it('does not follow redirects, keeps 4 KiB of the body, and gives up after the timeout', async () => {
    const c = createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4, timeoutMs: 300 });
    try {
      seen.length = 0;
      assert.equal((await c.post('e1', `http://127.0.0.1:${port}/redirect`, {}, '{}')).statusCode, 302);
      assert.deepEqual(seen, ['/redirect']);
      assert.equal((await c.post('e1', `http://127.0.0.1:${port}/big`, {}, '{}')).body.length, 4096);
      const hung = await c.post('e1', `http://127.0.0.1:${port}/hang`, {}, '{}');
      assert.equal(hung.statusCode, null);
      assert.match(hung.error!, /no response within/);
    } finally {
      c.close();
    }
  });

  it('a slow endpoint waits for its own slots only: another endpoint is not held up', async () => {
    const c = createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 1 });
    try {
      const done: string[] = [];
      const slow = [1, 2, 3].map((i) => c.post('slow', `http://127.0.0.1:${port}/slow${i}`, {}, '{}').then(() => done.push(`slow${i}`)));
      await new Promise((r) => setTimeout(r, 50));
      await c.post('fast', `http://127.0.0.1:${port}/ok`, {}, '{}').then(() => done.push('fast'));
      await Promise.all(slow);
      assert.deepEqual(done, ['fast', 'slow1', 'slow2', 'slow3']);
    } finally {
      c.close();
    }
  });
});
