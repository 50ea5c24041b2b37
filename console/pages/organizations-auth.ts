import type { AuthOrganization, AuthState } from '../../core/auth';

/**
 * The authority the console calls the API with for one organization, outside /console/o/:org
 * (the overview's rows, the Organizations page): the shape orgScope (console/middleware.ts) gives
 * an organization page. The console is no key: its writes are audited under the operator, and it
 * is never rate limited. Only for an organization the operator may see (the caller checks).
 */
export function authFor(org: AuthOrganization, operator: { email: string }): AuthState {
  const organization = { id: org.id, name: org.name, plan: org.plan };
  return {
    key: {
      id: org.id,
      organizationId: org.id,
      name: `console:${operator.email}`,
      permission: 'admin',
      mode: 'live',
      domainIds: null,
      rateLimit: null,
    },
    organization,
    operator: { email: operator.email },
  };
}
