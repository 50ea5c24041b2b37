/**
 * The baseline app (bench/baseline.ts) as a process of its own: started by spawnBaseline with
 * { databaseUrl, poolSize } as its argument, it prints { url, batchUrl } as one JSON line once it
 * listens, and stops when its stdin closes.
 */
import { startBaseline } from './baseline';

async function main() {
  const a = JSON.parse(process.argv[2]) as { databaseUrl: string; poolSize: number };
  const baseline = await startBaseline(a.databaseUrl, a.poolSize);
  process.stdout.write(JSON.stringify({ url: baseline.url, batchUrl: baseline.batchUrl }) + '\n');
  process.stdin.on('end', () => {
    baseline.stop().then(
      () => process.exit(0),
      (e) => {
        console.error(e);
        process.exit(1);
      },
    );
  });
  process.stdin.resume();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
