import type { Config } from './config';

/** Domains that can never receive mail (RFC 2606, RFC 6761): a platform mail domain under one is a development default. */
const RESERVED_DOMAIN = /(^|\.)(test|example|invalid|localhost)$/i;

/**
 * What NODE_ENV=production still lacks for real mail, one line per variable (issue 51): each gap
 * alone starts a service whose mail looks sent and is not (a dev inbox, links to localhost, return
 * paths under a test domain). `needsRelay`: this process sends mail itself (svc start without a
 * test mailer, svc worker); `servesRelay`: it runs the SMTP relay (svc start).
 */
export function productionGaps(config: Config, p: { needsRelay: boolean; servesRelay: boolean }): string[] {
  if (!config.production) return [];
  const gaps: string[] = [];
  if (p.needsRelay && !config.smtpUrl) gaps.push('SMTP_URL: the outbound relay (the development inbox is for development only)');
  let publicUrl: URL | null = null;
  try {
    publicUrl = config.publicUrl ? new URL(config.publicUrl) : null;
  } catch {
    publicUrl = null;
  }
  if (publicUrl?.protocol !== 'https:') {
    gaps.push('PUBLIC_URL: the https address recipients and operators reach (one-click unsubscribe links, the console), not localhost');
  }
  if (RESERVED_DOMAIN.test(config.platformMailDomain)) {
    gaps.push(
      `PLATFORM_MAIL_DOMAIN: the service's own mail domain (every domain's return path points its MX at feedback-smtp.<it> and its SPF at _spf.<it>); ${config.platformMailDomain} is a development name`,
    );
  }
  if (p.servesRelay && config.smtpRelay && !config.smtpRelay.tlsCertFile) {
    // A generated certificate nobody can verify invites clients to turn verification off.
    gaps.push('SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY: the SMTP relay needs a real certificate (or SMTP_RELAY_PORT=off)');
  }
  return gaps;
}

/** A setting the process cannot start with: `svc` prints its message as it is, for a person to read. */
export class ConfigurationError extends Error {
  override name = 'ConfigurationError';
}

/** Refuses to go on while productionGaps finds any, naming each variable on its own line. */
export function assertReadyForProduction(config: Config, p: { needsRelay: boolean; servesRelay: boolean }): void {
  const gaps = productionGaps(config, p);
  if (gaps.length) {
    throw new ConfigurationError(`NODE_ENV=production needs what real mail needs; set:\n${gaps.map((g) => `  ${g}`).join('\n')}`);
  }
}
