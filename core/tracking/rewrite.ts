import { escapeHtml } from '../html';

/**
 * Click tracking rewrites the href of every <a> and <area> whose target is an http(s) URL; the
 * open pixel goes just before </body> (or at the end of a fragment). Pure string work on the
 * stored html: no parser, so markup we do not understand passes through untouched.
 */
const LINK = /(<(?:a|area)\b[^>]*?\shref\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)/gi;

export function rewriteLinks(html: string, rewrite: (url: string) => string): string {
  return html.replace(LINK, (whole, head: string, quoted: string) => {
    const raw = quoted.startsWith('"') || quoted.startsWith("'") ? quoted.slice(1, -1) : quoted;
    const url = decodeEntities(raw.trim());
    if (!/^https?:\/\/[^\s]/i.test(url)) return whole;
    return `${head}"${escapeAttribute(rewrite(url))}"`;
  });
}

/** Inserts `fragment` before the last </body>, or appends it when there is none. */
export function beforeBodyEnd(html: string, fragment: string): string {
  const at = html.toLowerCase().lastIndexOf('</body>');
  return at < 0 ? html + fragment : html.slice(0, at) + fragment + html.slice(at);
}

export const pixelHtml = (url: string) =>
  `<img src="${escapeAttribute(url)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />`;

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** The entities an href may carry (`&amp;` between query parameters above all). */
function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]+);/gi, (whole, e: string) => {
    if (e[0] === '#') {
      const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED[e.toLowerCase()] ?? whole;
  });
}

const escapeAttribute = escapeHtml;
