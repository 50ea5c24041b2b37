import { isIP } from 'node:net';
import { html, type Html } from '../html';
import { csrfField, listTable, refusal, seeOther } from '../layout';
import { consoleRouter, field, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { domainOfPath, type DomainView } from './domains-detail';
import { dmarcDays, markSource, type DmarcSourceStats } from '../../db/sql/dmarc-reports';
import { operatorAudit } from '../../core/limits/operator';

/** Days of reports the section shows. */
const REPORT_DAYS = 30;

const DAY_MS = 86_400_000;
const percent = (s: DmarcSourceStats) => (s.count === 0 ? '–' : `${+((100 * s.aligned) / s.count).toFixed(1)}%`);

/**
 * DMARC aggregate reports (issue 41) received at `dmarc-reports@<return-path host>`: per UTC day
 * (a report's begin), each source's volume and the share of it that passed DMARC aligned (DKIM or
 * SPF), which sources are this service (signed with the domain's d= and one of its selectors), and
 * the operator's verdict on a source, which the ramp's gate reads.
 */
export async function dmarcReportsSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, _platform: boolean): Promise<Html> {
  if (!d.return_path)
    return html`<section id="dmarc-reports">
      <h2>DMARC reports</h2>
      <p class="muted">This domain has no return path of its own, so there is no address to receive DMARC reports at.</p>
    </section>`;
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  const days = await dmarcDays(deps.orm, {
    domainId: d.id,
    from: new Date(today - (REPORT_DAYS - 1) * DAY_MS),
    to: new Date(today + DAY_MS),
  });
  const base = `/console/o/${orgAuth(ctx).organization.id}/domains/${d.id}/dmarc-sources`;
  const mark = (s: DmarcSourceStats) =>
    s.ours
      ? ''
      : html`<form method="post" action="${base}" class="inline">
          ${csrfField(ctx)}<input type="hidden" name="source_ip" value="${s.sourceIp}" />
          <input type="hidden" name="unauthorized" value="${s.unauthorized ? 'false' : 'true'}" />
          <button type="submit" class="secondary" aria-label="${s.unauthorized ? 'Mark authorized' : 'Mark unauthorized'}: ${s.sourceIp}">
            ${s.unauthorized ? 'Mark authorized' : 'Mark unauthorized'}
          </button>
        </form>`;
  return html`<section id="dmarc-reports">
    <h2>DMARC reports</h2>
    <p class="muted">
      Aggregate reports (RFC 7489) mailed by receivers to
      <span class="mono">dmarc-reports@${d.return_path}</span>, the <span class="mono">rua=</span> of the domain's DMARC record. Aligned:
      DMARC passed with DKIM or SPF aligned. Ours: signed by this service (d=${d.name} with one of its selectors). Mark a source you do not
      recognize as unauthorized: the policy ramp then no longer waits for it to pass.
    </p>
    ${
      days.length === 0
        ? html`<p class="muted">No report in the last ${REPORT_DAYS} days.</p>`
        : days.map((day) =>
            listTable({
              caption: `${day.day} (UTC): ${day.reports} report${day.reports === 1 ? '' : 's'}`,
              columns: ['Source IP', { label: 'Messages', num: true }, { label: 'Aligned', num: true }, 'Sender', 'Mark'],
              rows: day.sources.map(
                (s) =>
                  html`<tr class="dmarc-source">
                    <td class="mono">${s.sourceIp}</td>
                    <td class="num">${s.count}</td>
                    <td class="num">${s.aligned < s.count ? html`<span class="bad">${percent(s)}</span>` : percent(s)}</td>
                    <td>${s.ours ? 'ours (this service)' : s.unauthorized ? 'unauthorized' : 'other'}</td>
                    <td>${mark(s)}</td>
                  </tr>`,
              ),
            }),
          )
    }
  </section>`;
}

/** Marking a source: the organization's operators decide who sends for their domain; audited. */
export function dmarcReportsRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.post('/console/o/:org/domains/:id/dmarc-sources', async (ctx) => {
    const a = orgAuth(ctx);
    const found = await domainOfPath(deps, ctx);
    if (!found) return refusal(ctx, 404, 'No such domain.');
    const domainId = found.id;
    const sourceIp = field(ctx, 'source_ip');
    const flag = field(ctx, 'unauthorized');
    if (!isIP(sourceIp)) return refusal(ctx, 422, 'The source is an IP address.');
    if (flag !== 'true' && flag !== 'false') return refusal(ctx, 422, 'A source is marked unauthorized (true) or authorized (false).');
    const actor = `console:${session(ctx).operator.email}`;
    const unauthorized = flag === 'true';
    const changed = await deps.orm.em.fork().transactional(async (em) => {
      const wrote = await markSource(em, { domainId, sourceIp, unauthorized, by: actor, at: new Date() });
      if (wrote) {
        em.persist(
          operatorAudit(
            a.organization.id,
            'domain.dmarc_source_marked',
            { type: 'domain', id: domainId },
            { source_ip: sourceIp, unauthorized },
            actor,
          ),
        );
      }
      return wrote;
    });
    const done = changed ? (unauthorized ? 'dmarc_source_unauthorized' : 'dmarc_source_authorized') : 'dmarc_source_unchanged';
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${domainId}?done=${done}#dmarc-reports`);
  });

  return router;
}
