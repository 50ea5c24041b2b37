import type { ParameterizedContext } from 'koa';
import { escapeHtml } from '../../core/html';

/**
 * A small self-contained HTML page for recipients (no scripts, no outside resources). The policy
 * lets the page post its own form and nothing else; no referrer, so the token in the URL never
 * leaks to anyone.
 */
export function renderPage(ctx: ParameterizedContext, status: number, title: string, bodyHtml: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Cache-Control', 'no-store');
  ctx.body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%;margin:1rem 0}td{padding:.3rem 0;border-bottom:1px solid #eee}
td+td{text-align:right;color:#555}button{font:inherit;padding:.5rem 1rem;cursor:pointer}</style></head>
<body>${bodyHtml}</body></html>`;
}

/** The same page for every token we did not sign: nothing about any message shows through. */
export const renderNotFound = (ctx: ParameterizedContext) =>
  renderPage(ctx, 404, 'Link not found', '<h1>Link not found</h1><p>This link is not valid. Check that it was copied completely.</p>');
