import assert from 'node:assert/strict';
import pg from 'pg';
import type { Child } from './child';
import { request } from './http';
import type { SmtpSink } from './sink';
import { sleep, waitFor } from './wait';

/**
 * A drain killed with SIGKILL several times at random moments (issue 43), counted at the SMTP sink
 * per Message-ID: the messages posted, each kill's place in the sink's arrivals, and the checks
 * (none lost, no recipient with another's message, resends per crash within the bound).
 */
export class CrashDrain {
  /** Each recipient's one message: recipient → Message-ID. */
  readonly messageOf = new Map<string, string>();
  readonly ids: string[] = [];
  /** Per kill: the sink's arrivals before it (settled: what the killed process handed over is in). */
  readonly marks: number[] = [];
  private sent = 0;

  constructor(
    private readonly sink: SmtpSink,
    private readonly domain: string,
  ) {}

  /** `n` live messages through POST /emails/batch, 100 a request, one recipient each; the keys post at once. */
  async post(base: string, tokens: string[], n: number): Promise<void> {
    const requests = Array.from({ length: Math.ceil(n / 100) }, (_, r) =>
      Array.from({ length: Math.min(100, n - r * 100) }, () => {
        this.sent += 1;
        return { from: `Drain <drain@${this.domain}>`, to: `r${this.sent}@example.com`, subject: `Drain ${this.sent}`, text: 'once' };
      }),
    );
    const byKey = tokens.map((token, k) => ({ token, items: requests.filter((_, r) => r % tokens.length === k) }));
    await Promise.all(
      byKey.map(async ({ token, items: batches }) => {
        for (const items of batches) {
          let res = await request(base, 'POST', '/api/v1/emails/batch', { token, body: items });
          // A key's 1,000 a second counts each item: wait out the second, as a client would.
          while (res.status === 429) {
            await sleep(1000);
            res = await request(base, 'POST', '/api/v1/emails/batch', { token, body: items });
          }
          assert.equal(res.status, 200, JSON.stringify(res.body));
          const got = (res.body as { data: { id: string }[] }).data.map((d) => d.id);
          got.forEach((id, k) => this.messageOf.set(items[k].to, `<${id}@${this.domain}>`));
          this.ids.push(...got);
        }
      }),
    );
  }

  /** Distinct messages the sink has taken. */
  distinct(): number {
    return new Set(this.sink.received.map((r) => r.parsed.messageId)).size;
  }

  /**
   * `kills` moments, at random, while the drain runs: each once a random number of further
   * messages (from `from`) has arrived, plus a random few milliseconds.
   */
  targets(kills: number, from: number): number[] {
    const span = (this.ids.length - 600 - from) / kills;
    return Array.from({ length: kills }, (_, k) => Math.round(from + k * span + 200 + Math.random() * (span - 200)));
  }

  /** Waits until `target` distinct messages arrived, then kills `child` with SIGKILL a random moment later. */
  async killAt(child: Child, target: number): Promise<void> {
    await waitFor(async () => this.distinct() >= target, `${target} messages delivered before the kill`, 120_000, 5);
    await sleep(Math.random() * 50);
    child.proc.kill('SIGKILL');
    await child.exited;
    // Transactions the process finished just before it died are parsed by the sink a moment later.
    await sleep(300);
    this.marks.push(this.sink.received.length);
    assert.ok(this.distinct() < this.ids.length, `the kill came mid-drain (${this.distinct()} of ${this.ids.length})`);
  }

  /** Waits until every message is `sent` in the database. */
  async allSent(databaseUrl: string, timeoutMs: number): Promise<void> {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await waitFor(
        async () => {
          const { rows } = await db.query(`select count(*)::int as n from emails where id = any($1::uuid[]) and status = 'sent'`, [
            this.ids,
          ]);
          return rows[0].n === this.ids.length;
        },
        `${this.ids.length} messages to be sent`,
        timeoutMs,
        500,
      );
    } finally {
      await db.end();
    }
  }

  /**
   * Checks the sink: every message arrived, each recipient only ever got its own message, and each
   * second copy is of a message first taken before a kill and again after it, at most `bound` per
   * kill. Answers the resends of each kill.
   */
  check(bound: number): number[] {
    const firstAt = new Map<string, number>();
    const perKill = this.marks.map(() => 0);
    for (const [i, r] of this.sink.received.entries()) {
      const id = r.parsed.messageId ?? '';
      assert.equal(id, this.messageOf.get(r.envelopeTo[0]), `${r.envelopeTo[0]} got only its own message`);
      const first = firstAt.get(id);
      if (first === undefined) {
        firstAt.set(id, i);
        continue;
      }
      // The kill that kept its first copy's outcome from being recorded: the first after it.
      const kill = this.marks.findIndex((m) => m > first);
      assert.ok(kill >= 0 && this.marks[kill] <= i, `${id} taken twice by the same process (arrivals ${first} and ${i})`);
      perKill[kill] += 1;
    }
    const lost = this.ids.filter((id) => !firstAt.has(`<${id}@${this.domain}>`));
    assert.deepEqual(lost, [], 'every message reached the sink');
    for (const [k, n] of perKill.entries()) assert.ok(n <= bound, `kill ${k + 1} resent ${n}, more than ${bound}`);
    return perKill;
  }
}
