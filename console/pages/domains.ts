import { OperatorError, setWarmupStage } from '../../core/limits/operator';
import { WARMUP_STAGES } from '../../core/limits/caps';
import { html } from '../html';
import { csrfField, refusal, renderPage, when, seeOther } from '../layout';
import { consoleRouter, field, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { domainTransport, recordsTable, transportForm, usageTable, type DomainView, domainOfPath } from './domains-detail';
import { TRANSPORTS, setTransport } from '../../core/delivery/transport';
import { dkimSection } from './domain-dkim';
import { mtaStsSection } from './domain-mta-sts';
import { dnsPublishSection } from './domain-dns-publish';
import { dmarcReportsSection } from './domain-dmarc-reports';
import { dmarcRampSection } from './domain-dmarc-ramp';
import type { Transport } from '../../db/entities';

/** Today's use against the warm-up stage's limit (no stage: no domain cap). */
const use = (d: DomainView) =>
  d.warmup.daily_limit === null
    ? html`${d.warmup.sent_today} <span class="muted">(no cap)</span>`
    : html`${d.warmup.sent_today} of ${d.warmup.daily_limit}`;

const stageText = (stage: number | null) => (stage === null ? 'off' : `stage ${stage}`);

/**
 * Domains: the API's GET /domains and GET /domains/:id (records with `value` and `observed`),
 * POST /domains/:id/verify ("verify now") and PATCH /domains/:id (its one field, the tracking host;
 * the stream is set at creation and the API offers no change of it). The warm-up stage is no API
 * write: a platform operator sets it through core/limits/operator.ts setWarmupStage, as `svc domain
 * warmup` does, audited as `console:<email>`.
 */
export function domainRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.get('/console/o/:org/domains', async (ctx) => {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/domains`;
    const res = await deps.api.call(a, 'GET', '/domains');
    const domains = res.ok ? (res.body.data as DomainView[]) : [];
    renderPage(ctx, {
      title: 'Domains',
      current: 'domains',
      status: res.ok ? 200 : res.status,
      error: res.error?.message,
      body: html`<h1>Domains</h1>
        <table>
          <caption class="muted">
            Today's use counts recipients reserved this UTC day
          </caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Stream</th>
              <th scope="col">Tracking host</th>
              <th scope="col">Warm-up</th>
              <th scope="col" class="num">Today's use</th>
            </tr>
          </thead>
          <tbody>
            ${domains.map(
              (d) =>
                html`<tr>
                  <td><a href="${base}/${d.id}">${d.name}</a></td>
                  <td><span class="${d.status === 'verified' ? 'good' : ''}">${d.status}</span></td>
                  <td>${d.stream}</td>
                  <td>${d.tracking_host ?? html`<span class="muted">—</span>`}</td>
                  <td>${stageText(d.warmup.stage)}</td>
                  <td class="num">${use(d)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${res.ok && domains.length === 0 ? html`<p class="muted">No domains yet.</p>` : ''}`,
    });
  });

  async function detail(ctx: ConsoleContext, error?: { status: number; message: string }) {
    const a = orgAuth(ctx);
    const [res, org] = await Promise.all([
      deps.api.call(a, 'GET', `/domains/${encodeURIComponent(ctx.params.id)}`),
      deps.api.call(a, 'GET', '/organization'),
    ]);
    if (!res.ok) return refusal(ctx, 404, 'No such domain.');
    const d = res.body as DomainView;
    const base = `/console/o/${a.organization.id}/domains/${d.id}`;
    const platform = session(ctx).operator.role === 'platform';
    const [transport, ...ops] = await Promise.all([
      platform ? domainTransport(deps, a.organization.id, d.id) : null,
      // Domain operations (issue 41), each its own file: DKIM rotation, MTA-STS hosting, DNS publishing.
      dkimSection(ctx, deps, d, platform),
      mtaStsSection(ctx, deps, d, platform),
      dnsPublishSection(ctx, deps, d, platform),
      dmarcReportsSection(ctx, deps, d, platform),
      dmarcRampSection(ctx, deps, d, platform),
    ]);
    renderPage(ctx, {
      title: `Domain ${d.name}`,
      current: 'domains',
      status: error?.status,
      error: error?.message,
      body: html`<h1>${d.name}</h1>
        <dl class="facts">
          <dt>Status</dt>
          <dd><span class="${d.status === 'verified' ? 'good' : ''}">${d.status}</span></dd>
          <dt>Stream</dt>
          <dd>${d.stream} <span class="muted">(set when the domain was created)</span></dd>
          <dt>DNS provider</dt>
          <dd>${d.dns_provider}</dd>
          <dt>DKIM selector</dt>
          <dd>${d.dkim_selector ?? '—'}</dd>
          <dt>Return path</dt>
          <dd>${d.return_path ?? '—'}</dd>
          <dt>Tracking host</dt>
          <dd>${d.tracking_host ?? '—'}</dd>
          <dt>Created</dt>
          <dd>${when(d.created_at)}</dd>
          <dt>Last checked</dt>
          <dd>${when(d.last_checked_at)}</dd>
          <dt>Verified</dt>
          <dd>${when(d.verified_at)}</dd>
        </dl>
        <form method="post" action="${base}/verify">${csrfField(ctx)}<button type="submit">Verify now</button></form>
        <h2>DNS records</h2>
        ${recordsTable(d.records)}
        <h2>Tracking host</h2>
        <form method="post" action="${base}/tracking" class="stack">
          ${csrfField(ctx)}
          <label
            >Host of open pixels and click links (empty: none)
            <input name="tracking_host" value="${d.tracking_host ?? ''}" placeholder="links.${d.name}"
          /></label>
          <button type="submit">Save tracking host</button>
        </form>
        <h2>Warm-up and today's use</h2>
        <p>
          Warm-up: ${stageText(d.warmup.stage)}${d.warmup.daily_limit === null ? ' (no domain cap)' : ` (${d.warmup.daily_limit} per day)`}.
        </p>
        ${org.ok ? usageTable(d, org.body.daily_usage) : ''}
        ${
          platform
            ? html`<form method="post" action="${base}/warmup" class="stack">
                ${csrfField(ctx)}
                <label
                  >Warm-up stage
                  <select name="stage">
                    <option value="off" ${d.warmup.stage === null ? html`selected` : ''}>off (no domain cap)</option>
                    ${WARMUP_STAGES.map((limit, i) => html`<option value="${i + 1}" ${d.warmup.stage === i + 1 ? html`selected` : ''}>stage ${i + 1}: ${limit} per day</option>`)}
                  </select></label
                >
                <button type="submit">Set warm-up stage</button>
              </form>`
            : html`<p class="muted">Only a platform operator can change the warm-up stage.</p>`
        }
        ${transport ? transportForm(ctx, base, transport) : ''} ${ops}`,
    });
  }

  router.get('/console/o/:org/domains/:id', (ctx) => detail(ctx));

  router.post('/console/o/:org/domains/:id/verify', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'POST', `/domains/${encodeURIComponent(ctx.params.id)}/verify`);
    if (res.status === 404) return refusal(ctx, 404, 'No such domain.');
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The domain could not be checked.' });
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${ctx.params.id}?done=verify_started`);
  });

  router.post('/console/o/:org/domains/:id/tracking', async (ctx) => {
    const a = orgAuth(ctx);
    const host = field(ctx, 'tracking_host');
    const res = await deps.api.call(a, 'PATCH', `/domains/${encodeURIComponent(ctx.params.id)}`, { body: { tracking_host: host || null } });
    if (res.status === 404) return refusal(ctx, 404, 'No such domain.');
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The domain could not be updated.' });
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${ctx.params.id}?done=domain_updated`);
  });

  // Platform only: the API has no warm-up write; core's setWarmupStage, named after the operator.
  router.post('/console/o/:org/domains/:id/warmup', async (ctx) => {
    const s = session(ctx);
    if (s.operator.role !== 'platform') return refusal(ctx, 403, 'Only a platform operator can set the warm-up stage.');
    const a = orgAuth(ctx);
    // The domain must be this organization's (setWarmupStage takes any id): the API's read decides.
    const found = await domainOfPath(deps, ctx);
    if (!found) return refusal(ctx, 404, 'No such domain.');
    const raw = field(ctx, 'stage');
    const stage = raw === 'off' ? null : /^\d+$/.test(raw) ? Number(raw) : NaN;
    try {
      await setWarmupStage(deps.orm, found.id, stage, `console:${s.operator.email}`);
    } catch (err) {
      if (err instanceof OperatorError) {
        return detail(ctx, { status: 400, message: `The warm-up stage must be off or 1 to ${WARMUP_STAGES.length}.` });
      }
      throw err;
    }
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${found.id}?done=warmup_set`);
  });

  // Platform only: transport selection is no API write (spec); core's setTransport, audited.
  router.post('/console/o/:org/domains/:id/transport', async (ctx) => {
    const s = session(ctx);
    if (s.operator.role !== 'platform') return refusal(ctx, 403, 'Only a platform operator can set the transport.');
    const a = orgAuth(ctx);
    const found = await domainOfPath(deps, ctx);
    if (!found) return refusal(ctx, 404, 'No such domain.');
    const choice = field(ctx, 'transport');
    if (choice !== 'inherit' && !TRANSPORTS.includes(choice as Transport))
      return detail(ctx, { status: 422, message: `The transport is inherit, ${TRANSPORTS.join(' or ')}.` });
    await setTransport(
      deps.orm,
      { organizationId: a.organization.id, domainId: found.id, transport: choice as Transport | 'inherit' },
      `console:${s.operator.email}`,
    );
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${found.id}?done=transport_set`);
  });

  return router;
}
