import net from 'node:net';
import type { ClusterPorts } from './temporal-cluster-config';

// The cluster's loopback ports and the waits on them (tools/temporal-cluster.ts; the dev server's checks too).

/** As the server's sample config lays the services out beside the frontend's port. */
export function fixedPorts(port: number): ClusterPorts {
  return {
    grpc: { frontend: port, history: port + 1, matching: port + 2, worker: port + 6 },
    membership: { frontend: port - 300, history: port - 299, matching: port - 298, worker: port - 294 },
    http: port + 10,
    ui: port + 1000,
  };
}

/**
 * Free loopback ports below 32768: the membership table keeps a service's port in a smallint,
 * and a port from the kernel's ephemeral range (32768 and up) did not fit ("value out of range").
 */
export async function freeClusterPorts(): Promise<ClusterPorts> {
  const picked: number[] = [];
  while (picked.length < 10) {
    const p = 20000 + Math.floor(Math.random() * 12000);
    if (!picked.includes(p) && (await portFree(p))) picked.push(p);
  }
  const [f, h, m, w, mf, mh, mm, mw, http, ui] = picked;
  return {
    grpc: { frontend: f, history: h, matching: m, worker: w },
    membership: { frontend: mf, history: mh, matching: mm, worker: mw },
    http,
    ui,
  };
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

export async function httpOk(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

export async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs: number, why: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}\n${why()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
