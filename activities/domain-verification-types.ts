/** The activities DomainVerification calls; workflows import these types only. */
export interface CheckDomainResult {
  status: 'pending' | 'verified' | 'deleted';
}

export interface DomainVerificationActivities {
  /** Resolves the domain's records, stores what was observed, verifies when all required match. */
  checkDomain(domainId: string): Promise<CheckDomainResult>;
}
