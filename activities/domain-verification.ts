import type { DomainVerificationActivities } from '../workflows/domain-verification';
import { checkDomain, type DomainVerificationDeps } from '../core/domains/verification';

export function createDomainVerificationActivities(deps: DomainVerificationDeps): DomainVerificationActivities {
  return { checkDomain: (domainId) => checkDomain(deps, domainId) };
}
