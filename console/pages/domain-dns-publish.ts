import { checkPublications, publishDomain, PublishRefused, type PublishDeps } from '../../core/dns-publish/publish';
import { isInternal, listPublications, readConnection, type Publication } from '../../db/sql/cloudflare';
import { html, type Html } from '../html';
import { csrfField, refusal, renderPage, seeOther, when } from '../layout';
import { consoleRouter, orgAuth, session, type ConsoleContext, type ConsoleDeps } from '../state';
import type { DomainView } from './domains-detail';

const STATE: Record<Publication['state'], [string, string]> = {
  pending: ['written; pending until DNS answers it', 'muted'],
  verified: ['published; DNS answers it', 'good'],
  conflict: ['not touched: conflict', 'bad'],
  failed: ['not published', 'bad'],
};

/**
 * Publishing the domain's records to Cloudflare (issue 41), for internal organizations with a
 * token (core/dns-publish). The section shows what the last publish did for each record and
 * whether DNS answers it yet; a platform operator publishes, or looks the records up again.
 */
export async function dnsPublishSection(ctx: ConsoleContext, deps: ConsoleDeps, d: DomainView, platform: boolean): Promise<Html> {
  const organizationId = orgAuth(ctx).organization.id;
  const [internal, connection, published] = await Promise.all([
    isInternal(deps.orm, organizationId),
    readConnection(deps.orm, organizationId),
    listPublications(deps.orm, d.id),
  ]);
  if (!internal) {
    return platform
      ? html`<h2>Publishing DNS records</h2>
          <p class="muted">Only an internal organization publishes to Cloudflare (its organization page marks it).</p>`
      : html``;
  }
  const base = `/console/o/${organizationId}/domains/${d.id}/dns-publish`;
  const unpublished = d.records.filter((r) => !published.some((p) => p.purpose === r.purpose && p.name === r.name.toLowerCase()));
  return html`<h2>Publishing DNS records</h2>
    ${
      connection
        ? html`<p>Cloudflare token <code>${connection.tokenId}</code> attached.</p>`
        : html`<p class="muted">No Cloudflare token attached: a platform operator attaches one on the organization's page.</p>`
    }
    ${
      published.length
        ? html`<table>
            <caption class="muted">
              What the last publish did with each record
            </caption>
            <thead>
              <tr>
                <th scope="col">Purpose</th>
                <th scope="col">Type</th>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Why</th>
                <th scope="col">Published</th>
              </tr>
            </thead>
            <tbody>
              ${published.map((p) => {
                const [word, cls] = STATE[p.state];
                return html`<tr class="publication-${p.state}">
                  <td>${p.purpose}</td>
                  <td>${p.type}</td>
                  <td class="mono">${p.name}</td>
                  <td><span class="${cls}">${word}</span></td>
                  <td>${p.detail ?? ''}</td>
                  <td>${when(p.publishedAt.toISOString())}${p.publishedBy ? ` by ${p.publishedBy}` : ''}</td>
                </tr>`;
              })}
            </tbody>
          </table>`
        : html`<p class="muted">Nothing published yet.</p>`
    }
    ${unpublished.length && published.length ? html`<p>${unpublished.length} of the domain's records were not published yet.</p>` : ''}
    ${
      platform && connection
        ? html`<form method="post" action="${base}" class="stack">
              ${csrfField(ctx)}
              <p class="muted">
                Creates what is missing and updates what the service wrote before (comment "managed by svc"); a record it did not write is
                left alone and shown as a conflict.
              </p>
              <button type="submit">Publish records to Cloudflare</button>
            </form>
            ${
              published.some((p) => p.state === 'pending')
                ? html`<form method="post" action="${base}/check">
                    ${csrfField(ctx)}<button type="submit">Look up the pending records again</button>
                  </form>`
                : ''
            }`
        : platform
          ? ''
          : html`<p class="muted">Only a platform operator publishes records.</p>`
    }`;
}

export function dnsPublishRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  /** The domain of the path, this organization's (the API's read decides); null after a refusal. */
  async function domainOf(ctx: ConsoleContext): Promise<{ id: string; deps: PublishDeps } | null> {
    if (session(ctx).operator.role !== 'platform') {
      refusal(ctx, 403, 'Only a platform operator publishes DNS records.');
      return null;
    }
    const found = await deps.api.call(orgAuth(ctx), 'GET', `/domains/${encodeURIComponent(ctx.params.id)}`);
    if (!found.ok) {
      refusal(ctx, 404, 'No such domain.');
      return null;
    }
    if (!deps.dnsPublish) {
      refusal(ctx, 404, 'DNS publishing is not configured in this process.');
      return null;
    }
    return { id: found.body.id, deps: { orm: deps.orm, secrets: deps.secrets, ...deps.dnsPublish } };
  }

  // After a change DNS answers, the domain's own check runs too, so its records table agrees.
  const verify = (ctx: ConsoleContext, id: string) => deps.api.call(orgAuth(ctx), 'POST', `/domains/${id}/verify`);

  router.post('/console/o/:org/domains/:id/dns-publish', async (ctx) => {
    const domain = await domainOf(ctx);
    if (!domain) return;
    const a = orgAuth(ctx);
    const actor = `console:${session(ctx).operator.email}`;
    try {
      const out = await publishDomain(domain.deps, a.organization.id, domain.id, actor);
      // A publish that got the domain verified made its MTA-STS hosting then (core/domains/verification.ts): those records go out too.
      const checked = ((await verify(ctx, domain.id)).body?.records ?? []) as { purpose: string }[];
      const added = [...new Set(checked.map((r) => r.purpose).filter((p) => !out.some((o) => o.purpose === p)))];
      if (added.length) {
        await publishDomain(domain.deps, a.organization.id, domain.id, actor, { only: added });
        await verify(ctx, domain.id);
      }
    } catch (err) {
      if (!(err instanceof PublishRefused)) throw err;
      return renderPage(ctx, {
        title: 'Not published',
        current: 'domains',
        status: 409,
        error: err.message,
        body: html`<h1>Nothing was published</h1>
          <p><a href="/console/o/${a.organization.id}/domains/${domain.id}">Back to the domain</a></p>`,
      });
    }
    seeOther(ctx, `/console/o/${a.organization.id}/domains/${domain.id}?done=dns_published`);
  });

  router.post('/console/o/:org/domains/:id/dns-publish/check', async (ctx) => {
    const domain = await domainOf(ctx);
    if (!domain) return;
    await checkPublications(domain.deps, domain.id);
    await verify(ctx, domain.id);
    seeOther(ctx, `/console/o/${orgAuth(ctx).organization.id}/domains/${domain.id}?done=dns_checked`);
  });

  return router;
}
