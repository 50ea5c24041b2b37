import { tellClosedRuns, type RunSignals } from '../../core/emails/unconfirmed';
import { utcDay } from '../../core/limits/caps';
import { listOrganizations } from '../../db/sql/console-overview';
import { closeUnconfirmedIds, countUnconfirmed, listUnconfirmed } from '../../db/sql/unconfirmed';
import { isUuid } from '../../db/ids';
import { html } from '../html';
import { csrfField, pager, renderPage, when, seeOther } from '../layout';
import { consoleRouter, field, session, type ConsoleContext, type ConsoleDeps } from '../state';

const PAGE = 100;
const DEFAULT_HOURS = 72;
/** Organizations the filter's list offers. */
const ORG_CHOICES = 500;

interface Filters {
  hours: number;
  org: string | null;
  /** What was asked, as typed (shown back), and what is wrong with it. */
  raw: { hours: string; org: string };
  problem: string | null;
}

function filters(hours: string, org: string): Filters {
  const h = hours === '' ? DEFAULT_HOURS : /^\d{1,5}$/.test(hours) ? Number(hours) : NaN;
  const problem = !(h >= 1 && h <= 24 * 366)
    ? 'Hours is a whole number from 1 to 8784.'
    : org !== '' && !isUuid(org)
      ? 'No such organization.'
      : null;
  return { hours: problem ? DEFAULT_HOURS : h, org: problem || org === '' ? null : org, raw: { hours, org }, problem };
}

const q = (ctx: ConsoleContext, name: string) => (typeof ctx.query[name] === 'string' ? (ctx.query[name] as string).trim() : '');

/** The keyset position of a page: `<sent_at ISO>_<id>`. */
function parseCursor(c: string): { sentAt: Date; id: string } | undefined {
  const [at, id] = c.split('_');
  const sentAt = new Date(at ?? '');
  return id && isUuid(id) && !Number.isNaN(sentAt.getTime()) ? { sentAt, id } : undefined;
}

/**
 * Unconfirmed (platform operators only; mounted in console/routes.ts's platform list): live
 * messages at `sent` with no event since, older than N hours, and closing the selected ones as
 * `unconfirmed`: `svc email unconfirmed --close`'s statement and audit rows (db/sql/unconfirmed.ts;
 * no API route does this), for exactly the ids chosen, naming the operator; then, as the command
 * does, a Temporal run still waiting at `sent` is told.
 */
export function unconfirmedRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  async function page(ctx: ConsoleContext, f: Filters, error?: { status: number; message: string }) {
    const cutoff = new Date(Date.now() - f.hours * 3_600_000);
    const scope = { cutoff, organizationId: f.org };
    const [summary, rows, orgs] = await Promise.all([
      countUnconfirmed(deps.orm, scope),
      listUnconfirmed(deps.orm, { ...scope, limit: PAGE, after: parseCursor(q(ctx, 'cursor')) }),
      listOrganizations(deps.orm, { day: utcDay(new Date()), organizationId: null, byUsage: false, limit: ORG_CHOICES, offset: 0 }),
    ]);
    const shown = rows.slice(0, PAGE);
    const last = shown.at(-1);
    const next = rows.length > PAGE && last ? `${new Date(last.sent_at).toISOString()}_${last.id}` : null;
    const keep = { hours: String(f.hours), org: f.org ?? '' };
    renderPage(ctx, {
      title: 'Unconfirmed messages',
      status: error?.status ?? (f.problem ? 422 : 200),
      error: error?.message ?? f.problem ?? undefined,
      body: html`<h1>Unconfirmed messages</h1>
        <p>
          Live messages the relay accepted (<code>sent</code>) with no delivery, bounce or complaint since. After an outage of the inbound
          path none will come: close them as <code>unconfirmed</code>, as <code>svc email unconfirmed --close</code> does.
        </p>
        <form method="get" class="filters" role="search" aria-label="Filter unconfirmed messages">
          <label
            >Sent more than (hours ago) <input name="hours" inputmode="numeric" size="6" value="${f.raw.hours || String(DEFAULT_HOURS)}"
          /></label>
          <label
            >Organization
            <select name="org">
              <option value="">every organization</option>
              ${orgs.slice(0, ORG_CHOICES).map((o) => html`<option value="${o.id}" ${o.id === f.org ? html`selected` : ''}>${o.name}</option>`)}
            </select></label
          >
          <button type="submit">Show</button>
        </form>
        <p>
          <strong>${summary.count.toLocaleString('en-US')}</strong> ${summary.count === 1 ? 'message' : 'messages'} sent before
          ${when(cutoff.toISOString())}${summary.oldestSentAt ? html`; the oldest sent ${when(summary.oldestSentAt.toISOString())}` : ''}.
        </p>
        ${
          shown.length
            ? html`<form method="post" action="/console/unconfirmed" data-confirm="Close the selected messages as unconfirmed?">
                ${csrfField(ctx)} <input type="hidden" name="hours" value="${keep.hours}" /><input
                  type="hidden"
                  name="org"
                  value="${keep.org}"
                />
                <table>
                  <caption class="muted">
                    Oldest first
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">
                        <label class="check"><input type="checkbox" data-select-all="ids" /> All</label>
                      </th>
                      <th scope="col">Sent</th>
                      <th scope="col">Organization</th>
                      <th scope="col">Subject</th>
                      <th scope="col">To</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${shown.map(
                      (m) =>
                        html`<tr>
                          <td><input type="checkbox" name="ids" value="${m.id}" aria-label="Select ${m.subject || m.id}" /></td>
                          <td>${when(new Date(m.sent_at).toISOString())}</td>
                          <td>${m.organization_name}</td>
                          <td><a href="/console/o/${m.organization_id}/messages/${m.id}">${m.subject || '(no subject)'}</a></td>
                          <td>${(m.to_addresses ?? []).join(', ')}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
                <button type="submit" class="danger">Close selected as unconfirmed</button>
              </form>`
            : html`<p class="muted">Nothing to close.</p>`
        }
        ${pager('/console/unconfirmed', keep, next)}`,
    });
  }

  router.get('/console/unconfirmed', (ctx) => page(ctx, filters(q(ctx, 'hours'), q(ctx, 'org'))));

  router.post('/console/unconfirmed', async (ctx) => {
    const f = filters(field(ctx, 'hours'), field(ctx, 'org'));
    if (f.problem) return page(ctx, f, { status: 422, message: f.problem });
    const ids = [...new Set(ctx.state.form!.getAll('ids').map((s) => s.trim()))];
    if (ids.length === 0) return page(ctx, f, { status: 422, message: 'Select at least one message to close.' });
    if (!ids.every(isUuid)) return page(ctx, f, { status: 422, message: 'That selection names no message.' });
    const closed = await closeUnconfirmedIds(deps.orm, {
      ids,
      cutoff: new Date(Date.now() - f.hours * 3_600_000),
      organizationId: f.org,
      actor: `console:${session(ctx).operator.email}`,
    });
    await tellClosedRuns(
      deps.engine,
      closed.map((c) => c.id),
    );
    seeOther(ctx, `/console/unconfirmed?hours=${f.hours}${f.org ? `&org=${f.org}` : ''}&done=unconfirmed_closed`);
  });

  return router;
}
