import { randomBytes } from 'node:crypto';
import { createOperator, consumePasswordLink } from '../../core/console/operators';
import type { TestEnv } from './service';

export interface OperatorLogin {
  id: string;
  email: string;
  password: string;
}

/** An operator made the way `svc operator create` makes one, with the password set through its one-time link. */
export async function newOperator(
  env: Pick<TestEnv, 'service' | 'url'>,
  organizationId: string | null,
  email?: string,
): Promise<OperatorLogin> {
  const address = email ?? `op-${randomBytes(5).toString('hex')}@example.com`;
  const created = await createOperator(env.service.db.orm, { email: address, organizationId }, env.url);
  const token = created.set_password_url.split('/').pop()!;
  const password = `pw-${randomBytes(9).toString('base64url')}`;
  const done = await consumePasswordLink(env.service.db.orm, token, password);
  if (!done || 'problem' in done) throw new Error('test operator: password not set');
  return { id: created.id, email: created.email, password };
}

const hiddenValue = (page: string, name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page)?.[1];

/**
 * The console over plain HTTP, as a browser without script would use it: a cookie jar, the
 * sign-in form's own token, and each form's CSRF field read from the page it is on.
 */
export class ConsoleClient {
  private cookies = new Map<string, string>();
  csrf = '';

  constructor(readonly baseUrl: string) {}

  private cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private keep(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i);
      const value = pair.slice(i + 1);
      if (value === '' || /max-age=0/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async get(path: string): Promise<{ status: number; html: string; headers: Headers; location: string | null }> {
    const res = await fetch(this.baseUrl + path, { headers: { cookie: this.cookieHeader() }, redirect: 'manual' });
    this.keep(res);
    const html = await res.text();
    const csrf = hiddenValue(html, '_csrf');
    if (csrf) this.csrf = csrf;
    return { status: res.status, html, headers: res.headers, location: res.headers.get('location') };
  }

  /** A form post; the session's CSRF token is added unless `fields._csrf` says otherwise (null: none). */
  async post(path: string, fields: Record<string, string | string[] | null | undefined> = {}) {
    const body = new URLSearchParams();
    const { _csrf, ...rest } = fields;
    if (_csrf !== null) body.set('_csrf', (_csrf as string | undefined) ?? this.csrf);
    for (const [k, v] of Object.entries(rest)) {
      if (v === null || v === undefined) continue;
      for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
    }
    const res = await fetch(this.baseUrl + path, {
      method: 'POST',
      headers: { cookie: this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
      redirect: 'manual',
    });
    this.keep(res);
    const html = await res.text();
    const csrf = hiddenValue(html, '_csrf');
    if (csrf) this.csrf = csrf;
    return { status: res.status, html, headers: res.headers, location: res.headers.get('location') };
  }

  /** Signs in through the form; returns the answer to the form's post (303 on success). */
  async signIn(email: string, password: string, code?: string) {
    const form = await this.get('/console/sign-in');
    const pre = hiddenValue(form.html, '_pre')!;
    const res = await this.post('/console/sign-in', { _csrf: null, _pre: pre, email, password, ...(code ? { code } : {}) });
    if (res.status === 303) await this.get('/console/overview');
    return res;
  }
}

/** Markup with its layout whitespace folded (the page source is formatted by prettier), so assertions read the content. */
export const flat = (s: string) =>
  s
    .replace(/\s+/g, ' ')
    .replace(/>\s</g, '><')
    .replace(/\s(\/?>)/g, '$1');

/** The console client, answering with folded markup. */
export class FlatConsoleClient extends ConsoleClient {
  override async get(path: string) {
    const res = await super.get(path);
    return { ...res, html: flat(res.html) };
  }
  override async post(path: string, fields: Parameters<ConsoleClient['post']>[1] = {}) {
    const res = await super.post(path, fields);
    return { ...res, html: flat(res.html) };
  }
}
