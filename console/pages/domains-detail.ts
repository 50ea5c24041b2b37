import { html, type Html } from '../html';
import { Domain, Organization, type Transport } from '../../db/entities';
import { TRANSPORTS } from '../../core/delivery/transport';
import { csrfField, renderPage } from '../layout';
import { orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';

/** A DNS record as GET /domains/:id shows it: what to publish (`value`) and what DNS held (`observed`). */
export interface RecordView {
  purpose: string;
  type: string;
  name: string;
  value: string;
  required: boolean;
  status: 'pending' | 'verified' | 'missing' | 'mismatch';
  observed: string | null;
}

/** A domain as the API shows it (api/domains/present.ts). */
export interface DomainView {
  id: string;
  name: string;
  status: string;
  stream: string;
  dns_provider: string;
  dkim_selector: string | null;
  return_path: string | null;
  tracking_host: string | null;
  warmup: { stage: number | null; daily_limit: number | null; sent_today: number };
  records: RecordView[];
  created_at: string;
  last_checked_at: string | null;
  verified_at: string | null;
}

/** GET /organization's `daily_usage` (core/limits/usage.ts dailyUsage). */
export interface DailyUsage {
  day: string;
  platform: { limit: number | null; sent: number };
  organization: { limit: number | null; sent: number };
  domains: { id: string; name: string; warmup_stage: number | null; limit: number | null; sent: number }[];
}

/** How a record compares with DNS, in words: the check's own verdict, a difference marked as one. */
const VERDICT: Record<RecordView['status'], [string, string]> = {
  verified: ['matches', 'good'],
  mismatch: ['differs', 'bad'],
  missing: ['missing', 'bad'],
  pending: ['not checked yet', 'muted'],
};

/** The records to publish, each `value` beside the `observed` answer, those that differ marked. */
export function recordsTable(records: RecordView[]): Html {
  if (!records.length) return html`<p class="muted">This domain has no records to publish.</p>`;
  const differ = records.filter((r) => r.status === 'mismatch' || r.status === 'missing');
  return html`<p>
      ${differ.length ? html`<span class="bad">${differ.length} of ${records.length} records differ from DNS.</span>` : html`<span class="good">No record differs from DNS.</span>`}
    </p>
    <table>
      <caption class="muted">
        Value: what to publish; observed: what the last check resolved at the name
      </caption>
      <thead>
        <tr>
          <th scope="col">Purpose</th>
          <th scope="col">Type</th>
          <th scope="col">Name</th>
          <th scope="col">Value</th>
          <th scope="col">Observed</th>
          <th scope="col">Compared</th>
        </tr>
      </thead>
      <tbody>
        ${records.map((r) => {
          const [word, cls] = VERDICT[r.status] ?? [r.status, ''];
          return html`<tr class="record-${r.status}">
            <td>${r.purpose}${r.required ? '' : html` <span class="muted">(optional)</span>`}</td>
            <td>${r.type}</td>
            <td class="mono">${r.name}</td>
            <td class="mono">${r.value}</td>
            <td class="mono">${r.observed ?? html`<span class="muted">nothing</span>`}</td>
            <td><span class="${cls}">${word}</span></td>
          </tr>`;
        })}
      </tbody>
    </table>`;
}

const of = (sent: number, limit: number | null) =>
  limit === null ? html`${sent} <span class="muted">(no cap)</span>` : html`${sent} of ${limit}`;

/** Today's use of the three daily allowances that apply to this domain's mail. */
export function usageTable(d: DomainView, usage: DailyUsage): Html {
  const mine = usage.domains.find((x) => x.id === d.id);
  return html`<table>
    <caption class="muted">
      Recipients reserved on ${usage.day} (UTC)
    </caption>
    <thead>
      <tr>
        <th scope="col">Allowance</th>
        <th scope="col" class="num">Used today</th>
      </tr>
    </thead>
    <tbody>
      <tr>
        <td>This domain's warm-up</td>
        <td class="num">${of(mine?.sent ?? d.warmup.sent_today, mine ? mine.limit : d.warmup.daily_limit)}</td>
      </tr>
      <tr>
        <td>The organization</td>
        <td class="num">${of(usage.organization.sent, usage.organization.limit)}</td>
      </tr>
      <tr>
        <td>The platform</td>
        <td class="num">${of(usage.platform.sent, usage.platform.limit)}</td>
      </tr>
    </tbody>
  </table>`;
}

/** A domain's own transport (null: its organization's) and its organization's, for the platform operator's form. */
export async function domainTransport(
  deps: Pick<ConsoleDeps, 'orm'>,
  organizationId: string,
  domainId: string,
): Promise<{ own: Transport | null; organization: Transport } | null> {
  const em = deps.orm.em.fork();
  const [domain, org] = await Promise.all([
    em.findOne(Domain, { id: domainId, organizationId }, { fields: ['transport'] }),
    em.findOne(Organization, { id: organizationId }, { fields: ['transport'] }),
  ]);
  return domain && org ? { own: domain.transport, organization: org.transport } : null;
}

export const transportForm = (ctx: ConsoleContext, base: string, t: { own: Transport | null; organization: Transport }) =>
  html`<h2>Transport</h2>
    <form method="post" action="${base}/transport" class="stack">
      ${csrfField(ctx)}
      <label for="transport">How this domain's live mail leaves</label>
      <select name="transport" id="transport">
        <option value="inherit" ${t.own === null ? html`selected` : ''}>the organization's (${t.organization})</option>
        ${TRANSPORTS.map((x) => html`<option ${t.own === x ? html`selected` : ''}>${x}</option>`)}
      </select>
      <button type="submit">Set transport</button>
    </form>`;

/** The domain a domain-operation route's path names, as the API reads it for this organization; null: none (a 404). */
export async function domainOfPath(deps: Pick<ConsoleDeps, 'api'>, ctx: ConsoleContext) {
  const a = orgAuth(ctx);
  const found = await deps.api.call(a, 'GET', `/domains/${encodeURIComponent(ctx.params.id)}`);
  if (!found.ok) return null;
  const d = found.body as DomainView;
  return { id: d.id, organizationId: a.organization.id, name: d.name };
}

/** A domain operation refused for the state it is in (409), with the way back to the domain. */
export function domainConflict(ctx: ConsoleContext, title: string, domainId: string, message: string): void {
  renderPage(ctx, {
    title,
    current: 'domains',
    status: 409,
    error: message,
    body: html`<p><a href="/console/o/${orgAuth(ctx).organization.id}/domains/${domainId}">Back to the domain</a></p>`,
  });
}
