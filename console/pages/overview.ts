import { utcDay } from '../../core/limits/caps';
import {
  emptyRates,
  hourlySending,
  listOrganizations,
  sendingRates,
  waitingMail,
  type Outcomes,
  type SendingRates,
  type WaitingKind,
} from '../../db/sql/console-overview';
import { html, query, type Html } from '../html';
import { renderPage } from '../layout';
import { consoleRouter, session, type ConsoleDeps } from '../state';
import { capsChart, count, hourlyChart, pct, type CapRow } from './overview-charts';
import { operatorAuth } from '../api';

/** Organizations a page of the overview shows (each is one GET /organization). */
const PAGE = 25;

const WAITING: Record<WaitingKind, string> = {
  platform_daily_cap: 'platform daily cap',
  organization_daily_cap: 'organization daily cap',
  domain_daily_cap: 'domain warm-up cap',
  scheduled: 'scheduled for later',
  outbox: 'in the outbox',
};

interface Usage {
  limit: number | null;
  sent: number;
}
interface DailyUsage {
  platform: Usage;
  organization: Usage;
  domains: { id: string; name: string; warmup_stage: number | null; limit: number | null; sent: number }[];
}

const sum = (a: Outcomes, b: Outcomes): Outcomes => ({
  sent: a.sent + b.sent,
  delivered: a.delivered + b.delivered,
  bounced: a.bounced + b.bounced,
  complained: a.complained + b.complained,
});

const rate = (part: number, whole: number) => html`${pct(part, whole)} <span class="muted">(${count(part)} of ${count(whole)})</span>`;

/**
 * The overview: today's sending of each organization against its three caps (GET /organization
 * through the API, as its ADMIN key would see it), the mail waiting and why, and the delivery,
 * bounce and complaint rates, which no API route answers across organizations: those come from
 * db/sql/console-overview.ts. A platform operator sees every organization, an organization admin
 * only theirs.
 */
