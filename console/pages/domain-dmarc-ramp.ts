import { html, type Html } from '../html';
import { csrfField, refusal, seeOther, when } from '../layout';
import { consoleRouter, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { domainConflict, domainOfPath, type DomainView } from './domains-detail';
import { DmarcRampRefused, markDmarcRampStopped, readRamp, requestDmarcStep, startDmarcRamp } from '../../core/dmarc/ramp-ops';
import { dmarcRecordName, dmarcRecordValue, nextDmarcStep, previousDmarcStep } from '../../core/dmarc/ramp';
import { DMARC_CHECK_INTERVAL_MS, DMARC_REQUEST_SIGNAL, dmarcRamp, dmarcRampWorkflowId } from '../../workflows/dmarc-ramp';
import type { DmarcRampRequest } from '../../db/sql/dmarc-ramps';
import { uuidv7 } from '../../db/ids';
import { listPublications, type Publication } from '../../db/sql/cloudflare';

const iso = (d: Date | string | null) => (d ? new Date(d).toISOString() : null);

/** The ramp on the domain page: the step, the exact record, the gate's last verdict, and the moves it offers. */
export async function dmarcRampSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, _platform: boolean): Promise<Html> {
  const ramp = await readRamp(deps.orm, d.id);
  const base = `/console/o/${orgAuth(ctx).organization.id}/domains/${d.id}/dmarc-ramp`;
  const form = (action: string, label: string, note: string) =>
    html`<form method="post" action="${base}/${action}">
      ${csrfField(ctx)}<button type="submit">${label}</button> <span class="muted">${note}</span>
    </form>`;
  if (!ramp) {
    return html`<section id="dmarc-ramp">
      <h2>DMARC policy ramp</h2>
      ${
        d.return_path
          ? html`<p class="muted">
                Not started. It publishes
                <span class="mono">${dmarcRecordName(d.name)} TXT ${dmarcRecordValue('none', d.return_path)}</span> first, then offers
                quarantine and reject as the reports allow.
              </p>
              ${form('start', 'Start the DMARC ramp', 'At p=none: receivers only report.')}`
          : html`<p class="muted">This domain has no return-path host to receive reports at.</p>`
      }
    </section>`;
  }
  const v = ramp.verdict;
  const published = (await listPublications(deps.orm, d.id)).find((p) => p.purpose === 'dmarc');
  const next = nextDmarcStep(ramp.step);
  const back = previousDmarcStep(ramp.step);
  const running = ramp.state === 'running';
  return html`<section id="dmarc-ramp">
    <h2>DMARC policy ramp</h2>
    <p>
      Step <strong class="dmarc-step">p=${ramp.step}</strong> since
      ${when(iso(ramp.step_since))}${running ? '' : html` (<span class="dmarc-stopped">ramp stopped</span>)`}. Publish
      <span class="mono">${dmarcRecordName(d.name)} TXT ${d.return_path ? dmarcRecordValue(ramp.step, d.return_path) : ''}</span>
    </p>
    ${
      published
        ? html`<p class="dmarc-published dmarc-published-${published.state}">
            Cloudflare: ${PUBLISHED[published.state]} (${published.content},
            ${when(iso(published.publishedAt))})${published.detail ? html`: <span class="muted">${published.detail}</span>` : ''}
          </p>`
        : ''
    }
    ${
      v
        ? html`<p class="dmarc-verdict">
            Gate ${v.holds ? html`<strong>holds</strong>` : 'does not hold'} (checked ${when(iso(ramp.verdict_at))}; ${v.days} days of
            reports at this step${v.oursRate === null ? '' : `, this service ${+(v.oursRate * 100).toFixed(2)}% aligned`}).
            ${v.reasons.map((r) => html`<br /><span class="muted">${r}</span>`)}
          </p>`
        : html`<p class="muted">The gate has not been checked at this step yet.</p>`
    }
    ${v?.fallen ? html`<p class="dmarc-fallen"><strong>Alignment fell:</strong> this service's recent mail is below the gate. Step back to p=${back}.</p>` : ''}
    ${ramp.refusal ? html`<p class="dmarc-refusal">Advance refused ${when(iso(ramp.refusal_at))}${ramp.refusal.by ? ` (asked by ${ramp.refusal.by})` : ''}: ${ramp.refusal.reasons.join(' ')}</p>` : ''}
    ${ramp.requested ? html`<p class="muted">Pending: ${ramp.requested}, asked by ${ramp.requested_by} ${when(iso(ramp.requested_at))}.</p>` : ''}
    ${
      running && next && v?.holds
        ? form(
            'advance',
            `Advance to p=${next}`,
            `Publishes ${d.return_path ? dmarcRecordValue(next, d.return_path) : ''}; decided again when applied.`,
          )
        : ''
    }
    ${running && back ? form('back', `Step back to p=${back}`, 'Receivers relax at once.') : ''}
    ${running ? form('stop', 'Stop the ramp', 'The record stays at its current step.') : ''}
    ${running ? '' : form('start', 'Start the ramp again', `It resumes at p=${ramp.step}.`)}
    ${running ? html`<p class="muted">The gate is checked again every ${DMARC_CHECK_INTERVAL_MS / 3_600_000} h.</p>` : ''}
  </section>`;
}

const PUBLISHED: Record<Publication['state'], string> = {
  pending: 'written, not yet answered by DNS',
  verified: 'published, DNS answers it',
  conflict: 'not written, a record the service did not create holds _dmarc',
  failed: 'not published',
};

const REFUSALS: Record<DmarcRampRefused['reason'], string> = {
  no_return_path: 'This domain has no return-path host to receive DMARC reports at.',
  running: 'This domain has a DMARC ramp running already.',
  not_running: 'This domain has no running DMARC ramp.',
};

/** Start, advance, back and stop; each audited with the operator, the moves applied by the DmarcRamp run. */
export function dmarcRampRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  const domainOf = (ctx: ConsoleContext) => domainOfPath(deps, ctx);
  const refused = (ctx: ConsoleContext, domainId: string, reason: DmarcRampRefused['reason']) =>
    domainConflict(ctx, 'DMARC ramp', domainId, REFUSALS[reason]);

  router.post('/console/o/:org/domains/:id/dmarc-ramp/start', async (ctx) => {
    const domain = await domainOf(ctx);
    if (!domain) return refusal(ctx, 404, 'No such domain.');
    // Each start its own run: a ramp stopped and started again does not collide with its old run.
    const id = dmarcRampWorkflowId(domain.id, uuidv7());
    const by = `console:${session(ctx).operator.email}`;
    try {
      await startDmarcRamp(deps.orm, domain, id, by);
    } catch (err) {
      if (err instanceof DmarcRampRefused) return refused(ctx, domain.id, err.reason);
      throw err;
    }
    try {
      await deps.engine.start(
        dmarcRamp,
        id,
        { domainId: domain.id, checkIntervalMs: DMARC_CHECK_INTERVAL_MS, runId: id, startedBy: by },
        {
          labels: { organizations: [domain.organizationId] },
        },
      );
    } catch (err) {
      // No run to apply requests: the page must say so rather than take requests nobody applies.
      deps.log.error({ err, domainId: domain.id }, 'DmarcRamp could not start; the ramp is marked stopped');
      await markDmarcRampStopped(deps.orm, domain.id).catch(() => undefined);
      throw err;
    }
    seeOther(ctx, `/console/o/${domain.organizationId}/domains/${domain.id}?done=dmarc_ramp_started#dmarc-ramp`);
  });

  for (const request of ['advance', 'back', 'stop'] as DmarcRampRequest[]) {
    router.post(`/console/o/:org/domains/:id/dmarc-ramp/${request}`, async (ctx) => {
      const domain = await domainOf(ctx);
      if (!domain) return refusal(ctx, 404, 'No such domain.');
      try {
        await requestDmarcStep(deps.orm, domain, request, `console:${session(ctx).operator.email}`);
      } catch (err) {
        if (err instanceof DmarcRampRefused) return refused(ctx, domain.id, err.reason);
        throw err;
      }
      // Recorded already: a lost signal only delays it to the run's next daily check.
      // Each request its own occurrence: the embedded engine delivers a repeated key once.
      const runId = (await readRamp(deps.orm, domain.id))?.run_id;
      if (runId) await deps.engine.signal(runId, DMARC_REQUEST_SIGNAL, uuidv7()).catch(() => undefined);
      seeOther(ctx, `/console/o/${domain.organizationId}/domains/${domain.id}?done=dmarc_step_requested#dmarc-ramp`);
    });
  }

  return router;
}
