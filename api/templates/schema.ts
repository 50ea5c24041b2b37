import * as yup from 'yup';
import { isVersionNumber } from '../../core/templates/request';
import { SLUG_RE } from '../../core/contacts/rules';
import { bodyPart } from '../../core/emails/schema';
import { isUuid } from '../../db/ids';
import { NO_LINE_BREAKS, bodySchema } from '../../core/validate';
import { resourceName } from '../validate';

const name = resourceName();
const slug = yup
  .string()
  .strict()
  .matches(SLUG_RE, 'slug must be 1–64 characters of a-z 0-9 - _, starting with a letter or digit')
  // Paths take an id or a slug: a slug shaped like an id would be ambiguous.
  .test('not-uuid', 'slug must not have the shape of a template id (a UUID)', (v) => v === undefined || v === null || !isUuid(v));
/** The subject's source: the send rules for a subject (1–998, one line) hold for the template text too. */
const subject = yup.string().strict().min(1).max(998).matches(NO_LINE_BREAKS, 'subject must not contain line breaks');

export const createTemplateSchema = bodySchema({
  name: name.required('name is required'),
  slug,
  subject: subject.required('subject is required'),
  html: bodyPart('html'),
  text: bodyPart('text'),
  // Checked by parseVariables.
  variables: yup.mixed(),
});

/** Edits the draft; null removes slug, html or text. */
export const updateTemplateSchema = bodySchema({
  name,
  slug: slug.nullable(),
  subject,
  html: bodyPart('html').nullable(),
  text: bodyPart('text').nullable(),
  variables: yup.mixed(),
});

export const renderTemplateSchema = bodySchema({
  /** A published number, `latest` (the default) or `draft` (a preview of the unpublished draft). */
  version: yup
    .mixed<number | 'latest' | 'draft'>()
    .test(
      'version',
      'version must be a published version number (1, 2, …), "latest" or "draft"',
      (v) => v === undefined || v === 'latest' || v === 'draft' || isVersionNumber(v),
    ),
  // Checked against the template's variables (422 template_variables).
  data: yup.mixed(),
});

export type CreateTemplateBody = yup.InferType<typeof createTemplateSchema>;
export type UpdateTemplateBody = yup.InferType<typeof updateTemplateSchema>;
export type RenderTemplateBody = yup.InferType<typeof renderTemplateSchema>;
