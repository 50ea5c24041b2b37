import { html, type Html } from '../html';
import { csrfField, refusal, renderPage, when, seeOther } from '../layout';
import { consoleRouter, field, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';

/** A key as GET /keys shows it (api/keys/present.ts). */
interface KeyView {
  id: string;
  name: string;
  permission: string;
  mode: string;
  token_prefix: string | null;
  domain_ids: string[] | null;
  rate_limit: number;
  created_at: string;
  rotated_at: string | null;
  last_used_at: string | null;
  previous_token_expires_at: string | null;
  previous_tokens: { token_prefix: string; expires_at: string }[];
  revoked_at: string | null;
}

interface DomainRef {
  id: string;
  name: string;
}

/** What the create form held, to show it again after a refusal. */
interface CreateForm {
  name: string;
  permission: string;
  mode: string;
  domainIds: string[];
  rateLimit: string;
}

const EMPTY_FORM: CreateForm = { name: '', permission: 'send', mode: 'live', domainIds: [], rateLimit: '' };

/** Old tokens still in their 24 hours of grace after a rotation, each with its own expiry. */
const grace = (k: KeyView): Html =>
  k.previous_tokens.length
    ? html`<ul class="muted">
        ${k.previous_tokens.map((t) => html`<li>previous <code>${t.token_prefix}</code> valid until ${when(t.expires_at)}</li>`)}
      </ul>`
    : html``;

/** A new token, shown this once with a copy button (it is stored as a hash only). */
const secret = (token: string) =>
  html`<p class="secret">
      <code id="new-token">${token}</code> <button type="button" class="secondary" data-copy="new-token">Copy</button>
    </p>
    <p>Copy the token now: it is not shown again. A lost token needs a rotation or a new key.</p>`;

/**
 * Keys: the API's GET /keys, POST /keys (any tier: the console's authority may mint ADMIN keys),
 * POST /keys/:id/rotate (any tier, the old token keeps 24 hours) and DELETE /keys/:id (revoke).
 * "Last used" is the API's `last_used_at`: the second of the key's last request.
 */
export function keyRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  async function domainsOf(ctx: ConsoleContext): Promise<DomainRef[]> {
    const res = await deps.api.call(orgAuth(ctx), 'GET', '/domains');
    return res.ok ? (res.body.data as DomainRef[]).map((d) => ({ id: d.id, name: d.name })) : [];
  }

  async function list(ctx: ConsoleContext, opts: { status?: number; error?: string; form?: CreateForm } = {}) {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/keys`;
    const [res, domains] = await Promise.all([deps.api.call(a, 'GET', '/keys'), domainsOf(ctx)]);
    const names = new Map(domains.map((d) => [d.id, d.name]));
    const keys = res.ok ? (res.body.data as KeyView[]) : [];
    const f = opts.form ?? EMPTY_FORM;
    const row = (k: KeyView) =>
      html`<tr>
        <td>${k.name}</td>
        <td><code>${k.token_prefix ?? '—'}</code>${grace(k)}</td>
        <td>${k.permission}</td>
        <td>${k.mode}</td>
        <td>
          ${k.domain_ids ? k.domain_ids.map((d, i) => html`${i ? ', ' : ''}${names.get(d) ?? d}`) : html`<span class="muted">all</span>`}
        </td>
        <td class="num">${k.rate_limit}/s</td>
        <td>${when(k.created_at)}</td>
        <td>${when(k.rotated_at)}</td>
        <td>${when(k.last_used_at)}</td>
        <td>${k.revoked_at ? html`<span class="bad">revoked</span> ${when(k.revoked_at)}` : html`<span class="good">active</span>`}</td>
        <td>
          ${
            k.revoked_at
              ? ''
              : html`<form
                    method="post"
                    action="${base}/${k.id}/rotate"
                    class="inline"
                    data-confirm="Rotate ${k.name}? The current token keeps working for 24 hours."
                  >
                    ${csrfField(ctx)}<button type="submit" class="secondary" aria-label="Rotate ${k.name}">Rotate</button>
                  </form>
                  <form
                    method="post"
                    action="${base}/${k.id}/revoke"
                    class="inline"
                    data-confirm="Revoke ${k.name}? Its tokens stop working at once."
                  >
                    ${csrfField(ctx)}<button type="submit" class="danger" aria-label="Revoke ${k.name}">Revoke</button>
                  </form>`
          }
        </td>
      </tr>`;
    renderPage(ctx, {
      title: 'Keys',
      current: 'keys',
      status: opts.status ?? (res.ok ? 200 : res.status),
      error: opts.error ?? res.error?.message,
      body: html`<h1>API keys</h1>
        <table>
          <caption class="muted">
            Newest first; a rotated key's previous token works until its expiry
          </caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Token prefix</th>
              <th scope="col">Permission</th>
              <th scope="col">Mode</th>
              <th scope="col">Domains</th>
              <th scope="col" class="num">Rate limit</th>
              <th scope="col">Created</th>
              <th scope="col">Rotated</th>
              <th scope="col">Last used</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            ${keys.map(row)}
          </tbody>
        </table>
        ${res.ok && keys.length === 0 ? html`<p class="muted">No keys yet.</p>` : ''}
        <h2>Create a key</h2>
        <form method="post" action="${base}" class="stack">
          ${csrfField(ctx)}
          <label>Name <input name="name" value="${f.name}" maxlength="128" required /></label>
          <label
            >Permission
            <select name="permission">
              ${['send', 'full', 'admin'].map((p) => html`<option value="${p}" ${f.permission === p ? html`selected` : ''}>${p}</option>`)}
            </select></label
          >
          <label
            >Mode
            <select name="mode">
              ${['live', 'test'].map((m) => html`<option value="${m}" ${f.mode === m ? html`selected` : ''}>${m}</option>`)}
            </select></label
          >
          <fieldset>
            <legend>Domains (none checked: every domain)</legend>
            ${domains.length ? '' : html`<p class="muted">This organization has no domains.</p>`}
            ${domains.map(
              (d) =>
                html`<label class="check"
                  ><input type="checkbox" name="domain_ids" value="${d.id}" ${f.domainIds.includes(d.id) ? html`checked` : ''} />
                  ${d.name}</label
                >`,
            )}
          </fieldset>
          <label
            >Rate limit per second (optional, 1 to 1000; default 10)
            <input type="number" name="rate_limit" min="1" max="1000" value="${f.rateLimit}"
          /></label>
          <button type="submit">Create key</button>
        </form>`,
    });
  }

  router.get('/console/o/:org/keys', (ctx) => list(ctx));

  router.post('/console/o/:org/keys', async (ctx) => {
    const a = orgAuth(ctx);
    const form: CreateForm = {
      name: field(ctx, 'name'),
      permission: field(ctx, 'permission'),
      mode: field(ctx, 'mode'),
      domainIds: ctx.state.form!.getAll('domain_ids').filter(Boolean),
      rateLimit: field(ctx, 'rate_limit'),
    };
    // A number when it reads as one; otherwise the text as typed, for the API to refuse in its words.
    const rate = form.rateLimit === '' ? undefined : /^-?\d+(\.\d+)?$/.test(form.rateLimit) ? Number(form.rateLimit) : form.rateLimit;
    const res = await deps.api.call(a, 'POST', '/keys', {
      body: {
        name: form.name,
        permission: form.permission,
        mode: form.mode,
        ...(form.domainIds.length ? { domain_ids: form.domainIds } : {}),
        ...(rate !== undefined ? { rate_limit: rate } : {}),
      },
    });
    if (!res.ok) return list(ctx, { status: res.status, error: res.error?.message ?? 'The key could not be created.', form });
    const k = res.body as KeyView & { token: string };
    const names = new Map((await domainsOf(ctx)).map((d) => [d.id, d.name]));
    renderPage(ctx, {
      title: 'Key created',
      current: 'keys',
      status: 201,
      body: html`<h1>Key created: ${k.name}</h1>
        <dl class="facts">
          <dt>Permission</dt>
          <dd>${k.permission}</dd>
          <dt>Mode</dt>
          <dd>${k.mode}</dd>
          <dt>Rate limit</dt>
          <dd>${k.rate_limit}/s</dd>
          <dt>Domains</dt>
          <dd>${k.domain_ids ? k.domain_ids.map((d) => names.get(d) ?? d).join(', ') : 'all'}</dd>
        </dl>
        ${secret(k.token)}
        <p><a href="/console/o/${a.organization.id}/keys">Back to keys</a></p>`,
    });
  });

  router.post('/console/o/:org/keys/:id/rotate', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'POST', `/keys/${encodeURIComponent(ctx.params.id)}/rotate`);
    if (res.status === 404) return refusal(ctx, 404, 'No such key.');
    if (!res.ok) return list(ctx, { status: res.status, error: res.error?.message ?? 'The key could not be rotated.' });
    const k = res.body as KeyView & { token: string };
    renderPage(ctx, {
      title: 'Key rotated',
      current: 'keys',
      body: html`<h1>Key rotated: ${k.name}</h1>
        <p>The new token (prefix <code>${k.token_prefix}</code>) works now.</p>
        ${secret(k.token)}
        <h2>Previous tokens</h2>
        <p>Each token rotated out keeps working for 24 hours, until:</p>
        <ul>
          ${k.previous_tokens.map((t) => html`<li><code>${t.token_prefix}</code> valid until ${when(t.expires_at)}</li>`)}
        </ul>
        <p><a href="/console/o/${a.organization.id}/keys">Back to keys</a></p>`,
    });
  });

  router.post('/console/o/:org/keys/:id/revoke', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'DELETE', `/keys/${encodeURIComponent(ctx.params.id)}`);
    if (res.status === 404) return refusal(ctx, 404, 'No such key.');
    if (!res.ok) return list(ctx, { status: res.status, error: res.error?.message ?? 'The key could not be revoked.' });
    seeOther(ctx, `/console/o/${a.organization.id}/keys?done=key_revoked`);
  });

  return router;
}
