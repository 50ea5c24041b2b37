import type Handlebars from 'handlebars';
import { validationError, type ErrorDetail } from '../errors';
import { MAX_BODY_PART_BYTES } from '../emails/schema';
import { htmlToText } from '../html';
import { analyzePart, compilePart, type PartName } from './language';
import { bindData, templateVariablesError, type UndeclaredData, type VariableDeclaration } from './variables';

/** The parts and variables of a template's draft or of one published version. */
export interface TemplateContent {
  subject: string;
  html: string | null;
  text: string | null;
  variables: VariableDeclaration[];
}

export interface Rendered {
  subject: string;
  html: string | null;
  text: string;
}

/** A published version compiled once (see TemplateResolver's cache). */
export interface CompiledTemplate {
  variables: VariableDeclaration[];
  subject: Handlebars.TemplateDelegate;
  html: Handlebars.TemplateDelegate | null;
  text: Handlebars.TemplateDelegate | null;
  /** Source characters, what the cache weighs it by. */
  size: number;
}

const partsOf = (c: TemplateContent) =>
  (['subject', 'html', 'text'] as const).filter((p) => c[p] !== null).map((p) => [p, c[p] as string] as [PartName, string]);

/**
 * What publishing requires (422 `validation_error` naming each fault): an html or text part, parts
 * that parse and stay inside the template language, and every variable they use declared.
 */
export function checkPublishable(c: TemplateContent): void {
  const details: ErrorDetail[] = [];
  if (c.html === null && c.text === null)
    details.push({ field: 'html', message: 'a template needs html or text (or both) to be published' });
  const declared = new Set(c.variables.map((v) => v.key));
  const undeclared = new Set<string>();
  for (const [part, source] of partsOf(c)) {
    const { used, faults } = analyzePart(part, source);
    details.push(...faults);
    for (const key of used) if (!declared.has(key)) undeclared.add(key);
  }
  if (undeclared.size) {
    details.push(...[...undeclared].map((key) => ({ field: 'variables', message: `${key} is used but not declared` })));
  }
  if (details.length) {
    const names = [...undeclared];
    throw validationError(
      names.length
        ? `undeclared variable(s) used: ${names.join(', ')}; declare them in variables`
        : `the template cannot be published: ${details[0].field} ${details[0].message}`,
      details,
    );
  }
}

export function compileTemplate(c: TemplateContent): CompiledTemplate {
  return {
    variables: c.variables,
    subject: compilePart('subject', c.subject),
    html: c.html === null ? null : compilePart('html', c.html),
    text: c.text === null ? null : compilePart('text', c.text),
    size: c.subject.length + (c.html?.length ?? 0) + (c.text?.length ?? 0),
  };
}

const SUBJECT_MAX = 998;

/**
 * Renders a compiled template with `data` (see bindData for the data rules). Values are escaped in
 * html only. Without a text part, the text is made from the rendered html. A rendered subject that
 * breaks the send rules (1–998 characters, no line breaks) or a part over 2 MB is a 422
 * `template_variables`: the data made it so.
 */
export function renderTemplate(t: CompiledTemplate, data: unknown, undeclared: UndeclaredData): Rendered {
  const context = bindData(t.variables, data, undeclared);
  let subject: string;
  let html: string | null;
  let text: string;
  try {
    subject = t.subject(context);
    html = t.html ? t.html(context) : null;
    text = t.text ? t.text(context) : htmlToText(html ?? '');
  } catch (err) {
    // Strict mode throws on a missing value; bindData supplied every declared one, so this is a
    // variable the version uses without declaring (published before a check that caught it).
    throw templateVariablesError([{ field: 'template', message: `cannot render: ${(err as Error).message.split('\n')[0].slice(0, 200)}` }]);
  }
  const details: ErrorDetail[] = [];
  if (subject.length < 1 || subject.length > SUBJECT_MAX) {
    details.push({ field: 'subject', message: `renders to ${subject.length} characters; a subject is 1 to ${SUBJECT_MAX}` });
  } else if (/[\r\n]/.test(subject)) details.push({ field: 'subject', message: 'renders with a line break' });
  if (html !== null && Buffer.byteLength(html) > MAX_BODY_PART_BYTES) details.push({ field: 'html', message: 'renders over 2 MB' });
  if (Buffer.byteLength(text) > MAX_BODY_PART_BYTES) details.push({ field: 'text', message: 'renders over 2 MB' });
  if (details.length) throw templateVariablesError(details);
  return { subject, html, text };
}
