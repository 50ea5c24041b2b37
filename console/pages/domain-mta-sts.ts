import { html, type Html } from '../html';
import { csrfField, refusal, seeOther, when } from '../layout';
import { consoleRouter, field, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { domainOfPath, type DomainView } from './domains-detail';
import {
  HOSTED_MODES,
  MAX_AGE,
  domainHosting,
  ensureHosting,
  hostingRecords,
  policyText,
  setHostingMode,
  type HostedMode,
} from '../../core/domains/mta-sts-hosting';
import { tlsReportDays } from '../../db/sql/mta-sts-hosting';

/** Days of TLS-RPT report counts the section shows. */
const REPORT_DAYS = 30;

const day = (d: Date) => d.toISOString().slice(0, 10);

/**
 * MTA-STS hosting (issue 41) for the domain's return-path host, whose MX is the inbound listener:
 * the policy this service serves, the records announcing it, the TLS reports received per day, and
 * (platform operators only: the policy is about the platform's listener and its certificate,
 * shared by every organization with that host) the move between testing and enforce.
 */
export async function mtaStsSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, platform: boolean): Promise<Html> {
  // Read only: hosting is made when a check verifies the domain, or by the form below; never by a view.
  const v = await domainHosting(deps.orm, d.id);
  const base = `/console/o/${orgAuth(ctx).organization.id}/domains/${d.id}`;
  if (!v)
    return html`<h2 id="mta-sts">MTA-STS</h2>
      <p class="muted">This domain has no return path of its own, so there is no policy to host.</p>`;
  if (!v.verified)
    return html`<h2 id="mta-sts">MTA-STS</h2>
      <p class="muted">The MTA-STS policy of <span class="mono">${v.host}</span> is hosted once this domain is verified.</p>`;
  const h = v.hosting;
  const hostForm = (label: string) =>
    html`<form method="post" action="${base}/mta-sts/host">${csrfField(ctx)}<button type="submit">${label}</button></form>`;
  if (!h)
    return html`<h2 id="mta-sts">MTA-STS</h2>
      <p class="muted">Not hosted yet: it starts at the domain's next verification check.</p>
      ${hostForm('Host the MTA-STS policy now')}`;
  const now = new Date();
  // The reports since this domain was verified: none from before it proved the DNS.
  const since = Math.max(now.getTime() - (REPORT_DAYS - 1) * 86_400_000, v.verifiedAt?.getTime() ?? 0);
  const days = await tlsReportDays(deps.orm, { host: h.host, from: day(new Date(since)), to: day(now) });
  const other: HostedMode = h.mode === 'testing' ? 'enforce' : 'testing';
  return html`<h2 id="mta-sts">MTA-STS</h2>
    <p>
      Senders that support MTA-STS (RFC 8461) deliver bounces to <span class="mono">${h.host}</span> only over TLS to
      <span class="mono">${h.mx}</span>: in <strong>testing</strong> they report failures and deliver anyway, in
      <strong>enforce</strong> they do not deliver. Policy id <span class="mono">${h.policyId}</span>, since
      ${when(h.changedAt.toISOString())}.
    </p>
    ${
      v.mxChanged
        ? html`<p class="mta-sts-mx-changed">
              The return path's MX changed since this policy was issued: a new id is issued at the next check.
            </p>
            ${hostForm('Issue the new policy now')}`
        : ''
    }
    <p>Served at <span class="mono">https://mta-sts.${h.host}/.well-known/mta-sts.txt</span>:</p>
    <pre class="mono">${policyText(h)}</pre>
    <table>
      <caption class="muted">
        Records to publish (also in the table above, with what DNS holds; not needed for the domain to verify)
      </caption>
      <thead>
        <tr>
          <th scope="col">Type</th>
          <th scope="col">Name</th>
          <th scope="col">Value</th>
        </tr>
      </thead>
      <tbody>
        ${hostingRecords(h, deps.publicBase).map(
          (r) =>
            html`<tr>
              <td>${r.type}</td>
              <td class="mono">${r.name}</td>
              <td class="mono">${r.value}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <h3>TLS reports received, last ${REPORT_DAYS} days</h3>
    ${
      days.length === 0
        ? html`<p class="muted">No TLS-RPT report for ${h.host} yet.</p>`
        : html`<table>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col" class="num">Reports</th>
                <th scope="col" class="num">Successful sessions</th>
                <th scope="col" class="num">Failed sessions</th>
              </tr>
            </thead>
            <tbody>
              ${days.map(
                (r) =>
                  html`<tr>
                    <td>${r.day}</td>
                    <td class="num">${r.reports}</td>
                    <td class="num">${r.successes}</td>
                    <td class="num"><span class="${r.failures > 0 ? 'bad' : ''}">${r.failures}</span></td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    ${
      platform
        ? html`<form method="post" action="${base}/mta-sts/mode" class="stack">
            ${csrfField(ctx)}
            <input type="hidden" name="mode" value="${other}" />
            <p class="muted">
              ${
                other === 'enforce'
                  ? `Before enforcing, check that the reports show no failures: the listener must offer STARTTLS with a certificate valid for ${h.mx}.`
                  : 'Back to testing: senders deliver even when TLS fails, and report it.'
              }
              The policy is cached by senders for up to ${MAX_AGE[other]} seconds in ${other}.
            </p>
            <button type="submit">Move the policy to ${other}</button>
          </form>`
        : html`<p class="muted">Only a platform operator can change the MTA-STS mode.</p>`
    }`;
}

const NOT_HOSTED = 'MTA-STS is hosted only for a verified domain with a return path of its own.';

export function mtaStsRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  // Platform only, audited as `console:<email>` in each organization sharing the host.
  router.post('/console/o/:org/domains/:id/mta-sts/mode', async (ctx) => {
    const s = session(ctx);
    if (s.operator.role !== 'platform') return refusal(ctx, 403, 'Only a platform operator can change the MTA-STS mode.');
    const a = orgAuth(ctx);
    // The domain must be this organization's: the API's read decides.
    const found = await domainOfPath(deps, ctx);
    if (!found) return refusal(ctx, 404, 'No such domain.');
    const mode = field(ctx, 'mode');
    const back = `/console/o/${a.organization.id}/domains/${found.id}`;
    if (!HOSTED_MODES.includes(mode as HostedMode)) {
      return refusal(ctx, 422, `The MTA-STS mode is ${HOSTED_MODES.join(' or ')}.`);
    }
    const r = await setHostingMode(
      deps.orm,
      { domainId: found.id, mode: mode as HostedMode, publicBase: deps.publicBase },
      `console:${s.operator.email}`,
    );
    if (!r.hosting) return refusal(ctx, 409, NOT_HOSTED);
    seeOther(ctx, `${back}?done=${r.changed ? 'mta_sts_mode_set' : 'mta_sts_mode_unchanged'}#mta-sts`);
  });

  // Any operator of the organization: the policy hosted as a verification check would host it.
  router.post('/console/o/:org/domains/:id/mta-sts/host', async (ctx) => {
    const found = await domainOfPath(deps, ctx);
    if (!found) return refusal(ctx, 404, 'No such domain.');
    const h = await ensureHosting(deps.orm, found.id, deps.publicBase, new Date(), `console:${session(ctx).operator.email}`);
    if (!h) return refusal(ctx, 409, NOT_HOSTED);
    seeOther(ctx, `/console/o/${orgAuth(ctx).organization.id}/domains/${found.id}?done=mta_sts_hosted#mta-sts`);
  });

  return router;
}
