import type { Orm } from '../../db/orm';
import { AuditEntry, type Organization, type Plan } from '../../db/entities';
import { uuidv7 } from '../../db/ids';
import { createOrganization } from '../provisioning';

/** The plans an operator may put an organization on (core/limits/caps.ts: their daily caps). */
export const PLANS: readonly Plan[] = ['free', 'standard'];

/**
 * A platform operator's new organization (the console's Organizations page): created as `svc org
 * create` creates one, then written in its own audit log naming the operator (`console:<email>`),
 * no key, as the console's other operator writes are (core/limits/operator.ts).
 */
export async function createOrganizationAs(orm: Orm, name: string, plan: Plan, actor: string): Promise<Organization> {
  const org = await createOrganization(orm, name, plan);
  await orm.em.fork().persistAndFlush(
    Object.assign(new AuditEntry(), {
      id: uuidv7(),
      organizationId: org.id,
      apiKeyId: null,
      actor,
      action: 'organization.created',
      targetType: 'organization',
      targetId: org.id,
      details: { name, plan, by: 'operator' },
      createdAt: new Date(),
    }),
  );
  return org;
}
