import { ServiceError } from '../errors';
import { invalidKey } from '../auth';
import { renderTemplate } from '../templates/render';
import type { UndeclaredData } from '../templates/variables';
import { templateNotFound, type ResolveScope, type TemplateResolver } from '../templates/resolver';
import { acceptEmails, TEMPLATE_CHANGED, type AcceptDeps, type AcceptOptions, type Accepted, type StoreCredentials } from './accept';
import type { PreparedEmail } from './prepare';
import { findIdempotencyReplays } from '../../db/sql/idempotency-replays';

/**
 * Renders the prepared sends that name a template (spec: "rendered when the request is accepted;
 * the stored message is what is sent"): one lookup for the whole request (none when every ref was
 * resolved before, see TemplateResolver), then each item on its own, so in a batch a failing item
 * carries its own 422 and the others go on. The caller's data is checked strictly (an undeclared
 * key is a `template_variables`; an automation's send step, whose data is a contact's, ignores
 * them instead). Answers null when `scope` is a token that names no live key (the caller answers 401).
 */
export async function renderTemplatedEmails(
  resolver: TemplateResolver,
  scope: ResolveScope,
  items: PreparedEmail[],
  opts: { fresh?: boolean; undeclared?: UndeclaredData } = {},
): Promise<(PreparedEmail | ServiceError)[] | null> {
  const templated = items.filter((i) => i.template !== null && !i.template.unresolvable);
  const resolved = templated.length
    ? await resolver.resolve(
        scope,
        templated.map((i) => i.template!.ref),
        { fresh: opts.fresh },
      )
    : [];
  if (resolved === null) return null;
  const byItem = new Map(templated.map((item, n) => [item, resolved[n]]));
  return items.map((item) => {
    if (item.template === null) return item;
    const version = byItem.get(item) ?? templateNotFound(item.template.ref);
    if (version instanceof ServiceError) return version;
    try {
      const r = renderTemplate(version.compiled, item.template.data, opts.undeclared ?? 'refuse');
      return {
        ...item,
        subject: r.subject,
        html: r.html,
        text: r.text,
        templateId: version.templateId,
        templateVersion: version.version,
        templateLatest: version.latest,
      };
    } catch (err) {
      if (err instanceof ServiceError) return err;
      throw err;
    }
  });
}

const TEMPLATE_CODES = new Set(['template_not_found', 'template_variables']);

/**
 * Idempotency before the template: a retry of a send that was stored is a replay even when its
 * template has since changed or gone (what the first attempt rendered is what is sent). Answers,
 * for each item refused by its template that carries an idempotency key its organization already
 * used, the stored message (and wakes the dispatcher for one never queued).
 */
export async function replaysOfRefusedRenders(
  deps: Pick<AcceptDeps, 'orm' | 'dispatch'>,
  organizationId: string,
  items: { idempotencyKey: string | null; result: unknown }[],
): Promise<Map<number, Accepted>> {
  const keys = new Map<string, number[]>();
  items.forEach((item, i) => {
    if (item.idempotencyKey === null || !(item.result instanceof ServiceError) || !TEMPLATE_CODES.has(item.result.code)) return;
    keys.set(item.idempotencyKey, [...(keys.get(item.idempotencyKey) ?? []), i]);
  });
  const out = new Map<number, Accepted>();
  if (keys.size === 0) return out;
  for (const prior of await findIdempotencyReplays(deps.orm, organizationId, [...keys.keys()])) {
    for (const i of keys.get(prior.idempotency_key) ?? []) out.set(i, { id: prior.id, suppressed: [], replayed: true });
    if (prior.enqueued_at === null) deps.dispatch();
  }
  return out;
}

/** Rounds of rendering again before a message whose template keeps changing is refused. */
const RENDER_ROUNDS = 3;

/**
 * Accepts rendered sends (acceptEmails). A message whose template was deleted or published anew
 * between its render and the store statement is rendered again from a fresh lookup and accepted
 * again, already paid for: what is stored always comes from the version PostgreSQL saw.
 */
export async function acceptRendered(
  deps: AcceptDeps & { templates: TemplateResolver },
  credentials: StoreCredentials,
  scope: ResolveScope,
  items: PreparedEmail[],
  opts: AcceptOptions & { undeclared?: UndeclaredData },
): Promise<(Accepted | ServiceError)[]> {
  const results = await acceptEmails(deps, credentials, items, opts);
  const current = [...items];
  for (let round = 1; ; round++) {
    const stale = results.flatMap((r, i) => (r === TEMPLATE_CHANGED ? [i] : []));
    if (stale.length === 0) return results as (Accepted | ServiceError)[];
    if (round > RENDER_ROUNDS) {
      const err = new ServiceError('template_not_found', 'the template changed repeatedly while this message was accepted; send it again');
      for (const i of stale) results[i] = err;
      continue;
    }
    const again = await renderTemplatedEmails(
      deps.templates,
      scope,
      stale.map((i) => current[i]),
      { fresh: true, undeclared: opts.undeclared },
    );
    const ready: number[] = [];
    stale.forEach((i, n) => {
      const r = again === null ? invalidKey() : again[n]; // null: the key was revoked meanwhile
      if (r instanceof ServiceError) results[i] = r;
      else {
        current[i] = r;
        ready.push(i);
      }
    });
    if (ready.length) {
      // Paid for by the first statement, which admitted the request.
      const accepted = await acceptEmails(
        deps,
        credentials,
        ready.map((i) => current[i]),
        { cost: 0, prepaid: true, source: opts.source },
      );
      ready.forEach((i, n) => (results[i] = accepted[n]));
    }
  }
}
