import fs from 'node:fs';
import type { Page } from 'playwright-core';

// axe-core (npm) run inside a page. The console's policy forbids inline script, and the product stays
// as strict for its tests: the source goes in through the DevTools protocol (page.evaluate), which the
// page's Content-Security-Policy does not govern, and not as a <script> element the page would refuse.

let source: string | undefined;
const axeSource = () => (source ??= fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8'));

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; html: string; failureSummary?: string }[];
}

/** The page's axe-core violations (WCAG 2.0/2.1 A and AA and axe's best practices) at the given impacts. */
export async function axeViolations(page: Page, impacts: string[] = ['serious', 'critical']): Promise<AxeViolation[]> {
  // (No DOM types in this project: the page's globals are reached through globalThis.)
  const loaded = await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe === 'object');
  if (!loaded) await page.evaluate(axeSource());
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (opts: unknown) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run({
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
      resultTypes: ['violations'],
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target as string[], html: n.html, failureSummary: n.failureSummary })),
    }));
  });
  return found.filter((v) => v.impact !== null && impacts.includes(v.impact));
}

/** Violations as an assertion message: each rule's id, what it asks, and the nodes that break it. */
export function describeViolations(violations: AxeViolation[]): string {
  return violations
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help}\n` +
        v.nodes
          .slice(0, 5)
          .map(
            (n) =>
              `    ${n.target.join(' ')}  ${n.html.slice(0, 160)}${n.failureSummary ? `\n      ${n.failureSummary.replace(/\n/g, ' ')}` : ''}`,
          )
          .join('\n'),
    )
    .join('\n');
}
