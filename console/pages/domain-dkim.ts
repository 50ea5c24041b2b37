import { html, type Html } from '../html';
import { csrfField, listTable, refusal, seeOther, when } from '../layout';
import { consoleRouter, field, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import { domainConflict, domainOfPath, type DomainView } from './domains-detail';
import {
  cancelDkimRotation,
  dkimRecordName,
  dkimRecordValue,
  dkimRotationTiming,
  domainDkimKeys,
  DkimRotationRefused,
  REVOKED_RECORD_VALUE,
  startDkimRotation,
  type DkimRotationTiming,
} from '../../core/domains/dkim-keys';
import type { DkimKeyRow } from '../../db/sql/dkim-keys';
import { dkimRotation, dkimRotationWorkflowId, DKIM_CANCEL_SIGNAL } from '../../workflows/dkim-rotation';

const iso = (d: Date | string | null) => (d ? new Date(d).toISOString() : null);
const minutes = (ms: number) => (ms >= 3_600_000 ? `${+(ms / 3_600_000).toFixed(1)} h` : `${+(ms / 60_000).toFixed(1)} min`);

/** What happens next to a key, and when: the page's answer to "what now?". */
function nextStep(k: DkimKeyRow, t: DkimRotationTiming, domain: string): Html {
  const name = dkimRecordName(k.selector, domain);
  switch (k.state) {
    case 'pending':
      return html`Publish the TXT record at <span class="mono">${name}</span>. Signing switches to this key after ${t.requiredChecks}
        consecutive matching checks spread over at least ${minutes(t.minSpreadMs)} (a check every ${minutes(t.checkIntervalMs)};
        ${k.matching_checks} so far, last ${when(iso(k.last_checked_at))}). Until then mail is signed with the active key.`;
    case 'active':
      return html`Signs all mail from this domain.`;
    case 'retiring':
      return html`No longer signs; keep its record published so mail signed before the switch still verifies. Revoked
      ${when(iso(k.revoke_after))}.`;
    case 'revoked':
      return html`Private key deleted. Publish <span class="mono">${REVOKED_RECORD_VALUE}</span> at <span class="mono">${name}</span> (an
        empty key: RFC 6376 §3.6.1); this selector is never used again.`;
  }
}

/** The DKIM keys of the domain page: states, the records to publish, the rotation's next step, start and cancel. */
export async function dkimSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, _platform: boolean): Promise<Html> {
  const keys = await domainDkimKeys(deps.orm, d.id);
  const t = dkimRotationTiming(deps.dkimRotation);
  const base = `/console/o/${orgAuth(ctx).organization.id}/domains/${d.id}/dkim`;
  const inProgress = keys.some((k) => k.state === 'pending' || k.state === 'retiring');
  const pending = keys.find((k) => k.state === 'pending');
  const signs = keys.some((k) => k.state === 'active') || d.dkim_selector !== null;
  return html`<section id="dkim">
    <h2>DKIM keys</h2>
    ${
      keys.length
        ? listTable({
            caption: 'Each key signs under its own selector; selectors are never reused',
            columns: ['Selector', 'State', 'Record to publish', 'Since', 'Next'],
            rows: keys.map(
              (k) =>
                html`<tr class="dkim-${k.state}">
                  <td class="mono">${k.selector}</td>
                  <td>${k.state}</td>
                  <td class="mono">
                    ${dkimRecordName(k.selector, d.name)} TXT
                    ${k.state === 'revoked' ? REVOKED_RECORD_VALUE : dkimRecordValue(k.public_key)}
                  </td>
                  <td>${when(iso(k.revoked_at ?? k.retiring_at ?? k.activated_at ?? k.created_at))}</td>
                  <td>${nextStep(k, t, d.name)}</td>
                </tr>`,
            ),
          })
        : html`<p class="muted">
            ${d.dkim_selector ? `Signs with selector ${d.dkim_selector}; no rotation yet.` : 'This domain has no DKIM key: it sends unsigned.'}
          </p>`
    }
    ${
      pending
        ? html`<form method="post" action="${base}/cancel">
            ${csrfField(ctx)}<input type="hidden" name="key_id" value="${pending.id}" />
            <button type="submit">Cancel the rotation</button>
            <span class="muted">Before the switch only; signing stays with the active key.</span>
          </form>`
        : ''
    }
    ${
      signs && !inProgress
        ? html`<form method="post" action="${base}/rotate">
            ${csrfField(ctx)}
            <button type="submit">Rotate the DKIM key</button>
            <span class="muted"
              >A new RSA-2048 key under a new selector; the old key retires ${minutes(t.retiringMs)} after the switch.</span
            >
          </form>`
        : ''
    }
    ${
      inProgress && !pending
        ? html`<p class="muted">A rotation is in progress until the retiring key is revoked; a new one can start then.</p>`
        : ''
    }
  </section>`;
}

