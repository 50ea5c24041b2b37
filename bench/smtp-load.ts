/**
 * SMTP load generator for the relay phase, run as its own process like load.ts: C connections
 * (one API key each, STARTTLS, pooled nodemailer transports of one connection) each send
 * messages back to back for a fixed time. Prints a Result as JSON.
 */
import nodemailer from 'nodemailer';

interface Args {
  port: number;
  tokens: string[];
  message: { from: string; to: string; subject: string; text: string; html: string };
  connections: number;
  seconds: number;
}

async function main() {
  const a = JSON.parse(process.argv[2]) as Args;
  const latencies: number[] = [];
  let errors = 0;
  let firstError = '';
  process.stdout.write('started\n'); // bench/load-process.ts: CPU is measured from here
  const cpu0 = process.cpuUsage();
  const start = Date.now();
  const deadline = start + a.seconds * 1000;
  await Promise.all(
    Array.from({ length: a.connections }, async (_, i) => {
      const tr = nodemailer.createTransport({
        host: '127.0.0.1',
        port: a.port,
        requireTLS: true,
        tls: { rejectUnauthorized: false },
        auth: { user: 'svc', pass: a.tokens[i % a.tokens.length] },
        pool: true,
        maxConnections: 1,
        maxMessages: Infinity,
      });
      while (Date.now() < deadline) {
        const t0 = performance.now();
        try {
          await tr.sendMail(a.message);
          latencies.push(performance.now() - t0);
        } catch (err) {
          errors++;
          firstError ||= String((err as { response?: string }).response ?? err);
        }
      }
      tr.close();
    }),
  );
  const seconds = (Date.now() - start) / 1000;
  latencies.sort((x, y) => x - y);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  const used = process.cpuUsage(cpu0);
  process.stdout.write(
    JSON.stringify({
      requests: latencies.length,
      errors,
      firstError,
      seconds,
      rps: latencies.length / seconds,
      p50: at(0.5),
      p99: at(0.99),
      clientCpuSeconds: (used.user + used.system) / 1e6,
    }),
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
