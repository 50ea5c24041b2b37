import { ServiceError } from '../errors';
import { renderTemplate } from '../templates/render';
import { templateNotFound, type TemplateResolver } from '../templates/resolver';
import type { PreparedEmail } from './prepare';

/**
 * Renders the prepared sends that name a template (spec: "rendered when the request is accepted;
 * the stored message is what is sent"): one lookup for the whole request, then each item on its
 * own, so in a batch a failing item carries its own 422 and the others go on. The caller's data is
 * checked strictly (an undeclared key is a `template_variables`). Answers null when `scope` is a
 * token that names no live key (the caller answers 401).
 */
export async function renderTemplatedEmails(
  resolver: TemplateResolver,
  scope: { tokenHash: string } | { organizationId: string },
  items: PreparedEmail[],
): Promise<(PreparedEmail | ServiceError)[] | null> {
  const templated = items.filter((i) => i.template !== null && !i.template.unresolvable);
  const resolved = templated.length ? await resolver.resolve(scope, templated.map((i) => i.template!.ref)) : [];
  if (resolved === null) return null;
  const byItem = new Map(templated.map((item, n) => [item, resolved[n]]));
  return items.map((item) => {
    if (item.template === null) return item;
    const version = byItem.get(item) ?? templateNotFound(item.template.ref);
    if (version instanceof ServiceError) return version;
    try {
      const r = renderTemplate(version.compiled, item.template.data, 'refuse');
      return {
        ...item,
        subject: r.subject,
        html: r.html,
        text: r.text,
        template: null,
        templateId: version.templateId,
        templateVersion: version.version,
      };
    } catch (err) {
      if (err instanceof ServiceError) return err;
      throw err;
    }
  });
}
