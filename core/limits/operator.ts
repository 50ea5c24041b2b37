import type { Orm } from '../../db/orm';
import { AuditEntry, Domain, Organization, type Plan } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { WARMUP_STAGES } from './caps';

/**
 * An operator's change: audit-logged with no key (api_key_id null), naming the console's operator
 * (`console:<email>`) when it came through the console, nobody when through `svc`.
 */
export function operatorAudit(
  organizationId: string,
  action: string,
  target: { type: string; id: string },
  details: Record<string, unknown>,
  actor: string | null,
): AuditEntry {
  return Object.assign(new AuditEntry(), {
    id: uuidv7(),
    organizationId,
    apiKeyId: null,
    actor,
    action,
    targetType: target.type,
    targetId: target.id,
    details,
    createdAt: new Date(),
  });
}

export class OperatorError extends Error {}

/**
 * `svc domain warmup`: sets a domain's warm-up stage (1 to 7) or turns warm-up off (null: no
 * domain cap, for a domain with an established reputation). The domain is named by id, or by
 * name when one undeleted domain has it.
 */
export async function setWarmupStage(orm: Orm, ref: string, stage: number | null, actor: string | null = null): Promise<Domain> {
  if (stage !== null && !(Number.isInteger(stage) && stage >= 1 && stage <= WARMUP_STAGES.length)) {
    throw new OperatorError(`--stage must be an integer from 1 to ${WARMUP_STAGES.length}`);
  }
  return orm.em.fork().transactional(async (em) => {
    const found = await em.find(Domain, isUuid(ref) ? { id: ref, deletedAt: null } : { name: ref.toLowerCase(), deletedAt: null });
    if (found.length === 0) throw new OperatorError(`no domain ${ref}`);
    if (found.length > 1) throw new OperatorError(`${found.length} organizations have a domain ${ref}: name it by id`);
    const domain = found[0];
    const from = domain.warmupStage;
    domain.warmupStage = stage;
    em.persist(
      operatorAudit(
        domain.organizationId,
        'domain.warmup_set',
        { type: 'domain', id: domain.id },
        { from, to: stage, by: 'operator' },
        actor,
      ),
    );
    return domain;
  });
}

/** `svc org plan`: moves an organization to a plan (its daily cap rules follow, core/limits/caps.ts). */
export async function setPlan(orm: Orm, organizationId: string, plan: Plan, actor: string | null = null): Promise<Organization> {
  if (!isUuid(organizationId)) throw new OperatorError('the organization must be named by id');
  return orm.em.fork().transactional(async (em) => {
    const org = await em.findOne(Organization, { id: organizationId });
    if (!org) throw new OperatorError(`no organization ${organizationId}`);
    const from = org.plan;
    org.plan = plan;
    org.updatedAt = new Date();
    em.persist(
      operatorAudit(org.id, 'organization.plan_set', { type: 'organization', id: org.id }, { from, to: plan, by: 'operator' }, actor),
    );
    return org;
  });
}
