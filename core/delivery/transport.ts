import type { Orm } from '../../db/orm';
import { Domain, Organization, type Transport } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { OperatorError, operatorAudit } from '../limits/operator';

export const TRANSPORTS: readonly Transport[] = ['relay', 'direct'];

/** An organization's transport and, when a domain is named, the domain's own (null: its organization's) and the one that applies. */
export interface TransportSetting {
  organization_id: string;
  domain_id: string | null;
  organization_transport: Transport;
  domain_transport: Transport | null;
  effective: Transport;
}

/**
 * `svc transport set` and the console: how an organization's live mail leaves (relay or direct),
 * or a domain's override of it (`inherit` clears the override). Audited as the organization's
 * `organization.transport_set` or `domain.transport_set`, naming the console's operator when it
 * came from there. Mail already handed over is not affected; the next delivery pass reads it.
 */
export async function setTransport(
  orm: Orm,
  q: { organizationId: string; domainId?: string | null; transport: Transport | 'inherit' },
  actor: string | null = null,
): Promise<TransportSetting> {
  if (!isUuid(q.organizationId)) throw new OperatorError('the organization must be named by id');
  if (q.domainId != null && !isUuid(q.domainId)) throw new OperatorError('the domain must be named by id');
  if (q.transport === 'inherit' && q.domainId == null) throw new OperatorError('inherit applies to a domain (--domain)');
  return orm.em.fork().transactional(async (em) => {
    const org = await em.findOne(Organization, { id: q.organizationId });
    if (!org) throw new OperatorError(`no organization ${q.organizationId}`);
    if (q.domainId == null) {
      const from = org.transport;
      org.transport = q.transport as Transport;
      org.updatedAt = new Date();
      em.persist(
        operatorAudit(org.id, 'organization.transport_set', { type: 'organization', id: org.id }, { from, to: org.transport }, actor),
      );
      return {
        organization_id: org.id,
        domain_id: null,
        organization_transport: org.transport,
        domain_transport: null,
        effective: org.transport,
      };
    }
    const domain = await em.findOne(Domain, { id: q.domainId, organizationId: org.id, deletedAt: null });
    if (!domain) throw new OperatorError(`no domain ${q.domainId} in organization ${org.id}`);
    const from = domain.transport;
    domain.transport = q.transport === 'inherit' ? null : q.transport;
    em.persist(operatorAudit(org.id, 'domain.transport_set', { type: 'domain', id: domain.id }, { from, to: domain.transport }, actor));
    return {
      organization_id: org.id,
      domain_id: domain.id,
      organization_transport: org.transport,
      domain_transport: domain.transport,
      effective: domain.transport ?? org.transport,
    };
  });
}
