import type Router from '@koa/router';
import { simpleParser } from 'mailparser';
import type { Orm } from '../../db/orm';
import type { DevInbox } from '../../smtp/dev-inbox';
import { authenticate } from '../../core/auth';
import { ServiceError, notFound } from '../../core/errors';
import { bearerToken, hashToken, TOKEN_RE } from '../../core/tokens';
import { apiRouter, type ApiMiddleware, type ApiState } from '../state';

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, body: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;color:#222}table{border-collapse:collapse;width:100%}
td,th{padding:.4rem .6rem;border-bottom:1px solid #ddd;text-align:left}tr:hover{background:#f6f6f6}
pre{background:#f6f6f6;padding:1rem;white-space:pre-wrap;word-break:break-all}iframe{width:100%;height:480px;border:1px solid #ddd}
.meta td:first-child{color:#666;width:8rem}</style></head><body>${body}</body></html>`;
}

/**
 * Who may read the inbox once the API listens beyond loopback: a live ADMIN key, as a Bearer token
 * or as the password of HTTP Basic (so a browser can ask for it). Anything else is 401 with a
 * Basic challenge, or 403 for a key of a lower tier.
 */
function adminOnly(orm: Orm): ApiMiddleware {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const bearer = bearerToken(header);
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header)?.[1];
    const token = bearer ?? (basic ? Buffer.from(basic, 'base64').toString('utf8').split(':').slice(1).join(':') : undefined);
    if (!token || !TOKEN_RE.test(token)) {
      ctx.set('WWW-Authenticate', 'Basic realm="svc development inbox", charset="UTF-8"');
      throw new ServiceError('missing_api_key', 'the development inbox needs an ADMIN key (as the Basic password, or a Bearer token)');
    }
    const { auth } = await authenticate(orm, hashToken(token), 1, false);
    if (auth.key.permission !== 'admin' || auth.key.mode !== 'live')
      throw new ServiceError('forbidden', 'the development inbox needs a live ADMIN key');
    await next();
  };
}

/**
 * The development inbox's pages: only mounted when SMTP_URL is unset (no real mail involved).
 * Open on loopback; with `orm` (the API listens beyond loopback) only to a live ADMIN key.
 */
export function inboxRoutes(inbox: DevInbox, opts: { adminOnly?: Orm } = {}): Router<ApiState> {
  const router = apiRouter('/inbox');
  if (opts.adminOnly) router.use(adminOnly(opts.adminOnly));

  router.get('/', (ctx) => {
    const rows = inbox
      .list()
      .map(
        (m) =>
          `<tr><td><a href="/inbox/${esc(m.id)}">${esc(m.subject || '(no subject)')}</a></td><td>${esc(m.from)}</td><td>${esc(m.envelopeTo.join(', '))}</td><td>${esc(m.receivedAt)}</td></tr>`,
      );
    ctx.type = 'html';
    ctx.body = page(
      'Development inbox',
      `<h1>Development inbox</h1><p>${rows.length} message(s) received on SMTP port ${inbox.port}. Newest first.</p>
<table><tr><th>Subject</th><th>From</th><th>To</th><th>Received</th></tr>${rows.join('')}</table>`,
    );
  });

  router.get('/messages.json', (ctx) => {
    ctx.body = { object: 'list', data: inbox.list() };
  });

  router.get('/:id', async (ctx) => {
    const entry = inbox.get(ctx.params.id);
    const raw = inbox.raw(ctx.params.id);
    if (!entry || !raw) throw notFound('message');
    const parsed = await simpleParser(raw);
    const html = typeof parsed.html === 'string' ? parsed.html : '';
    const attachments = parsed.attachments
      .map((a) => `<li>${esc(a.filename ?? '(unnamed)')} (${esc(a.contentType)}, ${a.size} bytes)</li>`)
      .join('');
    ctx.type = 'html';
    ctx.body = page(
      entry.subject,
      `<p><a href="/inbox">← inbox</a></p><h1>${esc(entry.subject || '(no subject)')}</h1>
<table class="meta"><tr><td>From</td><td>${esc(entry.from)}</td></tr><tr><td>To</td><td>${esc(entry.to)}</td></tr>
<tr><td>Envelope to</td><td>${esc(entry.envelopeTo.join(', '))}</td></tr><tr><td>Message-ID</td><td>${esc(entry.messageId ?? '')}</td></tr>
<tr><td>Received</td><td>${esc(entry.receivedAt)}</td></tr></table>
<h2>HTML</h2>${html ? `<iframe sandbox="" srcdoc="${esc(html)}"></iframe>` : '<p>(no HTML part)</p>'}
<h2>Text</h2><pre>${esc(parsed.text ?? '(no text part)')}</pre>
${attachments ? `<h2>Attachments</h2><ul>${attachments}</ul>` : ''}
<h2>Source</h2><p><a href="/inbox/${esc(entry.id)}/raw">raw</a></p><pre>${esc(raw.toString('utf8').slice(0, 200_000))}</pre>`,
    );
  });

  router.get('/:id/raw', (ctx) => {
    const raw = inbox.raw(ctx.params.id);
    if (!raw) throw notFound('message');
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = raw;
  });

  return router;
}
