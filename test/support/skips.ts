/**
 * Skips with a reason the summary reporter prints, so a skipped suite is never mistaken for a
 * passed one.
 */
export function skipBecause(ctx: Mocha.Context, reason: string): never {
  const reasons: string[] = ((globalThis as Record<string, unknown>).__skipReasons as string[]) ?? [];
  (globalThis as Record<string, unknown>).__skipReasons = reasons;
  const title = ctx.test?.parent?.fullTitle() ?? ctx.test?.fullTitle() ?? 'tests';
  if (!reasons.some((r) => r.startsWith(title))) reasons.push(`${title}: ${reason}`);
  ctx.skip();
}
