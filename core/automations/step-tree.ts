import type { AutomationStep } from './definition';
import { MAX_AUTOMATION_DEPTH, MAX_AUTOMATION_STEPS } from './limits';
import { parseStep, type Context } from './steps';

/**
 * The steps of an automation as a tree: a list of steps, in which a condition holds a `then` and
 * an `else` list one level deeper. Its limits (nesting, steps in all) are checked before a list is
 * walked, so a hostile body costs no more than the limits allow; its paths (`steps[2].then[0]`)
 * name both a refused field and the step a run is at.
 */

/** A list of steps at `path`, `depth` lists deep; null when refused (details added). */
export function parseList(v: unknown, path: string, depth: number, ctx: Context, allowEmpty: boolean): AutomationStep[] | null {
  const { p } = ctx;
  if (!Array.isArray(v)) {
    p.add(path, v === undefined ? `${path} is required: an array of steps` : `${path} must be an array of steps`);
    return null;
  }
  if (depth > MAX_AUTOMATION_DEPTH) {
    p.add(path, `${path}: conditions nest at most ${MAX_AUTOMATION_DEPTH} lists of steps deep`);
    return null;
  }
  if (!allowEmpty && v.length === 0) {
    p.add(path, `${path} must hold at least one step`);
    return null;
  }
  // Counted before walking: a list that would exceed the limit is refused without visiting its steps.
  ctx.steps += v.length;
  if (ctx.steps > MAX_AUTOMATION_STEPS) {
    if (!ctx.tooMany) p.add('steps', `an automation has at most ${MAX_AUTOMATION_STEPS} steps, nested ones included`);
    ctx.tooMany = true;
    return null;
  }
  const branch = (list: unknown, at: string) => parseList(list, at, depth + 1, ctx, true);
  const out: AutomationStep[] = [];
  let ok = true;
  for (let i = 0; i < v.length; i++) {
    if (ctx.tooMany) return null;
    if (p.full) {
      p.more = true; // the rest is not walked
      return null;
    }
    const step = parseStep(v[i], `${path}[${i}]`, ctx, branch);
    if (step === null) ok = false;
    else out.push(step);
  }
  return ok ? out : null;
}

const STEP_PATH = /^steps\[(0|[1-9]\d{0,8})\]((?:\.(?:then|else)\[(?:0|[1-9]\d{0,8})\])*)$/;
const SEGMENT = /\.(then|else)\[(\d+)\]/g;

/** The step at a step path (`steps[2]`, `steps[2].then[0]`), the inverse of the paths above; undefined when there is none. */
export function stepAt(steps: AutomationStep[], path: string): AutomationStep | undefined {
  const m = typeof path === 'string' ? STEP_PATH.exec(path) : null;
  if (!m) return undefined;
  let step: AutomationStep | undefined = steps[Number(m[1])];
  for (const [, branch, index] of m[2].matchAll(SEGMENT)) {
    if (step?.type !== 'condition') return undefined;
    step = (branch === 'then' ? step.then : step.else)[Number(index)];
  }
  return step;
}
