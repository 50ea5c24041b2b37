import type { WorkflowContext } from './context';
import type { WorkflowDef } from './definition';

/**
 * Versioning for bodies that change while runs are in flight (docs/temporal.md, "Changing a
 * workflow body"). A body takes a new path only where `patched(ctx, id)` says so:
 *
 *     if (patched(ctx, 'dkim-publish-after-switch')) await a.publishDkimRecords(input.domainId);
 *
 * and the definition lists the id in `patches`. Temporal answers from the run's history (a marker
 * where a run first took the new path; a run that went past this point before the change replays
 * without it). The embedded engine re-executes a recovered run from its start, so it answers for
 * the whole run: true only when the run started knowing the patch (the engine writes the
 * definition's patches into each new run's input, PATCHES_KEY). In-memory test contexts: true.
 */
export function patched(ctx: WorkflowContext<object>, id: string): boolean {
  return ctx.patched ? ctx.patched(id) : true;
}

/**
 * The old path is gone from the body: every run that could take it has ended. Temporal still
 * records the marker (runs that saw `patched` keep replaying); remove the call, and the id from
 * `patches`, a release later.
 */
export function deprecatePatch(ctx: WorkflowContext<object>, id: string): void {
  ctx.deprecatePatch?.(id);
}

/** Where an embedded run's input carries the patches its code knew when it started. */
export const PATCHES_KEY = 'svcPatches';

/** A new embedded run's input: the definition's patches beside what the caller gave. */
export function withPatches(def: Pick<WorkflowDef, 'patches'>, input: unknown): unknown {
  if (!def.patches?.length || typeof input !== 'object' || input === null) return input;
  return { ...(input as object), [PATCHES_KEY]: [...def.patches] };
}

/** A recovered or new embedded run's input split into its patches and what the body gets. */
export function splitPatches(input: unknown): { patches: ReadonlySet<string>; input: unknown } {
  if (typeof input !== 'object' || input === null || !(PATCHES_KEY in input)) return { patches: new Set(), input };
  const { [PATCHES_KEY]: list, ...rest } = input as Record<string, unknown>;
  return { patches: new Set(Array.isArray(list) ? list.map(String) : []), input: rest };
}

/** A patch id a body asks about must be declared: a typo would otherwise be a silent `false` on replay. */
export function assertDeclared(def: Pick<WorkflowDef, 'name' | 'patches'>, id: string): void {
  if (!def.patches?.includes(id)) throw new Error(`patch ${id} is not in the patches of workflow ${def.name}`);
}
