/**
 * Bounds the SMTP transactions in flight and serves transactional mail first. The mailer's pool
 * queues what it cannot send yet in arrival order, so without this a transactional message
 * arriving behind a few hundred bulk messages of running batches would wait for all of them;
 * here it waits for the next free slot only.
 */
export class SendGate {
  private active = 0;
  private readonly waiting: [(() => void)[], (() => void)[]] = [[], []];

  constructor(private readonly slots: number) {}

  async run<T>(urgent: boolean, fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.slots) await new Promise<void>((resolve) => this.waiting[urgent ? 0 : 1].push(resolve));
    else this.active += 1;
    try {
      return await fn();
    } finally {
      // The slot passes straight to the next waiter (urgent ones first), or is freed.
      const next = this.waiting[0].shift() ?? this.waiting[1].shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}
