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
  revokedRecordValue,
  startDkimRotation,
  type DkimRotationTiming,
} from '../../core/domains/dkim-keys';
import type { DkimKeyRow } from '../../db/sql/dkim-keys';
import { isInternal, readConnection } from '../../db/sql/cloudflare';
import { dkimRotation, dkimRotationWorkflowId, DKIM_CANCEL_SIGNAL } from '../../workflows/dkim-rotation';

const iso = (d: Date | string | null) => (d ? new Date(d).toISOString() : null);
const minutes = (ms: number) => (ms >= 3_600_000 ? `${+(ms / 3_600_000).toFixed(1)} h` : `${+(ms / 60_000).toFixed(1)} min`);

/**
 * What happens next to a key, and when: the page's answer to "what now?". `published`: the
 * organization is internal with a Cloudflare token, and the rotation publishes its records itself.
 */
function nextStep(k: DkimKeyRow, t: DkimRotationTiming, domain: string, published: boolean): Html {
  const name = dkimRecordName(k.selector, domain);
  // An Ed25519 key signed alongside the RSA key (RFC 8463) moves with it.
  const ed = k.algorithm === 'ed25519';
  switch (k.state) {
    case 'pending':
      return html`${
        published
          ? html`The rotation publishes the TXT record at <span class="mono">${name}</span> to Cloudflare.`
          : html`Publish the TXT record at <span class="mono">${name}</span>.`
      }
      ${ed ? 'It switches with the rotation’s RSA key, once both records resolve: after' : 'Signing switches to this key after'}
      ${t.requiredChecks} consecutive matching checks spread over at least ${minutes(t.minSpreadMs)} and the record's TTL (a check every
      ${minutes(t.checkIntervalMs)}; ${k.matching_checks} so far, last ${when(iso(k.last_checked_at))}). Until then mail is signed with the
      active key.`;
    case 'active':
      return ed
        ? html`Signs all mail from this domain alongside the RSA key (a second signature, ed25519-sha256, RFC 8463).`
        : html`Signs all mail from this domain.`;
    case 'retiring':
      return html`No longer signs; keep its record published so mail signed before the switch still verifies. Revoked
      ${when(iso(k.revoke_after))}.`;
    case 'revoked':
      return html`Private key deleted. ${published ? 'The rotation publishes' : 'Publish'}
        <span class="mono">${revokedRecordValue(k.algorithm)}</span> at <span class="mono">${name}</span> (an empty key: RFC 6376 §3.6.1);
        this selector is never used again.`;
  }
}

/** The DKIM keys of the domain page: states, the records to publish, the rotation's next step, start and cancel. */
export async function dkimSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, _platform: boolean): Promise<Html> {
  const organizationId = orgAuth(ctx).organization.id;
  const [keys, internal, connection] = await Promise.all([
    domainDkimKeys(deps.orm, d.id),
    isInternal(deps.orm, organizationId),
    readConnection(deps.orm, organizationId),
  ]);
  const published = internal && connection !== null;
  const t = dkimRotationTiming(deps.dkimRotation);
  const base = `/console/o/${organizationId}/domains/${d.id}/dkim`;
  const inProgress = keys.some((k) => k.state === 'pending' || k.state === 'retiring');
  // The rotation's RSA key: its workflow runs on it, and canceling it cancels its Ed25519 companion too.
  const pending = keys.find((k) => k.state === 'pending' && k.companion_of === null);
  const signs = keys.some((k) => k.state === 'active') || d.dkim_selector !== null;
  const edActive = keys.some((k) => k.state === 'active' && k.algorithm === 'ed25519');
  return html`<section id="dkim">
    <h2>DKIM keys</h2>
    ${
      keys.length
        ? listTable({
            caption: 'Each key signs under its own selector; selectors are never reused',
            columns: ['Selector', 'Algorithm', 'State', 'Record to publish', 'Since', 'Next'],
            rows: keys.map(
              (k) =>
                html`<tr class="dkim-${k.state}">
                  <td class="mono">${k.selector}</td>
                  <td>${k.algorithm === 'ed25519' ? 'Ed25519' : 'RSA-2048'}</td>
                  <td>${k.state}</td>
                  <td class="mono">
                    ${dkimRecordName(k.selector, d.name)} TXT
                    ${k.state === 'revoked' ? revokedRecordValue(k.algorithm) : dkimRecordValue(k.public_key, k.algorithm)}
                  </td>
                  <td>${when(iso(k.revoked_at ?? k.retiring_at ?? k.activated_at ?? k.created_at))}</td>
                  <td>${nextStep(k, t, d.name, published)}</td>
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
            <label class="check"
              ><input type="checkbox" name="ed25519" value="1" ${edActive ? html`checked` : ''} /> Also sign with Ed25519 (RFC 8463)</label
            >
            <button type="submit">Rotate the DKIM key</button>
            <span class="muted"
              >A new RSA-2048 key under a new selector, and with Ed25519 a second key under its own selector, signing alongside it (the RSA
              signature is kept for verifiers without Ed25519); the old keys retire ${minutes(t.retiringMs)} after the switch. Rotating
              without it ends Ed25519 signing.</span
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
      started = await startDkimRotation(deps.orm, deps.secrets, domain, `console:${session(ctx).operator.email}`, undefined, {
        ed25519: field(ctx, 'ed25519') === '1',
      });
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
