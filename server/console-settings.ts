import { linkBaseUrl, type Config } from './config';
import type { ConsoleDeps } from '../console/state';

/** The console's settings that come from configuration alone (the domain-operation deps are wired in service.ts). */
export function consoleSettings(
  config: Config,
  port: number,
): Pick<ConsoleDeps, 'policy' | 'secureCookies' | 'publicBase' | 'dkimRotation'> {
  return {
    policy: { idleMs: config.consoleIdleMinutes * 60_000, absoluteMs: config.consoleMaxHours * 3_600_000 },
    // PUBLIC_URL is https: the session cookie is Secure (and __Host- prefixed).
    secureCookies: (config.publicUrl ?? '').startsWith('https:'),
    publicBase: linkBaseUrl(config, port),
    dkimRotation: config.dkimRotation,
  };
}
