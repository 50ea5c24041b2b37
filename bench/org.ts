import type { Orm } from '../db/orm';
import { Organization } from '../db/entities';
import { createOrganization } from '../core/provisioning';

/**
 * An organization on the standard plan with no daily cap (0): the benchmarks measure the
 * pipeline, not the caps (PLATFORM_DAILY_CAP=0 and DOMAIN_WARMUP=off for the same reason).
 * Reservations still run for every live message, as in production.
 */
export async function benchOrganization(orm: Orm, name: string): Promise<Organization> {
  const org = await createOrganization(orm, name, 'standard');
  await orm.em.fork().nativeUpdate(Organization, { id: org.id }, { dailySendCap: 0 });
  return org;
}
