import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { GroupCommit } from '../group-commit';
import { storeEmails, type StoreParams, type StoreResult, type StoreRow } from '../../db/sql/store-emails';

/** One send request: its credentials, its cost against the key's rate, and its rows. */
export interface StoreRequest {
  /** The API key's token (a request), or the key itself (a broadcast's fan-out, authorized at creation). */
  tokenHash: string | null;
  keyId?: string;
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

/**
 * Group commit for accepted mail (core/group-commit.ts): send requests that arrive while a store
 * statement is in flight are authenticated, charged and stored together by the next one
 * (STORE_EMAILS), one round trip and one commit for the group.
 */
export class GroupStore {
  private readonly groups: GroupCommit<StoreRequest, RequestOutcome>;

  constructor(
    private readonly orm: Orm,
    log: Logger,
    /**
     * Store statements running at once. One measured best on two cores: larger groups share
     * more; more statements at once only contend for the same CPU.
     */
    maxInFlight = 1,
    /** Most messages in one statement. */
    maxMessages = 1000,
    /**
     * A request with this many messages is a group already: it runs at once, beside the groups,
     * so concurrent batches use the database's cores in parallel instead of queuing.
     */
    ownStatementFrom = 20,
  ) {
    this.groups = new GroupCommit((requests) => this.execute(requests), {
      maxInFlight,
      accepts: (group, next) => group.reduce((n, r) => n + r.emails.length, 0) + next.emails.length <= maxMessages,
      alone: (request) => request.emails.length >= ownStatementFrom,
      onGroupFailure: (err, requests) => log.warn({ err, requests }, 'a group store failed; storing its requests one by one'),
    });
  }

  /** Statements run so far (groups, plus one-by-one retries). */
  get statements(): number {
    return this.groups.statements;
  }

  store(request: StoreRequest): Promise<RequestOutcome> {
    return this.groups.submit(request);
  }

  private async execute(requests: StoreRequest[]): Promise<RequestOutcome[]> {
    const owner = new Map<string, number>();
    const emails: StoreParams['emails'] = [];
    const recipients: StoreParams['recipients'] = [];
    // The rows are this group's own (acceptEmails builds them per request), so they are numbered in
    // place: copying each one was about 4% of the process's CPU during a broadcast (profiled).
    requests.forEach((r, req) => {
      for (const e of r.emails) {
        owner.set(e.id, req);
        e.req = req;
        e.pos = emails.length;
        emails.push(e);
      }
      for (const x of r.recipients) {
        x.pos = recipients.length;
        recipients.push(x);
      }
    });
    const row = await storeEmails(this.orm, {
      requests: requests.map((r, req) => ({ req, token_hash: r.tokenHash, key_id: r.keyId ?? null, cost: r.cost, prepaid: r.prepaid })),
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
