interface Waiter<R, O> {
  request: R;
  /** When it was submitted (performance.now()). */
  since: number;
  resolve(outcome: O): void;
  reject(err: unknown): void;
}

export interface GroupCommitOptions<R> {
  /** Statements running at once. One measured best on two cores: larger groups share more. */
  maxInFlight: number;
  /** Whether `next` may join `group` (never asked for a group's first request); one that may not waits for a later group, in order. */
  accepts(group: R[], next: R): boolean;
  /** A request this large is a group already: it runs at once, beside the groups. */
  alone?(request: R): boolean;
  /** Told when a group's statement failed and its requests are run one by one. */
  onGroupFailure?(err: unknown, requests: number): void;
  /**
   * A window for company: a group's statement starts once its oldest request has waited this
   * long, or at once when the group is full (`full`, or `accepts` refused a waiting request).
   * Without it a group is whatever queued up while the previous statements ran.
   */
  windowMs?: number;
  /** With a window: whether `group` need not wait for more. */
  full?(group: R[]): boolean;
}

/**
 * Group commit: requests that arrive while a statement is in flight are handled together by the
 * next one (`execute`, one round trip and one commit), each answered only after that commit with
 * its own outcome. What a group shares is a statement's fixed cost (round trip, execution start-up,
 * WAL flush), most of what a single small request costs. Unless `windowMs` is set, nothing waits on
 * a timer: a group is whatever queued up while the previous statements ran, so a lone request runs
 * at once.
 *
 * When a group's statement fails, its requests run one by one, so one request's failure is never
 * another's. Used by the send store (core/emails/group-store.ts), contact upserts
 * (core/contacts/group-upsert.ts) and delivery outcomes (activities/outcome-commit.ts, with a window).
 */
export class GroupCommit<R, O> {
  private waiting: Waiter<R, O>[] = [];
  private inFlight = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Statements run so far (groups, plus one-by-one retries). */
  statements = 0;

  constructor(
    private readonly execute: (requests: R[]) => Promise<O[]>,
    private readonly options: GroupCommitOptions<R>,
  ) {}

  submit(request: R): Promise<O> {
    if (this.options.alone?.(request)) return this.run1(request);
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, since: performance.now(), resolve, reject });
      this.pump();
    });
  }

  private run1(request: R): Promise<O> {
    this.statements++;
    return this.execute([request]).then(([o]) => o);
  }

  private pump(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const group: Waiter<R, O>[] = [];
      const later: Waiter<R, O>[] = [];
      const requests: R[] = [];
      for (const w of this.waiting) {
        if (group.length === 0 || this.options.accepts(requests, w.request)) {
          group.push(w);
          requests.push(w.request);
        } else later.push(w);
      }
      const { windowMs, full } = this.options;
      const wait = windowMs && later.length === 0 && !full?.(requests) ? group[0].since + windowMs - performance.now() : 0;
      if (wait > 0) {
        this.timer ??= setTimeout(() => {
          this.timer = null;
          this.pump();
        }, wait);
        return;
      }
      this.waiting = later;
      this.inFlight++;
      void this.run(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async run(group: Waiter<R, O>[]): Promise<void> {
    let outcomes: O[];
    try {
      this.statements++;
      outcomes = await this.execute(group.map((w) => w.request));
    } catch (err) {
      if (group.length === 1) return group[0].reject(err);
      this.options.onGroupFailure?.(err, group.length);
      await Promise.all(group.map((w) => this.run1(w.request).then(w.resolve, w.reject)));
      return;
    }
    group.forEach((w, i) => w.resolve(outcomes[i]));
  }
}
