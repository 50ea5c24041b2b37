import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { upsertContacts, type UpsertContactRow, type UpsertRequest } from '../../db/sql/upsert-contacts';
import { GroupCommit } from '../group-commit';

/**
 * Group commit for contact upserts (core/group-commit.ts), as for sends: concurrent requests are
 * authenticated, charged and written by one statement (db/sql/upsert-contacts.ts). A group never
 * holds two requests for one address (a statement cannot change one row twice): the later one
 * waits for the next group, so each address's upserts apply in arrival order. When a group fails
 * (one request over the property ceiling fails the statement), its requests run one by one.
 */
export class GroupUpsert {
  private readonly groups: GroupCommit<UpsertRequest, UpsertContactRow>;

  constructor(orm: Orm, log: Logger, maxInFlight = 1, maxGroup = 200) {
    this.groups = new GroupCommit((requests) => upsertContacts(orm, requests, new Date()), {
      maxInFlight,
      accepts: (group, next) => group.length < maxGroup && !group.some((r) => r.email === next.email),
      onGroupFailure: (err, requests) => log.debug({ err, requests }, 'a group upsert failed; running its requests one by one'),
    });
  }

  upsert(request: UpsertRequest): Promise<UpsertContactRow> {
    return this.groups.submit(request);
  }
}
