import type { Orm } from '../orm';
import type { PropertyValue } from '../entities';

export interface BroadcastPageRow {
  position: number;
  contact_id: string;
  email: string;
  /** Null when the contact was deleted since the audience froze (then nobody is mailed). */
  first_name: string | null;
  last_name: string | null;
  properties: Record<string, PropertyValue> | null;
  deleted: boolean;
}

/** Up to `limit` frozen recipients from `from`, with the contact data their message renders from. */
export async function readBroadcastPage(orm: Orm, broadcastId: string, from: number, limit: number): Promise<BroadcastPageRow[]> {
  return orm.em.fork().execute<BroadcastPageRow[]>(
    // The page is taken from the primary key first, then joined: right after the freeze the table
    // has no statistics, and the planner joined every remaining recipient before the limit
    // (550 ms a page at the start of a 100,000 broadcast, measured; 38 ms this way). Positions are
    // dense (the freeze numbers them from 0), so the page is also bounded above: without statistics
    // the planner chose a bitmap scan of every remaining recipient and sorted them for the limit
    // (30 ms a page on average over 100,000; 2 ms bounded).
    `select r.position, r.contact_id, r.email, c.first_name, c.last_name, c.properties, c.id is null as deleted
       from (select * from broadcast_recipients where broadcast_id = ? and position >= ? and position < ? order by position limit ?) r
       left join contacts c on c.id = r.contact_id
      order by r.position`,
    [broadcastId, from, from + limit, limit],
  );
}

/**
 * Moves the fan-out cursor past a page, once: a page run again after its record was lost finds
 * the cursor moved and changes nothing (its messages were replays). Answers the broadcast's status.
 */
export async function advanceBroadcast(
  orm: Orm,
  p: { broadcastId: string; from: number; next: number; renderFailures: number; now: Date },
): Promise<string> {
  const [row] = await orm.em.fork().execute<{ status: string }[]>(
    `with a as (
       update broadcasts set enqueued = ?, render_failures = render_failures + ?, updated_at = ?
        where id = ? and enqueued = ? returning status
     )
     select coalesce((select status from a), (select status from broadcasts where id = ?)) as status`,
    [p.next, p.renderFailures, p.now, p.broadcastId, p.from, p.broadcastId],
  );
  return row.status;
}
