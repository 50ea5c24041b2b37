import type Router from '@koa/router';
import { html, type Html } from '../html';
import { csrfField, pager, refusal, renderPage, when, seeOther } from '../layout';
import { field, orgAuth, type ConsoleContext, type ConsoleDeps, type ConsoleState } from '../state';

/** GET /contacts's filters, as the search form names them. */
const FILTERS = ['email', 'status', 'topic', 'state', 'segment_id'] as const;
const STATUSES = ['subscribed', 'unsubscribed', 'bounced'];
const STATES = ['subscribed', 'unsubscribed'];

interface Subscription {
  topic: string;
  state: string;
  explicit: boolean;
  changed_at: string | null;
  source: string | null;
}

const pick = (ctx: ConsoleContext, k: string) => (typeof ctx.query[k] === 'string' ? (ctx.query[k] as string).trim() : undefined);

const options = (values: string[], selected: string | undefined, any = 'any') =>
  html`<option value="">${any}</option>
    ${values.map((v) => html`<option ${selected === v ? html`selected` : ''}>${v}</option>`)}`;

/**
 * The audience page's contacts section: GET /contacts with its filters (email prefix, status,
 * topic and state, segment) and its cursor. A refusal (a topic without a state) is the API's words.
 */
export async function contactSearch(
  ctx: ConsoleContext,
  deps: ConsoleDeps,
  base: string,
  segments: { id: string; name: string }[],
): Promise<{ body: Html; status?: number; error?: string }> {
  const a = orgAuth(ctx);
  const f = Object.fromEntries(FILTERS.map((k) => [k, pick(ctx, k)])) as Record<(typeof FILTERS)[number], string | undefined>;
  const res = await deps.api.call(a, 'GET', '/contacts', { query: { ...f, cursor: pick(ctx, 'cursor') } });
  const choices = [...segments];
  if (f.segment_id && !choices.some((s) => s.id === f.segment_id)) choices.push({ id: f.segment_id, name: f.segment_id });
  const rows = res.ok ? (res.body.data as any[]) : [];
  const body = html`<h2 id="contacts">Contacts</h2>
    <form method="get" action="${base}#contacts" class="filters" role="search" aria-label="Search contacts">
      <label>Email starts with <input type="search" name="email" value="${f.email ?? ''}" /></label>
      <label
        >Status
        <select name="status">
          ${options(STATUSES, f.status)}
        </select></label
      >
      <label>Topic (slug) <input name="topic" value="${f.topic ?? ''}" size="12" /></label>
      <label
        >State in topic
        <select name="state">
          ${options(STATES, f.state)}
        </select></label
      >
      <label
        >Segment
        <select name="segment_id">
          <option value="">any</option>
          ${choices.map((s) => html`<option value="${s.id}" ${f.segment_id === s.id ? html`selected` : ''}>${s.name}</option>`)}
        </select></label
      >
      <button type="submit">Search</button>
    </form>
    ${
      rows.length
        ? html`<table>
            <caption class="muted">
              Newest first
            </caption>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (c) =>
                  html`<tr>
                    <td><a href="${base}/contacts/${c.id}">${c.email}</a></td>
                    <td>${[c.first_name, c.last_name].filter(Boolean).join(' ')}</td>
                    <td>${c.status}</td>
                    <td>${when(c.created_at)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : res.ok
          ? html`<p class="muted">No contacts match.</p>`
          : ''
    }
    ${res.ok ? pager(base, f, res.body.next_cursor) : ''}`;
  return { body, ...(res.ok ? {} : { status: res.status, error: res.error?.message }) };
}

/**
 * A contact (GET /contacts/:id): its fields, its subscription to each topic and a form that
 * changes them (POST /contacts/:id/subscriptions, only the states that changed), and delete
 * (DELETE /contacts/:id, audit-logged by the API).
 */
