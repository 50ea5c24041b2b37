import type { JsonSchema, Operation } from './operation';
import * as reference from './openapi';
import * as emails from '../emails/openapi';
import * as keys from '../keys/openapi';
import * as domains from '../domains/openapi';
import * as organization from '../organization/openapi';
import * as auditLog from '../audit-log/openapi';
import * as contacts from '../contacts/openapi';
import * as topics from '../topics/openapi';
import * as segments from '../segments/openapi';
import * as suppressions from '../suppressions/openapi';
import * as events from '../events/openapi';
import * as templates from '../templates/openapi';
import * as webhooks from '../webhooks/openapi';
import * as broadcasts from '../broadcasts/openapi';
import * as automations from '../automations/openapi';

/**
 * Every resource's operations and component schemas (api/<resource>/openapi.ts exports
 * `operations` and `schemas`), in the order the reference page shows them.
 */
interface Module {
  operations: Operation[];
  schemas: Record<string, JsonSchema>;
}

const MODULES: Module[] = [
  emails,
  domains,
  keys,
  organization,
  auditLog,
  contacts,
  topics,
  segments,
  suppressions,
  events,
  templates,
  webhooks,
  broadcasts,
  automations,
  reference,
];

export const allOperations: Operation[] = MODULES.flatMap((m) => m.operations);

export const allSchemas: Record<string, JsonSchema> = {};
for (const m of MODULES) {
  for (const [name, schema] of Object.entries(m.schemas)) {
    if (name in allSchemas) throw new Error(`component schema ${name} is declared twice`);
    allSchemas[name] = schema;
  }
}
