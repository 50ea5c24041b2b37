import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: { type: string; created_at: string; data: Record<string, any> };
  at: number;
}

/**
 * A webhook receiver on loopback: records every request and answers what `respond` says
 * (200 by default; a status, or `hang` to never answer).
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  respond: (r: Received) => number | 'hang' = () => 200;
  private server?: http.Server;
  private readonly hanging = new Set<http.ServerResponse>();
  url = '';

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const r: Received = {
          path: req.url ?? '',
          headers: req.headers as Record<string, string>,
          body,
          json: JSON.parse(body),
          at: Date.now(),
        };
        this.received.push(r);
        const status = this.respond(r);
        if (status === 'hang') {
          this.hanging.add(res);
          return;
        }
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.end(status >= 300 ? `refused with ${status}` : 'ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    return this.url;
  }

  /** What came for one webhook path (each test registers its own path). */
  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