export function overviewRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.get('/console/overview', async (ctx) => {
    const operator = session(ctx).operator;
    const only = operator.role === 'platform' ? null : operator.organizationId;
    const page = Math.min(Math.max(Number.parseInt(String(ctx.query.page ?? '1'), 10) || 1, 1), 10_000);
    const now = new Date();
    const [rows, rates, hours] = await Promise.all([
      listOrganizations(deps.orm, {
        day: utcDay(deps.caps.clock.now()),
        organizationId: only,
        byUsage: true,
        limit: PAGE,
        offset: (page - 1) * PAGE,
      }),
      sendingRates(deps.orm, only, now),
      hourlySending(deps.orm, only, now),
    ]);
    const orgs = rows.slice(0, PAGE);
    const [usages, waiting] = await Promise.all([
      Promise.all(
        orgs.map(async (o) => {
          const res = await deps.api.call(operatorAuth(o, operator), 'GET', '/organization');
          return res.ok ? (res.body.daily_usage as DailyUsage) : null;
        }),
      ),
      waitingMail(
        deps.orm,
        orgs.map((o) => o.id),
        now,
      ),
    ]);
    const waitingOf = (id: string) => waiting.filter((w) => w.organization_id === id);
    const total = [...rates.values()].reduce(
      (t, r) => ({ lastHour: sum(t.lastHour, r.lastHour), lastDay: sum(t.lastDay, r.lastDay), lastWeek: sum(t.lastWeek, r.lastWeek) }),
      emptyRates(),
    );
    const platform = usages.find((u) => u !== null)?.platform;

    const capRows: CapRow[] = [
      ...(platform ? [{ label: 'Platform (all organizations)', ...platform, level: 'platform' as const }] : []),
      ...orgs.flatMap((o, i) => {
        const u = usages[i];
        if (!u) return [];
        return [
          { label: o.name, ...u.organization, level: 'organization' as const },
          ...u.domains
            .filter((d) => d.limit !== null)
            .map((d) => ({ label: `${d.name} (stage ${d.warmup_stage})`, sent: d.sent, limit: d.limit, level: 'domain' as const })),
        ];
      }),
    ];

    const orgRow = (o: (typeof orgs)[number], i: number): Html => {
      const u = usages[i];
      const r: SendingRates = rates.get(o.id) ?? emptyRates();
      const w = waitingOf(o.id);
      const base = `/console/o/${o.id}/messages`;
      return html`<tr>
        <th scope="row"><a href="${base}">${o.name}</a></th>
        <td>${o.plan}</td>
        <td class="num">
          ${u ? html`${count(u.organization.sent)} / ${u.organization.limit === null ? 'no cap' : count(u.organization.limit)}` : '—'}
        </td>
        <td>
          ${
            u && u.domains.length
              ? html`<ul class="plain">
                  ${u.domains.map(
                    (d) =>
                      html`<li>
                        ${d.name}:
                        ${count(d.sent)}${d.limit === null ? html` <span class="muted">(no warm-up cap)</span>` : html` / ${count(d.limit)} <span class="muted">(stage ${d.warmup_stage})</span>`}
                      </li>`,
                  )}
                </ul>`
              : html`<span class="muted">No domains</span>`
          }
        </td>
        <td>
          ${
            w.length
              ? html`<ul class="plain">
                  ${w.map((x) => html`<li><a href="${base}${query({ status: 'queued' })}">${count(x.count)}</a> ${WAITING[x.reason] ?? x.reason}</li>`)}
                </ul>`
              : html`<span class="muted">None</span>`
          }
        </td>
        <td class="num">${pct(r.lastHour.delivered, r.lastHour.sent)}</td>
        <td class="num">${pct(r.lastDay.bounced, r.lastDay.sent)} / ${pct(r.lastWeek.bounced, r.lastWeek.sent)}</td>
        <td class="num">${pct(r.lastDay.complained, r.lastDay.sent)} / ${pct(r.lastWeek.complained, r.lastWeek.sent)}</td>
      </tr>`;
    };

    renderPage(ctx, {
      title: 'Overview',
      body: html`<h1>Overview</h1>
        <p class="muted">
          ${operator.role === 'platform' ? 'Every organization' : 'Your organization'}; live mail only (test mail never counts). Rates are
          of the messages sent in each window, by what became of them.
        </p>
        <h2>Rates</h2>
        <div class="cards">
          ${
            platform
              ? html`<div class="card">
                  <div class="muted">Platform today</div>
                  <div class="big">${count(platform.sent)}</div>
                  <div>of ${platform.limit === null ? 'no cap' : count(platform.limit)}</div>
                </div>`
              : ''
          }
          <div class="card">
            <div class="muted">Delivered, last hour</div>
            <div class="big">${pct(total.lastHour.delivered, total.lastHour.sent)}</div>
            <div>${count(total.lastHour.delivered)} of ${count(total.lastHour.sent)} sent</div>
          </div>
          <div class="card">
            <div class="muted">Bounced</div>
            <div class="big">${pct(total.lastDay.bounced, total.lastDay.sent)}</div>
            <div>24 hours; 7 days: ${rate(total.lastWeek.bounced, total.lastWeek.sent)}</div>
          </div>
          <div class="card">
            <div class="muted">Complaints</div>
            <div class="big">${pct(total.lastDay.complained, total.lastDay.sent)}</div>
            <div>24 hours; 7 days: ${rate(total.lastWeek.complained, total.lastWeek.sent)}</div>
          </div>
        </div>
        <h2>Today's sending against the caps</h2>
        ${capRows.length ? capsChart(capRows) : html`<p class="muted">No organizations.</p>`}
        <h2>The last 24 hours</h2>
        ${hourlyChart(hours)}
        <h2>Organizations</h2>
        <table>
          <caption class="muted">
            Busiest today first; bounce and complaint rates over 24 hours / 7 days
          </caption>
          <thead>
            <tr>
              <th scope="col">Organization</th>
              <th scope="col">Plan</th>
              <th scope="col" class="num">Today / cap</th>
              <th scope="col">Domains today (warm-up)</th>
              <th scope="col">Waiting</th>
              <th scope="col" class="num">Delivered (1 h)</th>
              <th scope="col" class="num">Bounced</th>
              <th scope="col" class="num">Complaints</th>
            </tr>
          </thead>
          <tbody>
            ${orgs.map(orgRow)}
          </tbody>
        </table>
        ${orgs.length === 0 ? html`<p class="muted">No organizations yet.</p>` : ''}
        <p class="pager">
          ${page > 1 ? html`<a href="/console/overview${query({ page: page - 1 })}" rel="prev">Previous page</a>` : ''}
          ${rows.length > PAGE ? html`<a href="/console/overview${query({ page: page + 1 })}" rel="next">Next page</a>` : ''}
        </p>`,
    });
  });

  return router;
}
