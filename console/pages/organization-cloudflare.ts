import type Router from '@koa/router';
import { attachToken, ConnectionRefused, detachToken, markInternal } from '../../core/dns-publish/connection';
import { isInternal, readConnection } from '../../db/sql/cloudflare';
import type { Organization } from '../../db/entities';
import { html, type Html } from '../html';
import { csrfField, refusal, renderPage, seeOther, when } from '../layout';
import { field, session, type ConsoleContext, type ConsoleDeps, type ConsoleState } from '../state';

type Find = (ctx: ConsoleContext) => Promise<Pick<Organization, 'id'> | null>;

/**
 * An organization's "internal" flag and its Cloudflare token, on its page (platform operators only,
 * as the page is). The token is taken once, checked with Cloudflare, stored sealed and never shown
 * again: the page names it by Cloudflare's id.
 */
export async function cloudflareOrgSection(ctx: ConsoleContext, deps: ConsoleDeps, organizationId: string): Promise<Html> {
  const [internal, connection] = await Promise.all([isInternal(deps.orm, organizationId), readConnection(deps.orm, organizationId)]);
  const base = `/console/organizations/${organizationId}`;
  return html`<h2>Internal organization and DNS publishing</h2>
    <form method="post" action="${base}/internal" class="stack">
      ${csrfField(ctx)}
      <label for="internal">Internal (the service's own: may publish its domains' DNS records to Cloudflare)</label>
      <select name="internal" id="internal">
        <option value="no" ${internal ? '' : html`selected`}>no</option>
        <option value="yes" ${internal ? html`selected` : ''}>yes</option>
      </select>
      <button type="submit">Set internal</button>
    </form>
    ${
      connection
        ? html`<p>
              Cloudflare token <code>${connection.tokenId}</code> attached
              ${when(connection.attachedAt.toISOString())}${connection.attachedBy ? ` by ${connection.attachedBy}` : ''}.
            </p>
            <form method="post" action="${base}/cloudflare/detach">${csrfField(ctx)}<button type="submit">Detach the token</button></form>`
        : html`<p class="muted">No Cloudflare token attached.</p>`
    }
    ${
      internal
        ? html`<form method="post" action="${base}/cloudflare" class="stack" autocomplete="off">
            ${csrfField(ctx)}
            <label
              >Cloudflare API token (Zone Read and DNS Edit on the domains' zones; stored sealed, never shown again)
              <input name="token" type="password" autocomplete="off" required maxlength="200"
            /></label>
            <button type="submit">${connection ? 'Replace the token' : 'Attach the token'}</button>
          </form>`
        : html`<p class="muted">Only an internal organization may attach a Cloudflare token.</p>`
    }`;
}

/** A refused change, on a page of its own: the organization's page would refill its other form from this post. */
function problem(ctx: ConsoleContext, organizationId: string, status: number, message: string): void {
  renderPage(ctx, {
    title: 'Not changed',
    status,
    error: message,
    body: html`<h1>Nothing was changed</h1>
      <p><a href="/console/organizations/${organizationId}">Back to the organization</a></p>`,
  });
}

export function cloudflareOrgRoutes(router: Router<ConsoleState>, deps: ConsoleDeps, find: Find): void {
  const actor = (ctx: ConsoleContext) => `console:${session(ctx).operator.email}`;

  router.post('/console/organizations/:id/internal', async (ctx) => {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    const choice = field(ctx, 'internal');
    if (choice !== 'yes' && choice !== 'no') return problem(ctx, org.id, 422, 'Internal is yes or no.');
    if (!(await markInternal(deps.orm, org.id, choice === 'yes', actor(ctx)))) return refusal(ctx, 404, 'No such organization.');
    seeOther(ctx, `/console/organizations/${org.id}?done=internal_set`);
  });

  router.post('/console/organizations/:id/cloudflare', async (ctx) => {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    if (!deps.dnsPublish) return problem(ctx, org.id, 409, 'DNS publishing is not configured in this process.');
    // Never echoed back into the form, nor into any page or log.
    const token = field(ctx, 'token');
    try {
      await attachToken({ orm: deps.orm, secrets: deps.secrets, cloudflare: deps.dnsPublish.cloudflare }, org.id, token, actor(ctx));
    } catch (err) {
      if (err instanceof ConnectionRefused) return problem(ctx, org.id, 422, err.message);
      throw err;
    }
    seeOther(ctx, `/console/organizations/${org.id}?done=cloudflare_attached`);
  });

  router.post('/console/organizations/:id/cloudflare/detach', async (ctx) => {
    const org = await find(ctx);
    if (!org) return refusal(ctx, 404, 'No such organization.');
    if (!(await detachToken(deps.orm, org.id, actor(ctx)))) return problem(ctx, org.id, 409, 'No Cloudflare token is attached.');
    seeOther(ctx, `/console/organizations/${org.id}?done=cloudflare_detached`);
  });
}
