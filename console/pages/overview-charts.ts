import type { HourRow } from '../../db/sql/console-overview';
import { html, type Html } from '../html';

/**
 * The overview's two charts, drawn on the server as inline SVG: no script, and no style
 * attribute (the policy forbids inline style): sizes are presentation attributes, colours are
 * classes of console.css. Each is one image to assistive technology, its numbers in its label;
 * the hourly one also has its numbers in a table below it.
 */

export const count = (n: number) => n.toLocaleString('en-US');

/** A share as a percentage (two decimals under 1%, where complaint rates live); no mail: a dash. */
export function pct(part: number, whole: number): string {
  if (whole === 0) return '—';
  const p = (100 * part) / whole;
  return `${p > 0 && p < 1 ? p.toFixed(2) : p.toFixed(1)}%`;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export interface CapRow {
  label: string;
  sent: number;
  /** null: no cap (the bar is drawn against the largest uncapped use). */
  limit: number | null;
  level: 'platform' | 'organization' | 'domain';
}

const capText = (r: CapRow) => `${count(r.sent)} / ${r.limit === null ? 'no cap' : count(r.limit)}`;

/** Today's use against each cap: one bar per row, its track the cap, red when the cap is reached. */
export function capsChart(rows: CapRow[]): Html {
  const width = 760;
  const labelWidth = 250;
  const track = 360;
  const rowHeight = 26;
  const height = rows.length * rowHeight + 8;
  const uncapped = Math.max(1, ...rows.filter((r) => r.limit === null).map((r) => r.sent));
  const label = `Today's sending against the daily caps. ${rows.map((r) => `${r.label}: ${capText(r)}`).join('; ')}.`;
  return html`<svg class="chart caps" role="img" aria-label="${label}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">
    <title>Today's sending against the daily caps</title>
    ${rows.map((r, i) => {
      const y = 4 + i * rowHeight;
      const of = r.limit === null ? uncapped : Math.max(r.limit, 1);
      const used = r.sent === 0 ? 0 : Math.max(2, Math.round(track * Math.min(r.sent / of, 1)));
      const full = r.limit !== null && r.sent >= r.limit;
      return html`<g class="${r.level}">
        <text x="${r.level === 'domain' ? 18 : 0}" y="${y + 16}">${clip(r.label, r.level === 'domain' ? 30 : 32)}</text>
        <rect class="cap${r.limit === null ? ' none' : ''}" x="${labelWidth}" y="${y + 3}" width="${track}" height="16"></rect>
        ${used ? html`<rect class="bar${full ? ' full' : ''}" x="${labelWidth}" y="${y + 3}" width="${used}" height="16"></rect>` : ''}
        <text x="${labelWidth + track + 8}" y="${y + 16}">${capText(r)}</text></g
      >`;
    })}
  </svg>`;
}

const hourLabel = (iso: string) => `${iso.slice(11, 13)}:${iso.slice(14, 16)}`;

/** The last 24 hours, an hour a group: sent, then of those delivered and bounced. */
export function hourlyChart(hours: HourRow[]): Html {
  const left = 48;
  const slot = 28;
  const top = 10;
  const plot = 140;
  const width = left + hours.length * slot + 8;
  const height = top + plot + 30;
  const max = Math.max(1, ...hours.map((h) => h.sent));
  const bar = (n: number, cls: string, x: number, what: string, h: HourRow) => {
    if (n === 0) return '';
    const tall = Math.max(1, Math.round((plot * n) / max));
    return html`<rect class="${cls}" x="${x}" y="${top + plot - tall}" width="8" height="${tall}"
      ><title>${hourLabel(h.hour)} UTC: ${count(n)} ${what}</title></rect
    >`;
  };
  const totals = hours.reduce((t, h) => ({ sent: t.sent + h.sent, delivered: t.delivered + h.delivered, bounced: t.bounced + h.bounced }), {
    sent: 0,
    delivered: 0,
    bounced: 0,
  });
  const label = `Live messages sent per hour over the last 24 hours: ${count(totals.sent)} sent, ${count(totals.delivered)} delivered, ${count(totals.bounced)} bounced; the busiest hour sent ${count(max === 1 && totals.sent === 0 ? 0 : max)}.`;
  return html`<svg
      class="chart hourly"
      role="img"
      aria-label="${label}"
      viewBox="0 0 ${width} ${height}"
      width="${width}"
      height="${height}"
    >
      <title>Sent, delivered and bounced per hour, last 24 hours</title>
      <line class="axis" x1="${left - 4}" y1="${top + plot}" x2="${width - 4}" y2="${top + plot}"></line>
      <text class="tick" x="0" y="${top + 10}">${count(max)}</text>
      <text class="tick" x="0" y="${top + plot}">0</text>
      ${hours.map((h, i) => {
        const x = left + i * slot;
        return html`<g
          >${bar(h.sent, 'sent', x + 2, 'sent', h)}${bar(h.delivered, 'delivered', x + 10, 'delivered', h)}${bar(h.bounced, 'bounced', x + 18, 'bounced', h)}
          ${i % 4 === 0 ? html`<text class="tick" x="${x}" y="${top + plot + 18}">${hourLabel(h.hour)}</text>` : ''}</g
        >`;
      })}
    </svg>
    <ul class="legend">
      <li><span class="swatch sent"></span> Sent</li>
      <li><span class="swatch delivered"></span> Delivered</li>
      <li><span class="swatch bounced"></span> Bounced</li>
      <li class="muted">Hours in UTC, counted back from now.</li>
    </ul>
    <details>
      <summary>The numbers per hour</summary>
      <table>
        <thead>
          <tr>
            <th scope="col">Hour from (UTC)</th>
            <th scope="col" class="num">Sent</th>
            <th scope="col" class="num">Delivered</th>
            <th scope="col" class="num">Bounced</th>
          </tr>
        </thead>
        <tbody>
          ${hours.map(
            (h) =>
              html`<tr>
                <td>${h.hour.slice(0, 16).replace('T', ' ')}</td>
                <td class="num">${count(h.sent)}</td>
                <td class="num">${count(h.delivered)}</td>
                <td class="num">${count(h.bounced)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </details>`;
}
