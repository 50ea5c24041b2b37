import { organizationLimit, utcDay } from '../../core/limits/caps';
import { OperatorError, setPlan } from '../../core/limits/operator';
import { createOrganizationAs, PLANS } from '../../core/console/organizations';
import { listOrganizations } from '../../db/sql/console-overview';
import { Organization, type Plan, type Transport } from '../../db/entities';
import { setTransport, TRANSPORTS } from '../../core/delivery/transport';
import { isUuid } from '../../db/ids';
import { html, query, type Html } from '../html';
import { csrfField, refusal, renderPage, when, seeOther } from '../layout';
import { consoleRouter, field, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { operatorAuth } from '../api';
import { cloudflareOrgRoutes, cloudflareOrgSection } from './organization-cloudflare';

const PAGE = 50;

const capText = (plan: Plan, cap: number | null) => {
  const limit = organizationLimit(plan, cap);
  const what = cap === null || (plan === 'free' && cap === 0) ? 'the plan’s' : 'set';
  return limit === null ? 'no cap' : `${limit.toLocaleString('en-US')} a day (${what})`;
};

const planSelect = (current: string) =>
  html`<select name="plan" id="plan">
    ${PLANS.map((p) => html`<option ${p === current ? html`selected` : ''}>${p}</option>`)}
  </select>`;

/** A name as the API's resourceName takes it: one line, 1 to 200 characters. */
const nameProblem = (name: string) =>
  name.length === 0
    ? 'Enter a name.'
    : name.length > 200
      ? 'The name is at most 200 characters.'
      : /[\r\n]/.test(name)
        ? 'The name must be one line.'
        : null;

/**
 * Organizations (platform operators only; mounted in console/routes.ts's platform list): the list
 * and the new organization (core: no API route creates one, `svc org create` does), an
 * organization's name, daily cap and postal address through the API's PATCH /organization, and its
 * plan through setPlan (core: the API lets no key change its own plan). Every write is audited
 * naming the operator.
 */
export function organizationRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();
  const actor = (ctx: ConsoleContext) => `console:${session(ctx).operator.email}`;

  async function list(ctx: ConsoleContext, error?: { status: number; message: string; name: string; plan: string }) {
    const page = Math.min(Math.max(Number.parseInt(String(ctx.query.page ?? '1'), 10) || 1, 1), 10_000);
    const rows = await listOrganizations(deps.orm, {
      day: utcDay(deps.caps.clock.now()),
      organizationId: null,
      byUsage: false,
      limit: PAGE,
      offset: (page - 1) * PAGE,
    });
    renderPage(ctx, {
      title: 'Organizations',
      status: error?.status,
      error: error?.message,
      body: html`<h1>Organizations</h1>
        <h2>New organization</h2>
        <form method="post" action="/console/organizations" class="stack">
          ${csrfField(ctx)}
          <label>Name <input name="name" required maxlength="200" value="${error?.name ?? ''}" /></label>
          <label for="plan">Plan</label>${planSelect(error?.plan ?? 'free')} <button type="submit">Create organization</button>
        </form>
        <h2>All organizations</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Plan</th>
              <th scope="col">Daily cap</th>
              <th scope="col">Postal address</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            ${rows.slice(0, PAGE).map(
              (o) =>
                html`<tr>
                  <td><a href="/console/organizations/${o.id}">${o.name}</a></td>
                  <td>${o.plan}</td>
                  <td>${capText(o.plan, o.daily_send_cap)}</td>
                  <td>
                    ${o.postal_address ? html`<span class="address">${o.postal_address}</span>` : html`<span class="muted">not set</span>`}
                  </td>
                  <td>${when(new Date(o.created_at).toISOString())}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${rows.length === 0 ? html`<p class="muted">No organizations yet.</p>` : ''}
        <p class="pager">
          ${page > 1 ? html`<a href="/console/organizations${query({ page: page - 1 })}" rel="prev">Previous page</a>` : ''}
          ${rows.length > PAGE ? html`<a href="/console/organizations${query({ page: page + 1 })}" rel="next">Next page</a>` : ''}
        </p>`,
    });
  }

  router.get('/console/organizations', (ctx) => list(ctx));

  router.post('/console/organizations', async (ctx) => {
    const name = field(ctx, 'name');
    const plan = field(ctx, 'plan');
    const problem = nameProblem(name) ?? (PLANS.includes(plan as Plan) ? null : `The plan is one of ${PLANS.join(', ')}.`);
    if (problem) return list(ctx, { status: 422, message: problem, name, plan });
    const org = await createOrganizationAs(deps.orm, name, plan as Plan, actor(ctx));
    seeOther(ctx, `/console/organizations/${org.id}?done=organization_created`);
  });

  /** The organization of the path, as the API's authority needs it; null: none (a 404). */
  const find = async (ctx: ConsoleContext) =>
    isUuid(ctx.params.id)
      ? await deps.orm.em.fork().findOne(Organization, { id: ctx.params.id }, { fields: ['id', 'name', 'plan', 'transport'] })
      : null;

  async function detail(ctx: ConsoleContext, error?: { status: number; message: string }) {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    const res = await deps.api.call(operatorAuth(org, session(ctx).operator), 'GET', '/organization');
    if (!res.ok) return refusal(ctx, 404, 'No such organization.');
    const o = res.body;
    const cloudflare = await cloudflareOrgSection(ctx, deps, org.id);
    // After a refused edit the form shows what was posted, so nothing typed is lost.
    const posted = error ? (name: string) => field(ctx, name) : null;
    const value = (name: string, current: unknown) =>
      posted ? posted(name) : current === null || current === undefined ? '' : String(current);
    const pages: Html[] = ['messages', 'keys', 'domains', 'audit'].map(
      (p) => html`<a href="/console/o/${o.id}/${p}">${p[0].toUpperCase() + p.slice(1)}</a>`,
    );
    renderPage(ctx, {
      title: `Organization ${o.name}`,
      status: error?.status,
      error: error?.message,
      body: html`<h1>${o.name}</h1>
        <p>${pages.map((p, i) => html`${i ? ' · ' : ''}${p}`)}</p>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${o.id}</code></dd>
          <dt>Plan</dt>
          <dd>${o.plan}</dd>
          <dt>Daily cap</dt>
          <dd>
            ${o.effective_daily_send_cap === null ? 'no cap' : o.effective_daily_send_cap.toLocaleString('en-US')}${o.plan_daily_send_ceiling !== null ? html` <span class="muted">(plan ceiling ${o.plan_daily_send_ceiling})</span>` : ''}
          </dd>
          <dt>Sent today</dt>
          <dd>${o.daily_usage.organization.sent.toLocaleString('en-US')}</dd>
          <dt>Postal address</dt>
          <dd>
            ${o.postal_address ? html`<span class="address">${o.postal_address}</span>` : html`<span class="muted">not set (bulk mail carries no legal footer)</span>`}
          </dd>
          <dt>Created</dt>
          <dd>${when(o.created_at)}</dd>
        </dl>
        <h2>Change</h2>
        <form method="post" action="/console/organizations/${o.id}" class="stack">
          ${csrfField(ctx)}
          <label>Name <input name="name" required maxlength="200" value="${value('name', o.name)}" /></label>
          <label for="plan">Plan</label>${planSelect(posted ? posted('plan') : o.plan)}
          <label
            >Daily send cap
            <input
              name="daily_send_cap"
              inputmode="numeric"
              value="${value('daily_send_cap', o.daily_send_cap)}"
              aria-describedby="cap-help"
          /></label>
          <p id="cap-help" class="muted">
            Blank: the plan's default. Free plan: a cap can only lower its ceiling of 100. Other plans: 0 means no cap.
          </p>
          <label
            >Postal address <textarea name="postal_address" rows="3" maxlength="500">${value('postal_address', o.postal_address)}</textarea>
          </label>
          <button type="submit">Save</button>
        </form>
        <h2>Transport</h2>
        <form method="post" action="/console/organizations/${o.id}/transport" class="stack">
          ${csrfField(ctx)}
          <label for="transport">How live mail leaves</label>
          <select name="transport" id="transport" aria-describedby="transport-help">
            ${TRANSPORTS.map((t) => html`<option ${t === org.transport ? html`selected` : ''}>${t}</option>`)}
          </select>
          <p id="transport-help" class="muted">
            relay: through the configured relay (SMTP_URL). direct: straight to each recipient's MX. A domain's own setting (its page)
            overrides this. Test mode never leaves the machine.
          </p>
          <button type="submit">Set transport</button>
        </form>
        ${cloudflare}`,
    });
  }

  router.get('/console/organizations/:id', (ctx) => detail(ctx));

  router.post('/console/organizations/:id', async (ctx) => {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    const plan = field(ctx, 'plan');
    if (!PLANS.includes(plan as Plan)) return detail(ctx, { status: 422, message: `The plan is one of ${PLANS.join(', ')}.` });
    const cap = field(ctx, 'daily_send_cap');
    const address = field(ctx, 'postal_address').replace(/\r\n/g, '\n');
    // The cap is checked against the plan it will be under; a refusal writes nothing, the plan neither.
    const res = await deps.api.call(operatorAuth({ ...org, plan: plan as Plan }, session(ctx).operator), 'PATCH', '/organization', {
      body: {
        name: field(ctx, 'name'),
        postal_address: address === '' ? null : address,
        // Digits go as a number; anything else as typed, for the API to refuse with its own words.
        daily_send_cap: cap === '' ? null : /^-?\d{1,12}$/.test(cap) ? Number(cap) : cap,
      },
    });
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The organization could not be changed.' });
    if (plan !== org.plan) {
      try {
        await setPlan(deps.orm, org.id, plan as Plan, actor(ctx));
      } catch (err) {
        if (err instanceof OperatorError) return detail(ctx, { status: 422, message: err.message });
        throw err;
      }
    }
    seeOther(ctx, `/console/organizations/${org.id}?done=organization_updated`);
  });

  router.post('/console/organizations/:id/transport', async (ctx) => {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    const transport = field(ctx, 'transport');
    if (!TRANSPORTS.includes(transport as Transport))
      return detail(ctx, { status: 422, message: `The transport is one of ${TRANSPORTS.join(', ')}.` });
    await setTransport(deps.orm, { organizationId: org.id, transport: transport as Transport }, actor(ctx));
    seeOther(ctx, `/console/organizations/${org.id}?done=transport_set`);
  });

  // The internal flag and the Cloudflare token (issue 41): console/pages/organization-cloudflare.ts.
  cloudflareOrgRoutes(router, deps, find);

  return router;
}
