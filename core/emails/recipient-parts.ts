import { escapeHtml } from '../html';
import { beforeBodyEnd, pixelHtml, rewriteLinks } from '../tracking/rewrite';

/** What a message gains for its one recipient at send time, besides what the caller stored. */
export interface RecipientPartsInput {
  html: string | null;
  text: string | null;
  /** Bulk kinds: the one-click unsubscribe link (RFC 8058), in the headers and the footer. */
  unsubscribeUrl: string | null;
  /** The organization's name and postal address; null without an address (then no footer at all). */
  sender: { name: string; postalAddress: string } | null;
  /** Open pixel URL when opens are tracked. */
  pixelUrl: string | null;
  /** The redirect for one link when clicks are tracked. */
  clickUrl: ((url: string) => string) | null;
}

export interface RecipientParts {
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
}

/**
 * The stored message as one recipient gets it: click redirects first (so the footer's unsubscribe
 * link stays direct), then the legal footer of bulk mail in each body part it has, then the open
 * pixel last. The unsubscribe headers go on every bulk message, footer or not.
 */
export function recipientParts(p: RecipientPartsInput): RecipientParts {
  let html = p.html;
  let text = p.text;
  const headers: Record<string, string> = {};
  if (html !== null && p.clickUrl) html = rewriteLinks(html, p.clickUrl);
  if (p.unsubscribeUrl !== null) {
    headers['List-Unsubscribe'] = `<${p.unsubscribeUrl}>`;
    headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
    if (p.sender) {
      if (html !== null) html = beforeBodyEnd(html, footerHtml(p.sender, p.unsubscribeUrl));
      if (text !== null) text = text.trimEnd() + footerText(p.sender, p.unsubscribeUrl);
    }
  }
  if (html !== null && p.pixelUrl !== null) html = beforeBodyEnd(html, pixelHtml(p.pixelUrl));
  return { html, text, headers };
}

const lines = (address: string) =>
  address
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);

function footerHtml(sender: { name: string; postalAddress: string }, url: string): string {
  const address = lines(sender.postalAddress).map(escapeHtml).join('<br>');
  return (
    `<div style="margin-top:32px;padding-top:12px;border-top:1px solid #ddd;font:12px/1.5 Arial,sans-serif;color:#666">` +
    `${escapeHtml(sender.name)}<br>${address}<br>` +
    `<a href="${escapeHtml(url)}" style="color:#666">Unsubscribe</a></div>`
  );
}

const footerText = (sender: { name: string; postalAddress: string }, url: string) =>
  `\n\n-- \n${sender.name}\n${lines(sender.postalAddress).join('\n')}\nUnsubscribe: ${url}\n`;
