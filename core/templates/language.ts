import Handlebars from 'handlebars';
import type { ErrorDetail } from '../errors';
import { isVariableKey } from './variables';

/**
 * The template language: Handlebars limited to what scalar variables need, so a published template
 * can only read the variables it declares and never reaches files, the network or prototypes:
 * - `{{path}}` outputs a variable (HTML-escaped in html); `{{{path}}}` and `{{& path}}` are refused
 *   in html, where every value is escaped;
 * - `{{#if path}}…{{else}}…{{/if}}` and `{{#unless path}}…{{/unless}}` (else-if chains too);
 * - `{{! comments }}`.
 * Everything else (other helpers and block sections, partials, decorators, `../` and `@data`
 * paths, sub-expressions, hash arguments) is refused when the template is published.
 */

/** One Handlebars environment without the helpers this language does not use. */
export const handlebars = Handlebars.create();
for (const name of ['each', 'with', 'lookup', 'log', 'blockHelperMissing', 'helperMissing']) handlebars.unregisterHelper(name);

export type PartName = 'subject' | 'html' | 'text';

const BLOCK_HELPERS = new Set(['if', 'unless']);

/** Handlebars' messages quote the source around the fault; keep them one line and short. */
const oneLine = (message: string) => message.replace(/\s+/g, ' ').slice(0, 300);

/**
 * The variables a part uses, or the faults that keep it from being published (syntax, refused
 * constructs), each as a detail naming the part.
 */
export function analyzePart(part: PartName, source: string): { used: Set<string>; faults: ErrorDetail[] } {
  const used = new Set<string>();
  const faults: ErrorDetail[] = [];
  let program: hbs.AST.Program;
  try {
    program = handlebars.parse(source);
  } catch (err) {
    return { used, faults: [{ field: part, message: `does not parse: ${oneLine((err as Error).message)}` }] };
  }
  const fault = (node: hbs.AST.Node, message: string) =>
    faults.push({ field: part, message: `${message} (line ${node.loc?.start.line ?? '?'})` });

  const variable = (node: hbs.AST.Node, where: string) => {
    if (node.type !== 'PathExpression') {
      // Literals are allowed as `if` conditions (`{{#if true}}`), never as output.
      if (where === 'condition' && /Literal$/.test(node.type)) return;
      return fault(node, `${where} must be a variable name`);
    }
    const path = node as hbs.AST.PathExpression;
    const key = path.parts.join('.');
    if (path.data || path.depth > 0 || !isVariableKey(key)) return fault(node, `${path.original} is not a variable name`);
    used.add(key);
  };

  const visit = (p: hbs.AST.Program | undefined) => {
    for (const s of p?.body ?? []) {
      switch (s.type) {
        case 'ContentStatement':
        case 'CommentStatement':
          break;
        case 'MustacheStatement': {
          const m = s as hbs.AST.MustacheStatement;
          if (m.params.length > 0 || (m.hash && m.hash.pairs.length > 0)) {
            fault(
              m,
              `{{${(m.path as hbs.AST.PathExpression).original ?? '…'} …}} calls a helper; only {{variable}}, #if and #unless are available`,
            );
            break;
          }
          if (!m.escaped && part === 'html') {
            fault(m, 'unescaped output ({{{…}}} or {{& …}}) is not allowed in html: values are always escaped');
            break;
          }
          variable(m.path, 'output');
          break;
        }
        case 'BlockStatement': {
          const b = s as hbs.AST.BlockStatement;
          const name = b.path.type === 'PathExpression' ? (b.path as hbs.AST.PathExpression).original : '';
          if (!BLOCK_HELPERS.has(name) || b.params.length !== 1 || (b.hash && b.hash.pairs.length > 0)) {
            fault(b, `{{#${name || '…'}}} is not available; blocks are {{#if variable}} and {{#unless variable}}`);
            break;
          }
          variable(b.params[0], 'condition');
          visit(b.program);
          visit(b.inverse);
          break;
        }
        default:
          fault(s, `${s.type.replace(/Statement$/, '').toLowerCase()}s are not available in templates`);
      }
    }
  };
  visit(program);
  return { used, faults };
}

/**
 * Compiles a checked part. Strict: a missing value throws instead of rendering blank (bindData
 * already made sure none is missing); prototype access stays at Handlebars' default (off).
 */
export function compilePart(part: PartName, source: string): Handlebars.TemplateDelegate {
  return handlebars.compile(source, {
    strict: true,
    knownHelpers: { if: true, unless: true },
    knownHelpersOnly: true,
    noEscape: part !== 'html',
  });
}
