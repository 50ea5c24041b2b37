import { createSendEmailActivities, type SendEmailDeps } from './send-email';
import { createDomainVerificationActivities } from './domain-verification';
import type { SendEmailActivities } from './send-email-types';
import type { DomainVerificationActivities } from './domain-verification-types';
import type { DnsResolver } from './dns';

export type Activities = SendEmailActivities & DomainVerificationActivities;
export type ActivityDeps = SendEmailDeps & { dns: DnsResolver };

/** Every activity the workflows call, built from narrow dependencies. */
export function createActivities(deps: ActivityDeps): Activities {
  return { ...createSendEmailActivities(deps), ...createDomainVerificationActivities(deps) };
}
