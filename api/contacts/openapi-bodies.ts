import type { AnySchema } from 'yup';
import type { JsonSchema } from '../openapi/operation';
import { yupToJsonSchema } from '../openapi/yup-json-schema';
import { MAX_PROPERTY_STRING, PROPERTY_KEY_RE, SLUG_RE } from '../../core/contacts/rules';
import { changeSchema, changesSchema, upsertSchema } from '../../core/contacts/schema';

/**
 * Request bodies whose routes check part of the shape in code (parseProperties, parseVariables,
 * parseSegmentFilter): the route's yup schema, converted, with those fields described by the rules
 * the code applies (never stricter than it: what JSON Schema cannot say is left out).
 */
export function withFields(schema: AnySchema, fields: Record<string, JsonSchema>): { json: JsonSchema } {
  const json = yupToJsonSchema(schema);
  return { json: { ...json, properties: { ...(json.properties as Record<string, JsonSchema>), ...fields } } };
}

/** A property patch (core/contacts/rules.ts parseProperties): scalars, `null` deletes the key. */
export const propertiesPatch = (what: string): JsonSchema => ({
  type: 'object',
  description: `${what}: names 1–64 of \`A-Za-z0-9_.-\`; values a string (up to ${MAX_PROPERTY_STRING} characters), a finite number, a boolean, or \`null\` to delete the key. At most 100 keys after merging with the stored ones.`,
  propertyNames: { pattern: PROPERTY_KEY_RE.source },
  additionalProperties: { type: ['string', 'number', 'boolean', 'null'], maxLength: MAX_PROPERTY_STRING },
});

const upsertTopics = (yupToJsonSchema(upsertSchema).properties as Record<string, JsonSchema>).topics;

/** POST /contacts (parseContactUpsert); a topic slug that breaks the slug rule is refused too (422 unknown_topic). */
export const upsertBody = withFields(upsertSchema, {
  properties: propertiesPatch('Merged into the stored properties'),
  topics: { ...upsertTopics, items: { ...(upsertTopics.items as JsonSchema), pattern: SLUG_RE.source } },
});

/** POST /contacts/:id/subscriptions (parseSubscriptionChanges): one change, or `subscriptions` (chosen by that field's presence). */
export const subscriptionsBody: { json: JsonSchema } = {
  json: { oneOf: [yupToJsonSchema(changeSchema), yupToJsonSchema(changesSchema)] },
};
