import type { Orm } from '../../db/orm';
import type { RecipientLinks } from '../../core/recipient-links';
import { uuidv7 } from '../../db/ids';
import { readPreferences } from '../../db/sql/preferences';
import { unsubscribe } from '../../db/sql/unsubscribe';
import { escapeHtml } from '../../core/html';
import { apiRouter } from '../state';
import { renderNotFound, renderPage } from './page';

export interface UnsubscribeRoutesDeps {
  orm: Orm;
  links: RecipientLinks;
}

/**
 * The recipient's end of bulk mail, no API key (the signed token is the authority):
 * - `POST /u/<token>`: RFC 8058 one-click (mail clients post `List-Unsubscribe=One-Click`), and the
 *   preference page's button. Applies at once and answers 200 with a page, never a redirect.
 * - `GET /u/<token>`: the preference page. Read only: mail scanners and link previews open links.
 */
export function unsubscribeRoutes(deps: UnsubscribeRoutesDeps) {
  const router = apiRouter();

  router.get('/u/:token', async (ctx) => {
    const target = deps.links.readUnsubscribe(ctx.params.token);
    const prefs = target && (await readPreferences(deps.orm, target.organizationId, target.address));
    if (!target || !prefs) return renderNotFound(ctx);
    const org = escapeHtml(prefs.organization);
    const topic = target.topicId ? prefs.topics.find((t) => t.id === target.topicId) : undefined;
    const rows = prefs.topics
      .map(
        (t) =>
          `<tr><td>${escapeHtml(t.name)}</td><td>${prefs.status === 'subscribed' || prefs.status === null ? t.state : prefs.status}</td></tr>`,
      )
      .join('');
    const already = prefs.status === 'unsubscribed' || prefs.status === 'bounced';
    const action = topic ? `Unsubscribe from ${escapeHtml(topic.name)}` : `Unsubscribe from all mail from ${org}`;
    renderPage(
      ctx,
      200,
      `Email preferences: ${prefs.organization}`,
      `<h1>Email preferences</h1><p>Mail from <strong>${org}</strong> to <strong>${escapeHtml(target.address)}</strong>.</p>` +
        (already ? `<p>You receive no bulk mail from ${org}.</p>` : '') +
        (rows ? `<table><tbody>${rows}</tbody></table>` : '') +
        `<form method="post" action=""><input type="hidden" name="List-Unsubscribe" value="One-Click">` +
        `<button type="submit">${action}</button></form>`,
    );
  });

  router.post('/u/:token', async (ctx) => {
    const target = deps.links.readUnsubscribe(ctx.params.token);
    if (!target) return renderNotFound(ctx);
    const row = await unsubscribe(deps.orm, { ...target, now: new Date(), newContactId: uuidv7() });
    if (row.organization === null) return renderNotFound(ctx);
    const what = row.topic_name ? escapeHtml(row.topic_name) : `all mail from ${escapeHtml(row.organization)}`;
    renderPage(
      ctx,
      200,
      'Unsubscribed',
      `<h1>You are unsubscribed</h1><p><strong>${escapeHtml(target.address)}</strong> will no longer receive ${what}.</p>`,
    );
  });

  return router;
}
