import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { upsertContacts, type UpsertContactRow, type UpsertRequest } from '../../db/sql/upsert-contacts';

interface Waiter {
  request: UpsertRequest;
  resolve(row: UpsertContactRow): void;
  reject(err: unknown): void;
}

/**
 * Group commit for contact upserts, as GroupStore is for sends: requests that arrive while an
 * upsert statement is in flight are authenticated, charged and written together by the next one
 * (db/sql/upsert-contacts.ts), one round trip and one commit for the group. A request still
 * answers only after its own contact is committed. A group never holds two requests for one
 * address (a statement cannot change one row twice): the later one waits for the next group, so
 * each address's upserts apply in arrival order.
 *
 * When a group's statement fails (one request over the property ceiling fails them all), its
 * requests run one by one, so one request's failure is never another's.
 */
export class GroupUpsert {
  private waiting: Waiter[] = [];
  private inFlight = 0;

  constructor(
    private readonly orm: Orm,
    private readonly log: Logger,
    /** Statements at once; as for sends, one measured best on two cores. */
    private readonly maxInFlight = 1,
    /** Most requests in one statement. */
    private readonly maxGroup = 200,
  ) {}

  upsert(request: UpsertRequest): Promise<UpsertContactRow> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const group: Waiter[] = [];
      const emails = new Set<string>();
      const later: Waiter[] = [];
      for (const w of this.waiting) {
        if (group.length < this.maxGroup && !emails.has(w.request.email)) {
          group.push(w);
          emails.add(w.request.email);
        } else later.push(w);
      }
      this.waiting = later;
      this.inFlight++;
      void this.run(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async run(group: Waiter[]): Promise<void> {
    let rows: UpsertContactRow[];
    try {
      rows = await upsertContacts(
        this.orm,
        group.map((w) => w.request),
        new Date(),
      );
    } catch (err) {
      if (group.length === 1) return group[0].reject(err);
      this.log.debug({ err, requests: group.length }, 'a group upsert failed; running its requests one by one');
      for (const w of group) {
        try {
          w.resolve((await upsertContacts(this.orm, [w.request], new Date()))[0]);
        } catch (e) {
          w.reject(e);
        }
      }
      return;
    }
    group.forEach((w, i) => w.resolve(rows[i]));
  }
}
