import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERRORS } from '../core/errors';

export interface HttpPort {
  port: number;
  /** Hands requests to the API from now on. */
  serve(handler: http.RequestListener): void;
  /** Stops taking requests and cuts open connections (again: a no-op). */
  close(): Promise<void>;
}

const starting: http.RequestListener = (_req, res) => {
  res.writeHead(ERRORS.starting.status, { 'content-type': 'application/json', 'retry-after': '1' });
  res.end(JSON.stringify({ status: 'starting', error: { code: 'starting', message: 'the service is starting; retry shortly' } }));
};

/**
 * The API's port, bound before anything else: until serve() every request (and /health) gets
 * 503 `starting`, so orchestrators and scripts can tell "starting" from "down".
 */
export async function bindHttpPort(port: number, host: string): Promise<HttpPort> {
  let handler = starting;
  const server = http.createServer((req, res) => handler(req, res));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  let closed: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    serve(h) {
      handler = h;
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
