/**
 * The drain's acceptance load, run as its own process like load.ts: `n` messages posted to
 * POST /emails/batch in batches of 100, one worker per key, each batch as soon as the last one
 * was answered (a 429 waits 100 ms and posts the same batch again). Prints { startedAt, seconds }
 * as JSON: when the first batch was posted (this machine's clock, so the bench's timing leaves out
 * this process's start-up) and how long acceptance took.
 */
interface Args {
  url: string;
  tokens: string[];
  n: number;
  /** Recipient prefix: addresses are `<prefix>-<batch>-<i>@example.com`. */
  prefix: string;
  from: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const a = JSON.parse(process.argv[2]) as Args;
  const t0 = Date.now();
  const batches = Math.ceil(a.n / 100);
  let next = 0;
  await Promise.all(
    a.tokens.map(async (token) => {
      for (let b = next++; b < batches; b = next++) {
        const size = Math.min(100, a.n - b * 100);
        const body = JSON.stringify(
          Array.from({ length: size }, (_, i) => ({
            from: a.from,
            to: `${a.prefix}-${b}-${i}@example.com`,
            subject: 'Drain',
            text: 'hello',
            html: '<p>hello</p>',
          })),
        );
        for (;;) {
          const res = await fetch(`${a.url}/api/v1/emails/batch`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body,
          });
          const text = await res.text();
          if (res.status === 429) {
            await sleep(100);
            continue;
          }
          if (!res.ok) throw new Error(`batch: ${res.status} ${text.slice(0, 200)}`);
          break;
        }
      }
    }),
  );
  process.stdout.write(JSON.stringify({ startedAt: t0, seconds: (Date.now() - t0) / 1000 }) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
