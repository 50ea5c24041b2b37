import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { listQuerySchema } from '../validate';
import { withFields } from '../contacts/openapi-bodies';
import { MAX_FALLBACK_STRING, MAX_VARIABLE_KEY, MAX_VARIABLES, VARIABLE_KEY_RE, VARIABLE_TYPES } from '../../core/templates/variables';
import { createTemplateSchema, renderTemplateSchema, updateTemplateSchema } from './schema';

export { schemas } from './openapi-schemas';

/** OpenAPI operations of /templates (api/templates/routes.ts); the answers' components are in openapi-schemas.ts. */

const idParam = { id: { description: 'The template id or its slug.', schema: { type: 'string' } } };
const id = '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e14';
const at = '2025-01-01T00:00:00.000Z';
const variables = [{ key: 'user.first_name', type: 'string', fallback: 'there' }];
const summary = { object: 'template', id, name: 'Welcome', slug: 'welcome', latest_version: 1, created_at: at, updated_at: at };
const draft = { subject: 'Welcome, {{user.first_name}}', html: '<p>Hi {{user.first_name}}</p>', text: null, variables };
const template = { ...summary, draft, versions: [{ version: 1, published_at: at }] };
const version = { object: 'template_version', template_id: id, version: 1, ...draft, published_at: at };
const byId = { id: '$response.body#/id' };

/**
 * `variables` as parseVariables (core/templates/variables.ts) checks them; what JSON Schema cannot
 * say (unique keys, no key the start of another, a fallback of the declared type) is left to it.
 */
const variablesBody: JsonSchema = {
  type: 'array',
  maxItems: MAX_VARIABLES,
  items: {
    type: 'object',
    properties: {
      key: { type: 'string', maxLength: MAX_VARIABLE_KEY, pattern: VARIABLE_KEY_RE.source },
      type: { type: 'string', enum: [...VARIABLE_TYPES] },
      fallback: { type: ['string', 'number', 'boolean', 'null'], maxLength: MAX_FALLBACK_STRING },
    },
    required: ['key', 'type'],
    additionalProperties: false,
  },
};

/** `version` as renderTemplateSchema's test takes it: a published number, `latest` or `draft`. */
const renderVersion: JsonSchema = {
  oneOf: [{ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER }, { enum: ['latest', 'draft'] }],
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/templates',
    operationId: 'createTemplate',
    summary: 'Create a template',
    description:
      '`slug`: 1–64 of `a-z 0-9 - _` starting with a letter or digit, unique, never shaped like a UUID. `variables`: at most 50 `{key, type, fallback?}` (`type` `string`, `number` or `boolean`; a key cannot also be the start of another).',
    tag: 'Templates',
    permission: 'admin',
    body: withFields(createTemplateSchema, { variables: variablesBody }),
    requestExample: { name: 'Welcome', slug: 'welcome', subject: draft.subject, html: draft.html, variables },
    responses: {
      201: {
        description: 'The template, with its draft and no versions.',
        schema: ref('Template'),
        example: { ...template, latest_version: null, versions: [] },
      },
    },
    errors: ['template_exists'],
    links: {
      201: {
        GetTemplate: { operationId: 'getTemplate', parameters: byId },
        UpdateTemplate: { operationId: 'updateTemplate', parameters: byId },
        PublishTemplate: { operationId: 'publishTemplate', parameters: byId },
        RenderTemplate: { operationId: 'renderTemplate', parameters: byId },
        DeleteTemplate: { operationId: 'deleteTemplate', parameters: byId },
      },
    },
  },
  {
    method: 'get',
    path: '/templates',
    operationId: 'listTemplates',
    summary: 'List templates',
    tag: 'Templates',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of templates, newest first, without their drafts.', schema: listOf('TemplateSummary') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/templates/{id}',
    operationId: 'getTemplate',
    summary: 'Get a template',
    tag: 'Templates',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: 'The template, its draft and its versions.', schema: ref('Template'), example: template } },
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/templates/{id}/versions/{n}',
    operationId: 'getTemplateVersion',
    summary: 'Get a published version',
    tag: 'Templates',
    permission: 'admin',
    params: { ...idParam, n: { description: 'The version number.', schema: { type: 'integer', minimum: 1 } } },
    responses: { 200: { description: 'The version.', schema: ref('TemplateVersion'), example: version } },
    errors: ['not_found'],
  },
  {
    method: 'patch',
    path: '/templates/{id}',
    operationId: 'updateTemplate',
    summary: "Edit a template's draft",
    description:
      'Any of the create fields; `null` removes `slug`, `html` or `text`; `variables` replaces the list. Published versions never change.',
    tag: 'Templates',
    permission: 'admin',
    params: idParam,
    body: withFields(updateTemplateSchema, { variables: variablesBody }),
    requestExample: { text: 'Hi {{user.first_name}}' },
    responses: { 200: { description: 'The template after the edit.', schema: ref('Template') } },
    errors: ['not_found', 'template_exists'],
  },
  {
    method: 'post',
    path: '/templates/{id}/publish',
    operationId: 'publishTemplate',
    summary: 'Publish the draft as the next version',
    description:
      'The draft must have html or text, parse, stay inside the template language and use only declared variables: otherwise 422 `validation_error`, each fault in `details`.',
    tag: 'Templates',
    permission: 'admin',
    params: idParam,
    responses: { 201: { description: 'The new version.', schema: ref('TemplateVersion'), example: version } },
    errors: ['not_found', 'validation_error'],
    links: {
      201: {
        GetTemplateVersion: {
          operationId: 'getTemplateVersion',
          parameters: { id: '$response.body#/template_id', n: '$response.body#/version' },
        },
      },
    },
  },
  {
    method: 'delete',
    path: '/templates/{id}',
    operationId: 'deleteTemplate',
    summary: 'Delete a template and its versions',
    tag: 'Templates',
    permission: 'admin',
    params: idParam,
    responses: {
      200: {
        description: 'The template as it was, without its draft.',
        schema: ref('DeletedTemplate'),
        example: { ...summary, deleted: true },
      },
    },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/templates/{id}/render',
    operationId: 'renderTemplate',
    summary: 'Render a template without sending',
    description:
      '`version`: a published number, `latest` (the default) or `draft` (which must pass the publish checks first). `data` as in a send; the same errors as a send.',
    tag: 'Templates',
    permission: 'admin',
    params: idParam,
    body: withFields(renderTemplateSchema, { version: renderVersion }),
    requestExample: { version: 'latest', data: { user: { first_name: 'Ann' } } },
    responses: {
      200: {
        description: 'What a send would store.',
        schema: ref('RenderedTemplate'),
        example: {
          object: 'rendered_template',
          template: { id, version: 1 },
          subject: 'Welcome, Ann',
          html: '<p>Hi Ann</p>',
          text: 'Hi Ann',
        },
      },
    },
    errors: ['not_found', 'template_not_found', 'template_variables', 'validation_error'],
  },
];
