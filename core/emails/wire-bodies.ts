import { htmlToText } from '../html';

/** The body parts a message leaves with. */
export interface WireBodies {
  html: string | null;
  text: string | null;
}

const HTML_ELEMENT = /<html[\s>]/i;
const BODY_ELEMENT = /<body[\s>]/i;

/**
 * The parts as a receiver should get them, from the parts as stored (after the recipient's own
 * additions: footer, pixel, click redirects). Receivers score html-only mail as suspect
 * (SpamAssassin's MIME_HTML_ONLY) and an html part that is a bare fragment too
 * (HTML_MIME_NO_HTML_TAG), so, as Resend and Postmark do:
 * - html without a text part gains the text a reader of the html sees, making the message
 *   multipart/alternative;
 * - an html fragment (no `<html>` element) is wrapped in a document, its content unchanged.
 * Text alone stays text/plain. The stored message is not changed: this is applied when composing.
 */
export function wireBodies(html: string | null, text: string | null): WireBodies {
  if (html === null) return { html, text };
  const document = HTML_ELEMENT.test(html) ? html : BODY_ELEMENT.test(html) ? `<html>${html}</html>` : `<html><body>${html}</body></html>`;
  return { html: document, text: text ?? htmlToText(html) };
}
