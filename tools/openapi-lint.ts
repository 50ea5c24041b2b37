import SwaggerParser from '@apidevtools/swagger-parser';
import { buildDocument } from '../api/openapi/document';

/**
 * `npm run lint`'s check of the OpenAPI document (api/openapi/document.ts): it builds (operation
 * ids, links and component names are checked then) and is valid OpenAPI 3.1 by swagger-parser
 * (structure, every `$ref` resolves). Prints the errors and exits 1 otherwise.
 */
async function main(): Promise<void> {
  const doc = structuredClone(buildDocument()) as { paths: Record<string, object> };
  await SwaggerParser.validate(doc as unknown as Parameters<typeof SwaggerParser.validate>[0]);
  const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  console.log(`openapi: valid OpenAPI 3.1, ${operations} operations`);
}

main().catch((err: unknown) => {
  const e = err as Error & { details?: unknown[] };
  console.error(`openapi: the document is not valid: ${e.message}`);
  if (e.details) console.error(JSON.stringify(e.details, null, 2));
  process.exit(1);
});
