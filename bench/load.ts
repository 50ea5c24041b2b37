/**
 * Load generator, run as its own process so it does not share the server's event loop:
 * N workers each send requests back to back for a fixed time over keep-alive connections.
 */
import http from 'node:http';

/** Tokens are used in turn, request by request, so a per-key rate cap does not bound the measurement. */
interface Args {
  url: string;
  tokens: string[];
  body: string;
  concurrency: number;
  seconds: number;
}

async function main() {
  const a = JSON.parse(process.argv[2]) as Args;
  const agent = new http.Agent({ keepAlive: true, maxSockets: a.concurrency });
  const target = new URL(a.url);
  const latencies: number[] = [];
  let errors = 0;
  let firstError = '';
  const fixed = Buffer.from(a.body);
  // `__SEQ__` in the body becomes a number unique to each request (new contacts, not one row updated over and over).
  const varies = a.body.includes('__SEQ__');
  let seq = 0;
  const deadline = Date.now() + a.seconds * 1000;
  const one = (token: string) =>
    new Promise<void>((resolve) => {
      const body = varies ? Buffer.from(a.body.replaceAll('__SEQ__', `${process.pid}-${seq++}`)) : fixed;
      const t0 = process.hrtime.bigint();
      const req = http.request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300)
              latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
            else {
              errors++;
              firstError ||= `${res.statusCode} ${Buffer.concat(chunks).toString().slice(0, 200)}`;
            }
            resolve();
          });
        },
      );
      req.on('error', (e) => {
        errors++;
        firstError ||= e.message;
        resolve();
      });
      req.end(body);
    });
  process.stdout.write('started\n'); // bench/load-process.ts: CPU is measured from here
  const cpu0 = process.cpuUsage();
  const started = Date.now();
  let turn = 0;
  await Promise.all(
    Array.from({ length: a.concurrency }, async () => {
      while (Date.now() < deadline) await one(a.tokens[turn++ % a.tokens.length]);
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  latencies.sort((x, y) => x - y);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  const used = process.cpuUsage(cpu0);
  process.stdout.write(
    JSON.stringify({
      requests: latencies.length,
      errors,
      firstError,
      seconds: elapsed,
      rps: latencies.length / elapsed,
      p50: pct(50),
      p99: pct(99),
      clientCpuSeconds: (used.user + used.system) / 1e6,
    }) + '\n',
  );
  agent.destroy();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
