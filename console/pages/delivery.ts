import { utcDay } from '../../core/limits/caps';
import { listTlsCounts } from '../../db/sql/mta-sts';
import { listRetryWaiting } from '../../db/sql/retry-waiting';
import { html } from '../html';
import { renderPage, when } from '../layout';
import { consoleRouter, type ConsoleDeps } from '../state';

const WAITING = 100;
const TLS_DAYS = 7;
const TLS_ROWS = 500;

/**
 * Delivery (platform operators only; mounted in console/routes.ts's platform list): what direct
 * delivery is waiting on — messages an MX refused for now or whose site is suspended, soonest
 * retry first, with the last reply — and the TLS-RPT counts (RFC 8460) of recipient domains that
 * publish MTA-STS, per policy domain and day. Read-only; docs/delivery.md says what each means.
 */
export function deliveryRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();
  router.get('/console/delivery', async (ctx) => {
    const now = deps.caps.clock.now();
    const from = utcDay(new Date(now.getTime() - (TLS_DAYS - 1) * 86_400_000));
    const [waiting, tls] = await Promise.all([
      listRetryWaiting(deps.orm, WAITING),
      listTlsCounts(deps.orm, { from, to: utcDay(now), limit: TLS_ROWS }),
    ]);
    renderPage(ctx, {
      title: 'Delivery',
      body: html`<h1>Delivery</h1>
        <h2>Waiting for a retry</h2>
        <p>
          ${waiting.total.toLocaleString('en-US')} message(s) wait for their next
          attempt${waiting.total > WAITING ? `; the ${WAITING} soonest:` : '.'}
        </p>
        <table>
          <thead>
            <tr>
              <th scope="col">Message</th>
              <th scope="col">Reason</th>
              <th scope="col">Next attempt</th>
              <th scope="col">Deferrals</th>
              <th scope="col">Last reply</th>
            </tr>
          </thead>
          <tbody>
            ${waiting.rows.map(
              (w) =>
                html`<tr>
                  <td>
                    <a href="/console/o/${w.organization_id}/messages/${w.id}"><code>${w.id}</code></a>
                  </td>
                  <td>${w.retry_reason}</td>
                  <td>${when(new Date(w.retry_at).toISOString())}</td>
                  <td>${w.deferrals}</td>
                  <td><code>${w.last_reply ?? ''}</code></td>
                </tr>`,
            )}
          </tbody>
        </table>
        <h2>TLS-RPT counts, last ${TLS_DAYS} days</h2>
        <p class="muted">
          TLS sessions with recipient domains that publish an MTA-STS policy: successes and failures per day. No reports are sent yet.
        </p>
        <table>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col">Policy domain</th>
              <th scope="col">Successes</th>
              <th scope="col">Failures</th>
            </tr>
          </thead>
          <tbody>
            ${tls.map(
              (r) =>
                html`<tr>
                  <td>${r.day}</td>
                  <td>${r.policy_domain}</td>
                  <td>${r.successes}</td>
                  <td class="${r.failures > 0 ? 'bad' : ''}">${r.failures}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${tls.length === 0 ? html`<p class="muted">No TLS sessions with MTA-STS domains in these days.</p>` : ''}`,
    });
  });
  return router;
}
