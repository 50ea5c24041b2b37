import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { insertEvents } from './email-events';

/**
 * An open or a click of tracked mail, as a message event of its one recipient (webhooks fan it
 * out like any event). Only a message that asked for tracking records anything; a message gone
 * by retention records nothing (the click still redirects: its URL is in the signed token).
 * $1 message, $2 type (`opened` | `clicked`), $3 now, $4 detail (`machine` or null), $5 url.
 */
const RECORD_ENGAGEMENT: PreparedStatement = {
  name: 'record_engagement_v2',
  text: insertEvents(
    { emailId: 'e.id', organizationId: 'e.organization_id', type: '$2', recipient: 'r.address', at: '$3', detail: '$4', url: '$5' },
    `from emails e
  cross join lateral (select address from recipients where email_id = e.id and state <> 'suppressed' order by id limit 1) r
 where e.id = $1 and (e.track_opens or e.track_clicks)
returning id`,
  ),
};

export async function recordEngagement(
  orm: Orm,
  e: { emailId: string; type: 'opened' | 'clicked'; at: Date; machine: boolean; url: string | null },
): Promise<boolean> {
  const rows = await runPrepared(orm, RECORD_ENGAGEMENT, [e.emailId, e.type, e.at, e.machine ? 'machine' : null, e.url]);
  return rows.length > 0;
}