export function contactPages(router: Router<ConsoleState>, deps: ConsoleDeps): void {
  async function detail(ctx: ConsoleContext, failed?: { status: number; message: string }) {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'GET', `/contacts/${encodeURIComponent(ctx.params.id)}`);
    if (!res.ok) return refusal(ctx, 404, 'No such contact.');
    const c = res.body;
    const base = `/console/o/${a.organization.id}/audience/contacts/${c.id}`;
    const subs = c.subscriptions as Subscription[];
    const props = Object.entries((c.properties ?? {}) as Record<string, unknown>);
    renderPage(ctx, {
      title: `Contact ${c.email}`,
      current: 'audience',
      status: failed?.status,
      error: failed?.message,
      body: html`<p><a href="/console/o/${a.organization.id}/audience#contacts">← Contacts</a></p>
        <h1>${c.email}</h1>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${c.id}</code></dd>
          <dt>Name</dt>
          <dd>${[c.first_name, c.last_name].filter(Boolean).join(' ') || html`<span class="muted">—</span>`}</dd>
          <dt>Status</dt>
          <dd>${c.status}</dd>
          <dt>Created</dt>
          <dd>${when(c.created_at)}</dd>
          <dt>Updated</dt>
          <dd>${when(c.updated_at)}</dd>
        </dl>
        <h2>Properties</h2>
        ${
          props.length
            ? html`<table>
                <tbody>
                  ${props.map(
                    ([k, v]) =>
                      html`<tr>
                        <th scope="row">${k}</th>
                        <td class="mono">${JSON.stringify(v)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : html`<p class="muted">None.</p>`
        }
        <h2>Subscriptions</h2>
        ${
          subs.length
            ? html`<form method="post" action="${base}/subscriptions">
                ${csrfField(ctx)}
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Topic</th>
                      <th scope="col">State</th>
                      <th scope="col">Chosen</th>
                      <th scope="col">Changed</th>
                      <th scope="col">Source</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${subs.map(
                      (s, i) =>
                        html`<tr>
                          <th scope="row"><label for="sub-${i}">${s.topic}</label></th>
                          <td>
                            <select id="sub-${i}" name="topic:${s.topic}">
                              ${STATES.map((v) => html`<option ${s.state === v ? html`selected` : ''}>${v}</option>`)}
                            </select>
                          </td>
                          <td>${s.explicit ? 'by the contact' : html`<span class="muted">topic default</span>`}</td>
                          <td>${when(s.changed_at)}</td>
                          <td>${s.source ?? ''}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
                <button type="submit">Save subscriptions</button>
              </form>`
            : html`<p class="muted">The organization has no topics.</p>`
        }
        <h2>Delete</h2>
        <p>Deleting removes the contact and its subscriptions; suppressions of the address remain.</p>
        <form method="post" action="${base}/delete" data-confirm="Delete this contact?">
          ${csrfField(ctx)}<button class="danger" type="submit">Delete contact</button>
        </form>`,
    });
  }

  router.get('/console/o/:org/audience/contacts/:id', (ctx) => detail(ctx));

  router.post('/console/o/:org/audience/contacts/:id/subscriptions', async (ctx) => {
    const a = orgAuth(ctx);
    const path = `/contacts/${encodeURIComponent(ctx.params.id)}`;
    const current = await deps.api.call(a, 'GET', path);
    if (!current.ok) return refusal(ctx, 404, 'No such contact.');
    const changes = (current.body.subscriptions as Subscription[])
      .map((s) => ({ topic: s.topic, was: s.state, state: field(ctx, `topic:${s.topic}`) }))
      .filter((s) => STATES.includes(s.state) && s.state !== s.was)
      .map(({ topic, state }) => ({ topic, state }));
    const back = `/console/o/${a.organization.id}/audience/contacts/${current.body.id}`;
    if (!changes.length) return seeOther(ctx, back);
    const res = await deps.api.call(a, 'POST', `${path}/subscriptions`, { body: { subscriptions: changes } });
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The subscriptions were not changed.' });
    seeOther(ctx, `${back}?done=subscriptions_changed`);
  });

  router.post('/console/o/:org/audience/contacts/:id/delete', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'DELETE', `/contacts/${encodeURIComponent(ctx.params.id)}`);
    if (!res.ok) {
      if (res.status === 404) return refusal(ctx, 404, 'No such contact.');
      return detail(ctx, { status: res.status, message: res.error?.message ?? 'The contact was not deleted.' });
    }
    seeOther(ctx, `/console/o/${a.organization.id}/audience?done=contact_deleted#contacts`);
  });
}
