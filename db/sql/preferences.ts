import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { effectiveState, topicsWithRows } from './topic-state';

export interface PreferencesRow {
  organization: string;
  /** The contact's status, null when the address is no contact (then every topic has its default). */
  status: 'subscribed' | 'unsubscribed' | 'bounced' | null;
  /** Every topic of the organization with the address's effective state, by name. */
  topics: { id: string; name: string; state: 'subscribed' | 'unsubscribed' }[];
}

/**
 * What the preference page shows one recipient: read only (a GET never changes anything).
 * $1 organization, $2 address. No row when the organization is gone.
 */
const PREFERENCES: PreparedStatement = {
  name: 'preferences_v1',
  text: `
select o.name as organization, c.status,
       coalesce((select json_agg(json_build_object('id', t.id, 'name', t.name,
                   'state', ${effectiveState('t.default_opt_in', 's.state')})
                   order by t.name, t.id)
                   from ${topicsWithRows('c.id')}
                  where t.organization_id = o.id), '[]') as topics
  from organizations o left join contacts c on c.organization_id = o.id and c.email = $2
 where o.id = $1`,
};

export async function readPreferences(orm: Orm, organizationId: string, address: string): Promise<PreferencesRow | null> {
  const [row] = await runPrepared<PreferencesRow>(orm, PREFERENCES, [organizationId, address]);
  return row ?? null;
}
