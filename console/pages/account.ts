import { beginTotp, changePassword, confirmTotp, disableTotp } from '../../core/console/operators';
import { openSession } from '../../core/console/sessions';
import { html } from '../html';
import { csrfField, renderPage, seeOther } from '../layout';
import { setSessionCookie } from '../middleware';
import { consoleRouter, field, session, type ConsoleContext, type ConsoleDeps } from '../state';

/** The signed-in operator's own account: password change and the TOTP second factor. */
export function accountRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  function page(ctx: ConsoleContext, opts: { status?: number; error?: string; pending?: { secret: string; uri: string } } = {}) {
    const s = session(ctx);
    const totp = s.operator.totpEnabled
      ? html`<p>Two-factor sign-in is <strong>on</strong>.</p>
          <form method="post" action="/console/account/totp/disable" data-confirm="Turn off two-factor sign-in?">
            ${csrfField(ctx)}<button class="danger" type="submit">Turn off</button>
          </form>`
      : opts.pending
        ? html`<p>Add this key to your authenticator app (or open the link on your phone), then enter the code it shows.</p>
            <p class="secret">
              <code id="totp-secret">${opts.pending.secret}</code>
              <button type="button" class="secondary" data-copy="totp-secret">Copy</button><br /><a href="${opts.pending.uri}"
                >${opts.pending.uri}</a
              >
            </p>
            <form method="post" action="/console/account/totp/confirm" class="stack">
              ${csrfField(ctx)}
              <label
                >One-time code <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required
              /></label>
              <button type="submit">Turn on</button>
            </form>`
        : html`<p>Two-factor sign-in is off.</p>
            <form method="post" action="/console/account/totp/begin">
              ${csrfField(ctx)}<button type="submit">Set up two-factor sign-in</button>
            </form>`;
    renderPage(ctx, {
      title: 'Your account',
      status: opts.status,
      error: opts.error,
      body: html`<h1>Your account</h1>
        <dl class="facts">
          <dt>Email</dt>
          <dd>${s.operator.email}</dd>
          <dt>Role</dt>
          <dd>${s.operator.role === 'platform' ? 'Platform operator' : 'Organization admin'}</dd>
        </dl>
        <h2>Change password</h2>
        <form method="post" action="/console/account/password" class="stack">
          ${csrfField(ctx)}
          <input type="hidden" name="username" value="${s.operator.email}" autocomplete="username" />
          <label>Current password <input type="password" name="current" autocomplete="current-password" required /></label>
          <label>New password <input type="password" name="next" autocomplete="new-password" minlength="12" required /></label>
          <button type="submit">Change password</button>
        </form>
        <h2>Two-factor sign-in (TOTP)</h2>
        ${totp}`,
    });
  }

  router.get('/console/account', (ctx) => page(ctx));

  router.post('/console/account/password', async (ctx) => {
    const s = session(ctx);
    const result = await changePassword(deps.orm, s.operator.id, ctx.state.form!.get('current') ?? '', ctx.state.form!.get('next') ?? '');
    if (!('ok' in result)) return page(ctx, { status: 422, error: result.problem });
    // Every session was revoked with the change, this one too: the operator carries on in a new one.
    const fresh = await openSession(deps.orm, s.operator.id, deps.policy);
    setSessionCookie(ctx, deps, fresh.token);
    seeOther(ctx, '/console/account?done=password_changed');
  });

  router.post('/console/account/totp/begin', async (ctx) => {
    page(ctx, { pending: await beginTotp(deps.orm, deps.secrets, session(ctx).operator.id) });
  });

  router.post('/console/account/totp/confirm', async (ctx) => {
    if (!(await confirmTotp(deps.orm, deps.secrets, session(ctx).operator.id, field(ctx, 'code')))) {
      return page(ctx, { status: 422, error: 'That code is not right. Set up again and enter the current code.' });
    }
    seeOther(ctx, '/console/account?done=totp_enabled');
  });

  router.post('/console/account/totp/disable', async (ctx) => {
    await disableTotp(deps.orm, session(ctx).operator.id);
    seeOther(ctx, '/console/account?done=totp_disabled');
  });

  return router;
}