const REFUSALS: Record<DkimRotationRefused['reason'], string> = {
  no_key: 'This domain has no DKIM key to rotate: it sends unsigned.',
  in_progress: 'A DKIM rotation is already in progress for this domain.',
  not_pending: 'That key is no longer pending: the rotation switched or ended already.',
};

/**
 * Rotation and cancel. Platform operators and the organization's own admins both may: rotating
 * changes nothing visible to recipients and the organization owns the DNS it needs published.
 */
export function dkimRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  const domainOf = (ctx: ConsoleContext) => domainOfPath(deps, ctx);
  const refused = (ctx: ConsoleContext, domainId: string, reason: DkimRotationRefused['reason']) =>
    domainConflict(ctx, 'DKIM rotation', domainId, REFUSALS[reason]);

  router.post('/console/o/:org/domains/:id/dkim/rotate', async (ctx) => {
    const domain = await domainOf(ctx);
    if (!domain) return refusal(ctx, 404, 'No such domain.');
    let started: { keyId: string };
    try {
      started = await startDkimRotation(deps.orm, deps.secrets, domain, `console:${session(ctx).operator.email}`);
    } catch (err) {
      if (err instanceof DkimRotationRefused) return refused(ctx, domain.id, err.reason);
      throw err;
    }
    const input = { domainId: domain.id, keyId: started.keyId, ...dkimRotationTiming(deps.dkimRotation) };
    try {
      await deps.engine.start(dkimRotation, dkimRotationWorkflowId(domain.id, started.keyId), input, {
        labels: { organizations: [domain.organizationId] },
      });
    } catch (err) {
      // No run to switch it: the pending key must not wait forever for one.
      deps.log.error({ err, domainId: domain.id, keyId: started.keyId }, 'DkimRotation could not start; the new key is canceled');
      await cancelDkimRotation(deps.orm, domain, started.keyId, `console:${session(ctx).operator.email}`).catch(() => undefined);
      throw err;
    }
    seeOther(ctx, `/console/o/${domain.organizationId}/domains/${domain.id}?done=dkim_rotation_started#dkim`);
  });

  router.post('/console/o/:org/domains/:id/dkim/cancel', async (ctx) => {
    const domain = await domainOf(ctx);
    if (!domain) return refusal(ctx, 404, 'No such domain.');
    const keyId = field(ctx, 'key_id');
    try {
      await cancelDkimRotation(deps.orm, domain, keyId, `console:${session(ctx).operator.email}`);
    } catch (err) {
      if (err instanceof DkimRotationRefused) return refused(ctx, domain.id, err.reason);
      throw err;
    }
    // The database decided; the signal only ends the run's wait early.
    await deps.engine.signal(dkimRotationWorkflowId(domain.id, keyId), DKIM_CANCEL_SIGNAL).catch(() => undefined);
    seeOther(ctx, `/console/o/${domain.organizationId}/domains/${domain.id}?done=dkim_rotation_canceled#dkim`);
  });

  return router;
}
