import type { JsonSchema } from '../openapi/operation';
import { ref } from '../openapi/common';
import { SLUG_RE } from '../../core/contacts/rules';
import { MAX_VARIABLE_KEY, MAX_VARIABLES, VARIABLE_KEY_RE, VARIABLE_TYPES } from '../../core/templates/variables';

/** The components of the templates' answers (api/templates/present.ts and the render route). */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableString: JsonSchema = { type: ['string', 'null'] };
const subject: JsonSchema = { type: 'string', minLength: 1, maxLength: 998 };
const versionNumber: JsonSchema = { type: 'integer', minimum: 1 };
const variables: JsonSchema = { type: 'array', maxItems: MAX_VARIABLES, items: ref('TemplateVariable') };

const object = (properties: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
});

const summaryFields: Record<string, JsonSchema> = {
  object: { const: 'template' },
  id: { type: 'string', format: 'uuid' },
  name: { type: 'string', minLength: 1, maxLength: 200 },
  slug: { type: ['string', 'null'], pattern: SLUG_RE.source },
  latest_version: { type: ['integer', 'null'], minimum: 1, description: 'Null before the first publish.' },
  created_at: dateTime,
  updated_at: dateTime,
};

export const schemas: Record<string, JsonSchema> = {
  TemplateVariable: {
    type: 'object',
    properties: {
      key: {
        type: 'string',
        maxLength: MAX_VARIABLE_KEY,
        pattern: VARIABLE_KEY_RE.source,
        description: 'A dotted path, e.g. `user.first_name`.',
      },
      type: { type: 'string', enum: [...VARIABLE_TYPES] },
      fallback: { type: ['string', 'number', 'boolean'], description: 'Of the declared type; absent: none.' },
    },
    required: ['key', 'type'],
    additionalProperties: false,
  },
  TemplateSummary: object(summaryFields),
  Template: object({
    ...summaryFields,
    draft: object({ subject, html: nullableString, text: nullableString, variables }),
    versions: {
      type: 'array',
      items: object({ version: versionNumber, published_at: dateTime }),
      description: 'Published versions, oldest first.',
    },
  }),
  DeletedTemplate: object({ ...summaryFields, deleted: { const: true } }),
  TemplateVersion: object({
    object: { const: 'template_version' },
    template_id: { type: 'string', format: 'uuid' },
    version: versionNumber,
    subject,
    html: nullableString,
    text: nullableString,
    variables,
    published_at: dateTime,
  }),
  RenderedTemplate: object({
    object: { const: 'rendered_template' },
    template: object({
      id: { type: 'string', format: 'uuid' },
      version: { oneOf: [versionNumber, { const: 'draft' }] },
    }),
    subject: { type: 'string', minLength: 1, maxLength: 998 },
    html: { type: ['string', 'null'], description: 'Null when the template has no html part.' },
    text: { type: 'string', description: 'Made from the html when the template has no text part.' },
  }),
};
