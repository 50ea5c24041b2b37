import { compile } from 'html-to-text';

/** Text as HTML content or a quoted attribute value (recipients' pages, the legal footer, tracking markup). */
export const escapeHtml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

/**
 * The plain text a reader of `html` sees: a template's text part when it has none, and the text
 * alternative of every html-only message (core/emails/wire-bodies.ts). Links keep their address
 * beside their words; images are left out. Compiled once: html-to-text's `convert` compiles its
 * options on every call, 20 times the cost of converting (measured).
 */
export const htmlToText: (html: string) => string = compile({
  wordwrap: 78,
  selectors: [
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
  ],
});
