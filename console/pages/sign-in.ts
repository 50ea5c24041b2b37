import { randomBytes, timingSafeEqual } from 'node:crypto';
import { signIn } from '../../core/console/sign-in';
import { revokeSession } from '../../core/console/sessions';
import { consumePasswordLink, readPasswordLink } from '../../core/console/operators';
import { html, type Html } from '../html';
import { document, seeOther } from '../layout';
import { cookieName, setSessionCookie } from '../middleware';
import { consoleRouter, field, type ConsoleContext, type ConsoleDeps } from '../state';

/** Sign-in's CSRF: a random value both in a cookie and in the form (there is no session yet to hold one). */
const PRE = 'svc_console_pre';

const center = (title: string, body: Html) =>
  html`<header class="top"><strong>svc console</strong></header>
    <main id="main" class="center">
      <h1>${title}</h1>
      ${body}
    </main>`;

/** Only a path inside the console: `next` never sends an operator to another site. */
const safeNext = (v: unknown) => (typeof v === 'string' && /^\/console\/[A-Za-z0-9/_-]*$/.test(v) ? v : '/console/overview');

export function signInRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  function signInForm(ctx: ConsoleContext, status: number, message?: Html, email = '', askCode = false) {
    const pre = randomBytes(24).toString('base64url');
    ctx.append('Set-Cookie', `${PRE}=${pre}; Path=/console; HttpOnly; SameSite=Strict${deps.secureCookies ? '; Secure' : ''}`);
    const next = safeNext(ctx.query.next ?? ctx.state.form?.get('next'));
    document(
      ctx,
      status,
      'Sign in',
      center(
        'Sign in',
        html`${message ?? ''}
          <form method="post" action="/console/sign-in" class="stack">
            <input type="hidden" name="_pre" value="${pre}" /><input type="hidden" name="next" value="${next}" />
            <label>Email <input type="email" name="email" autocomplete="username" required value="${email}" /></label>
            <label>Password <input type="password" name="password" autocomplete="current-password" required /></label>
            ${askCode ? html`<label>One-time code <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required /></label>` : ''}
            <button type="submit">Sign in</button>
          </form>`,
      ),
    );
  }

  router.get('/console/sign-in', (ctx) => {
    if (ctx.state.session) return ctx.redirect('/console/overview');
    signInForm(ctx, 200);
  });

  router.post('/console/sign-in', async (ctx) => {
    const pre = ctx.cookies.get(PRE) ?? '';
    const sent = field(ctx, '_pre');
    if (!pre || pre.length !== sent.length || !timingSafeEqual(Buffer.from(pre), Buffer.from(sent))) {
      return signInForm(ctx, 403, html`<p class="error" role="alert">The form expired. Try again.</p>`);
    }
    const email = field(ctx, 'email');
    const code = field(ctx, 'code');
    const result = await signIn(deps, {
      email,
      password: ctx.state.form!.get('password') ?? '',
      ...(code ? { code } : {}),
      address: ctx.ip,
    });
    if (!result.ok) {
      if (result.reason === 'code_required') {
        return signInForm(
          ctx,
          200,
          html`<p class="banner" role="status">Enter the one-time code from your authenticator app.</p>`,
          email,
          true,
        );
      }
      const message =
        result.reason === 'locked'
          ? 'Too many failed sign-ins. This sign-in is locked for 15 minutes.'
          : 'The email, password or code is not right.';
      return signInForm(
        ctx,
        result.reason === 'locked' ? 429 : 401,
        html`<p class="error" role="alert">${message}</p>`,
        email,
        Boolean(code),
      );
    }
    setSessionCookie(ctx, deps, result.token);
    ctx.append('Set-Cookie', `${PRE}=; Path=/console; Max-Age=0`);
    seeOther(ctx, safeNext(ctx.state.form?.get('next')));
  });

  router.post('/console/sign-out', async (ctx) => {
    // Sign-out is a write like any other: only with the session's own token.
    const s = ctx.state.session;
    if (s && ctx.state.form?.get('_csrf') === s.csrf) await revokeSession(deps.orm, ctx.cookies.get(cookieName(deps.secureCookies)) ?? '');
    setSessionCookie(ctx, deps, null);
    seeOther(ctx, '/console/sign-in');
  });

  async function setPasswordPage(ctx: ConsoleContext, status: number, message?: Html) {
    const link = await readPasswordLink(deps.orm, ctx.params.token);
    if (!link)
      return document(
        ctx,
        404,
        'Link not valid',
        center(
          'This link is not valid',
          html`<p>
            It was used already, or it expired. Ask your operator for a new one (<code>svc operator create</code> or a password reset).
          </p>`,
        ),
      );
    document(
      ctx,
      status,
      'Set your password',
      center(
        'Set your password',
        html`${message ?? ''}
          <p>For <strong>${link.email}</strong>. At least 12 characters.</p>
          <form method="post" class="stack">
            <input type="hidden" name="username" value="${link.email}" autocomplete="username" />
            <label>New password <input type="password" name="password" autocomplete="new-password" minlength="12" required /></label>
            <button type="submit">Set password</button>
          </form>`,
      ),
    );
  }

  router.get('/console/set-password/:token', (ctx) => setPasswordPage(ctx, 200));
  router.post('/console/set-password/:token', async (ctx) => {
    const result = await consumePasswordLink(deps.orm, ctx.params.token, ctx.state.form!.get('password') ?? '');
    if (result === null) return setPasswordPage(ctx, 404);
    if ('problem' in result) return setPasswordPage(ctx, 422, html`<p class="error" role="alert">${result.problem}</p>`);
    document(ctx, 200, 'Password set', center('Password set', html`<p>You can <a href="/console/sign-in">sign in</a> now.</p>`));
  });

  return router;
}
