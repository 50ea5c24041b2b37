import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { storeEmails, type StoreParams, type StoreResult, type StoreRow } from '../../db/sql/store-emails';

/** One send request: its credentials, its cost against the key's rate, and its rows. */
export interface StoreRequest {
  tokenHash: string;
  cost: number;
  /** Charged before (a batch's reservation): admitted without a charge. */
  prepaid: boolean;
  emails: StoreRow<'id'>[];
  recipients: StoreRow<'email_id'>[];
  attachments: StoreRow<'email_id'>[];
}

/** What became of one request. */
export interface RequestOutcome {
  known: boolean;
  admitted: boolean;
  rateLimit: number | null;
  organizationId: string | null;
  stored: StoreResult['stored'];
  refused: StoreResult['refused'];
}

interface Waiter {
  request: StoreRequest;
  resolve(outcome: RequestOutcome): void;
  reject(err: unknown): void;
}

/**
 * Group commit for accepted mail. Send requests that arrive while a store statement is in flight
 * are authenticated, charged and stored together by the next one (STORE_EMAILS): one round trip
 * and one commit for the group. A request still answers only after its own messages are
 * committed; what the group shares is a statement's fixed cost (round trip, execution
 * start-up, WAL flush), which is most of what a single send costs. Nothing waits on a timer: a
 * group is whatever queued up while the previous statements ran.
 *
 * When a group's statement fails, its requests are stored one by one, so one request's failure
 * is never another's.
 */
export class GroupStore {
  private waiting: Waiter[] = [];
  private inFlight = 0;
  /** Statements run so far (groups, plus one-by-one retries). */
  statements = 0;

  constructor(
    private readonly orm: Orm,
    private readonly log: Logger,
    /**
     * Store statements running at once. One measured best on two cores: larger groups share
     * more; more statements at once only contend for the same CPU.
     */
    private readonly maxInFlight = 1,
    /** Most messages in one statement. */
    private readonly maxMessages = 1000,
    /**
     * A request with this many messages is a group already: it runs at once, beside the groups,
     * so concurrent batches use the database's cores in parallel instead of queuing.
     */
    private readonly ownStatementFrom = 20,
  ) {}

  store(request: StoreRequest): Promise<RequestOutcome> {
    if (request.emails.length >= this.ownStatementFrom) return this.execute([request]).then(([o]) => o);
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const group: Waiter[] = [];
      let messages = 0;
      while (this.waiting.length > 0 && (group.length === 0 || messages + this.waiting[0].request.emails.length <= this.maxMessages)) {
        const w = this.waiting.shift()!;
        group.push(w);
        messages += w.request.emails.length;
      }
      this.inFlight++;
      void this.run(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async run(group: Waiter[]): Promise<void> {
    let outcomes: RequestOutcome[];
    try {
      outcomes = await this.execute(group.map((w) => w.request));
    } catch (err) {
      if (group.length === 1) return group[0].reject(err);
      this.log.warn({ err, requests: group.length }, 'a group store failed; storing its requests one by one');
      await Promise.all(group.map((w) => this.execute([w.request]).then(([o]) => w.resolve(o), w.reject)));
      return;
    }
    group.forEach((w, i) => w.resolve(outcomes[i]));
  }

  private async execute(requests: StoreRequest[]): Promise<RequestOutcome[]> {
    const owner = new Map<string, number>();
    const emails: StoreParams['emails'] = [];
    const recipients: StoreParams['recipients'] = [];
    requests.forEach((r, req) => {
      for (const e of r.emails) {
        owner.set(e.id, req);
        emails.push({ ...e, req, pos: emails.length });
      }
      for (const x of r.recipients) recipients.push({ ...x, pos: recipients.length });
    });
    this.statements++;
    const row = await storeEmails(this.orm, {
      requests: requests.map((r, req) => ({ req, token_hash: r.tokenHash, cost: r.cost, prepaid: r.prepaid })),
      emails,
      recipients,
      attachments: requests.flatMap((r) => r.attachments),
    });
    const outcomes: RequestOutcome[] = requests.map(() => ({
      known: false,
      admitted: false,
      rateLimit: null,
      organizationId: null,
      stored: [],
      refused: [],
    }));
    for (const q of row.requests)
      Object.assign(outcomes[q.req], { known: q.known, admitted: q.admitted, rateLimit: q.rate_limit, organizationId: q.organization_id });
    for (const s of row.stored) outcomes[owner.get(s.id)!].stored.push(s);
    for (const f of row.refused) outcomes[owner.get(f.id)!].refused.push(f);
    return outcomes;
  }
}
