import { escapeHtml } from '../core/html';

/**
 * HTML that is already markup. Everything interpolated into `html` is escaped unless it is one of
 * these, so a page cannot forget to escape: a subject holding `<script>` shows as text.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** Values a template accepts: text (escaped), markup, lists of either, and nothing (empty). */
export type Piece = Html | string | number | boolean | null | undefined | readonly Piece[];

const render = (p: Piece): string => {
  if (p === null || p === undefined || p === false) return '';
  if (p instanceof Html) return p.value;
  if (Array.isArray(p)) return p.map(render).join('');
  return escapeHtml(String(p));
};

/** The console's one way to write markup: `html\`<td>${subject}</td>\`` escapes the subject. */
export function html(strings: TemplateStringsArray, ...values: Piece[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Markup written by this code, never by a caller: static fragments only. */
export const trusted = (markup: string) => new Html(markup);

/** A query string from parts, skipping empty ones; values are URL-encoded (then escaped by `html`). */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
