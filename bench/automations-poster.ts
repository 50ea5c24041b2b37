/**
 * The events poster of the automations phase (bench/automations.ts) and of the Temporal phase's
 * automation runs (bench/temporal-runs.ts): postEvents runs this file as a process of its own (see
 * the end), so the poster's memory and CPU are not the service's.
 */
import { spawn } from 'node:child_process';

export interface PostArgs {
  url: string;
  tokens: string[];
  name: string;
  /** Emails and event ids are `<prefix>-<i>`. */
  prefix: string;
  events: number;
  /** Requests in flight at once (back to back), or, with `intervalMs`, one request started every intervalMs. */
  concurrency: number;
  intervalMs?: number;
  /** No request is started after this moment (epoch ms). */
  untilEpochMs?: number;
}
export interface PostResult {
  posted: number;
  errors: number;
  firstError: string;
  runs: number;
}

/** Posts events from a process of its own (this file, below). */
export function postEvents(args: PostArgs): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', __filename, JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`event poster exited ${code}`))));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Run as a process: posts the events of PostArgs (argv[2]) and writes a PostResult. */
async function posterMain(a: PostArgs): Promise<void> {
  let posted = 0;
  let errors = 0;
  let runs = 0;
  let firstError = '';
  const open = () => a.untilEpochMs === undefined || Date.now() < a.untilEpochMs;
  const one = async (i: number) => {
    try {
      const res = await fetch(`${a.url}/api/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.tokens[i % a.tokens.length]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: a.name, email: `${a.prefix}-${i}@events.bench`, id: `${a.prefix}-${i}` }),
      });
      const text = await res.text();
      if (res.status === 200) {
        posted++;
        runs += (JSON.parse(text) as { runs: number }).runs;
      } else {
        errors++;
        firstError ||= `${res.status} ${text.slice(0, 200)}`;
      }
    } catch (e) {
      errors++;
      firstError ||= (e as Error).message;
    }
  };
  if (a.intervalMs) {
    const inFlight: Promise<void>[] = [];
    const t0 = performance.now();
    for (let i = 0; i < a.events && open(); i++) {
      // On a schedule (not after the previous answer): one event every intervalMs.
      const wait = t0 + i * a.intervalMs - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(one(i));
    }
    await Promise.all(inFlight);
  } else {
    let next = 0;
    await Promise.all(
      Array.from({ length: a.concurrency }, async () => {
        while (next < a.events && open()) await one(next++);
      }),
    );
  }
  process.stdout.write(JSON.stringify({ posted, errors, firstError, runs } satisfies PostResult) + '\n');
}

if (require.main === module) {
  posterMain(JSON.parse(process.argv[2]) as PostArgs).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
