import Router, { type RouterContext, type RouterMiddleware } from '@koa/router';
import type { Logger } from 'pino';
import type { AuthState, AuthOrganization } from '../core/auth';
import type { ConsoleSession, SessionPolicy } from '../core/console/sessions';
import type { Secrets } from '../core/secrets';
import type { Orm } from '../db/orm';
import type { CapsSettings } from '../core/limits/usage';
import type { RunSignals } from '../core/emails/unconfirmed';
import type { ConsoleApi } from './api';
import type { DnsResolver } from '../core/domains/dns';
import type { CloudflareSettings } from '../core/dns-publish/cloudflare';
import type { Engine, WorkersStatus } from '../worker/engine';
import type { DkimRotationConfig } from '../core/domains/dkim-keys';

/** What the console's middleware leaves for its pages. */
export interface ConsoleState {
  /** The signed-in operator (every page but sign-in and set-password). */
  session?: ConsoleSession;
  /** Pages under /console/o/:org: the organization, and the authority the console calls the API with. */
  org?: AuthOrganization;
  auth?: AuthState;
  /** A POST's form fields, parsed once (CSRF checked before the page sees them). */
  form?: URLSearchParams;
  /** Who polls the engine's task queues, as last checked (Temporal): every page warns when no one does. */
  workers?: WorkersStatus;
}

export type ConsoleContext = RouterContext<ConsoleState>;
export type ConsoleMiddleware = RouterMiddleware<ConsoleState>;

export interface ConsoleDeps {
  orm: Orm;
  log: Logger;
  secrets: Secrets;
  api: ConsoleApi;
  policy: SessionPolicy;
  /** PUBLIC_URL is https: the session cookie is Secure (and __Host- prefixed). */
  secureCookies: boolean;
  /** The base of links the console prints (set-password links). */
  publicBase: string;
  /** The daily caps, as GET /organization shows them (the overview's usage against caps). */
  caps: CapsSettings;
  /** The engine, to tell a Temporal run waiting at `sent` that its message was closed as unconfirmed; whether workers poll. */
  engine: RunSignals & Pick<Engine, 'start' | 'signal' | 'workers'>;
  /** Publishing DNS records to Cloudflare: the resolvers each write is checked with, the API's base; absent: no publishing. */
  dnsPublish?: { dns: DnsResolver; cloudflare: CloudflareSettings };
  /** DkimRotation's timing (DKIM_* settings); absent: the defaults. */
  dkimRotation?: DkimRotationConfig;
}

export function consoleRouter(): Router<ConsoleState> {
  return new Router<ConsoleState>({ sensitive: true });
}

export function session(ctx: { state: ConsoleState }): ConsoleSession {
  if (!ctx.state.session) throw new Error('console page reached without a session');
  return ctx.state.session;
}

export function orgAuth(ctx: { state: ConsoleState }): AuthState {
  if (!ctx.state.auth) throw new Error('organization page reached without an organization');
  return ctx.state.auth;
}

/** A form field as one line of text (absent: empty). */
export const field = (ctx: { state: ConsoleState }, name: string): string => (ctx.state.form?.get(name) ?? '').trim();
