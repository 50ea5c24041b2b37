import { ServiceError } from '../errors';
import { renderTemplate } from '../templates/render';
import type { UndeclaredData } from '../templates/variables';
import { templateNotFound, type ResolveScope, type TemplateResolver } from '../templates/resolver';
import type { PreparedEmail } from './prepare';

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
