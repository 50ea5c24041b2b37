import { html, type Html } from '../html';
import { csrfField, renderPage, when, seeOther } from '../layout';
import { consoleRouter, field, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';
import { contactPages, contactSearch } from './audience-contacts';

/** What the operator typed into a create form that was refused, to show it again. */
interface Typed {
  topic?: { slug: string; name: string; default_opt_in: boolean };
  segment?: { name: string; filter: string };
}

const EXAMPLE = '{"all": [{"status": "SUBSCRIBED"}, {"topic": "news", "state": "SUBSCRIBED"}]}';

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** "Next page" of one of the page's lists: its own cursor parameter, the others kept. */
function more(ctx: ConsoleContext, base: string, param: string, next: string | null | undefined): Html {
  if (!next) return html``;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(ctx.query)) if (typeof v === 'string' && v && k !== param && k !== 'done') q.set(k, v);
  q.set(param, next);
  return html`<p class="pager"><a href="${base}?${q.toString()}" rel="next">Next page</a></p>`;
}

const describeCondition = (c: { status?: string; topic?: string; state?: string }) =>
  c.topic !== undefined ? `topic ${c.topic} is ${c.state}` : `status is ${c.status}`;

/**
 * Audience: topics (GET/POST /topics), segments with their live count (GET/POST /segments), and
 * contacts searched with GET /contacts's filters (the contact pages: audience-contacts.ts).
 */
export function audienceRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  async function page(ctx: ConsoleContext, failed?: { status: number; message: string }, typed: Typed = {}) {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/audience`;
    const [topics, segments] = await Promise.all([
      deps.api.call(a, 'GET', '/topics', { query: { cursor: str(ctx.query.topics_cursor) } }),
      deps.api.call(a, 'GET', '/segments', { query: { cursor: str(ctx.query.segments_cursor) } }),
    ]);
    const contacts = await contactSearch(ctx, deps, base, segments.ok ? segments.body.data : []);
    const listError = [topics, segments].find((r) => !r.ok);
    const t = typed.topic;
    const s = typed.segment;
    renderPage(ctx, {
      title: 'Audience',
      current: 'audience',
      status: failed?.status ?? listError?.status ?? contacts.status,
      error: failed?.message ?? listError?.error?.message ?? contacts.error,
      body: html`<h1>Audience</h1>
        <p><a href="#topics">Topics</a> · <a href="#segments">Segments</a> · <a href="#contacts">Contacts</a></p>
        <h2 id="topics">Topics</h2>
        ${
          topics.ok && topics.body.data.length
            ? html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Slug</th>
                      <th scope="col">Name</th>
                      <th scope="col">Default opt-in</th>
                      <th scope="col">Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${(topics.body.data as any[]).map(
                      (x) =>
                        html`<tr>
                          <td><code>${x.slug}</code></td>
                          <td>${x.name}</td>
                          <td>${x.default_opt_in ? 'yes' : 'no'}</td>
                          <td>${when(x.created_at)}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
                ${more(ctx, base, 'topics_cursor', topics.body.next_cursor)}`
            : html`<p class="muted">No topics yet.</p>`
        }
        <details ${t ? html`open` : ''}>
          <summary>Create a topic</summary>
          <form method="post" action="${base}/topics" class="stack">
            ${csrfField(ctx)}
            <label>Slug <input name="slug" required maxlength="64" value="${t?.slug ?? ''}" aria-describedby="slug-help" /></label>
            <span id="slug-help" class="muted">a-z, 0-9, - and _, starting with a letter or digit; how the API and contacts name it.</span>
            <label>Name <input name="name" maxlength="200" value="${t?.name ?? ''}" /></label>
            <label class="check"
              ><input type="checkbox" name="default_opt_in" value="1" ${t?.default_opt_in ? html`checked` : ''} /> Default opt-in (a contact
              who never chose counts as subscribed)</label
            >
            <button type="submit">Create topic</button>
          </form>
        </details>
        <h2 id="segments">Segments</h2>
        ${
          segments.ok && segments.body.data.length
            ? html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Conditions (all must hold)</th>
                      <th scope="col" class="num">Contacts now</th>
                      <th scope="col">Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${(segments.body.data as any[]).map(
                      (x) =>
                        html`<tr>
                          <td>${x.name}</td>
                          <td>${(x.filter.all as any[]).map((c, i) => html`${i ? ', ' : ''}${describeCondition(c)}`)}</td>
                          <td class="num">
                            <a href="${base}?segment_id=${x.id}#contacts" data-segment-count="${x.id}">${x.contact_count}</a>
                          </td>
                          <td>${when(x.created_at)}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
                ${more(ctx, base, 'segments_cursor', segments.body.next_cursor)}`
            : html`<p class="muted">No segments yet.</p>`
        }
        <details ${s ? html`open` : ''}>
          <summary>Create a segment</summary>
          <form method="post" action="${base}/segments" class="stack">
            ${csrfField(ctx)}
            <label>Name <input name="name" required maxlength="200" value="${s?.name ?? ''}" /></label>
            <label
              >Conditions (JSON)
              <textarea name="filter" rows="5" required aria-describedby="filter-help">
${s?.filter ?? '{"all": [{"status": "SUBSCRIBED"}]}'}</textarea>
            </label>
            <span id="filter-help" class="muted"
              >An object whose <code>all</code> lists 1 to 20 conditions, each <code>{"status": …}</code> (SUBSCRIBED, UNSUBSCRIBED,
              BOUNCED) or <code>{"topic": slug, "state": …}</code> (SUBSCRIBED, UNSUBSCRIBED), e.g. <code>${EXAMPLE}</code></span
            >
            <button type="submit">Create segment</button>
          </form>
        </details>
        ${contacts.body}`,
    });
  }

  router.get('/console/o/:org/audience', (ctx) => page(ctx));

  router.post('/console/o/:org/audience/topics', async (ctx) => {
    const a = orgAuth(ctx);
    const typed = { slug: field(ctx, 'slug'), name: field(ctx, 'name'), default_opt_in: field(ctx, 'default_opt_in') === '1' };
    const res = await deps.api.call(a, 'POST', '/topics', {
      body: { slug: typed.slug, ...(typed.name ? { name: typed.name } : {}), default_opt_in: typed.default_opt_in },
    });
    if (!res.ok) return page(ctx, { status: res.status, message: res.error?.message ?? 'The topic was not created.' }, { topic: typed });
    seeOther(ctx, `/console/o/${a.organization.id}/audience?done=topic_created#topics`);
  });

  router.post('/console/o/:org/audience/segments', async (ctx) => {
    const a = orgAuth(ctx);
    const typed = { name: field(ctx, 'name'), filter: field(ctx, 'filter') };
    let filter: unknown;
    try {
      filter = JSON.parse(typed.filter);
    } catch {
      return page(ctx, { status: 422, message: `The conditions are not JSON. Write them like ${EXAMPLE}` }, { segment: typed });
    }
    const res = await deps.api.call(a, 'POST', '/segments', { body: { name: typed.name, filter } });
    if (!res.ok)
      return page(ctx, { status: res.status, message: res.error?.message ?? 'The segment was not created.' }, { segment: typed });
    seeOther(ctx, `/console/o/${a.organization.id}/audience?done=segment_created#segments`);
  });

  contactPages(router, deps);
  return router;
}
