import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { Connection } from '@temporalio/client';
import type { Logger } from 'pino';
import type { RunLabels } from './engine';
import { OUTCOME_ATTRIBUTE } from '../workflows/temporal/outcome';

/**
 * What an operator filters workflows by in the Temporal UI or `temporal workflow list --query`:
 * `SvcOrganization = '<org id>' AND SvcMode = 'live'`. A batch of messages carries each of its
 * organizations and kinds, so the lists are keyword lists. The dev server registers them at
 * start (tools/temporal-tools.ts); on a cluster the engine adds any that are missing when it
 * connects, or logs why it could not (docs/temporal.md).
 */
export const SEARCH_ATTRIBUTES = {
  organization: defineSearchAttributeKey('SvcOrganization', SearchAttributeType.KEYWORD_LIST),
  mode: defineSearchAttributeKey('SvcMode', SearchAttributeType.KEYWORD),
  stream: defineSearchAttributeKey('SvcStream', SearchAttributeType.KEYWORD),
  kind: defineSearchAttributeKey('SvcKind', SearchAttributeType.KEYWORD_LIST),
  /** Set by the run itself as it ends (workflows/temporal/binding.ts), where its definition says how. */
  outcome: defineSearchAttributeKey(OUTCOME_ATTRIBUTE, SearchAttributeType.KEYWORD),
};

/**
 * The most bytes one list attribute's value may take, encoded (JSON). The server refuses a start
 * whose value is larger than `limit.searchAttributesSizeOfValue` (2 KB by default): about 50
 * organization ids. A batch run of many organizations is labelled with the first ones that fit,
 * rather than not started at all.
 */
export const MAX_LIST_BYTES = 2000;

function fitted(values: string[]): string[] {
  const kept: string[] = [];
  let bytes = 2; // []
  for (const v of values) {
    bytes += Buffer.byteLength(JSON.stringify(v)) + (kept.length ? 1 : 0);
    if (bytes > MAX_LIST_BYTES) break;
    kept.push(v);
  }
  return kept;
}

export function searchAttributePairs(labels: RunLabels): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [];
  const uniq = (v: (string | null | undefined)[]) => fitted([...new Set(v.filter((s): s is string => !!s))]);
  const orgs = uniq(labels.organizations ?? []);
  const kinds = uniq(labels.kinds ?? []);
  if (orgs.length) pairs.push({ key: SEARCH_ATTRIBUTES.organization, value: orgs });
  if (labels.mode) pairs.push({ key: SEARCH_ATTRIBUTES.mode, value: labels.mode });
  if (labels.stream) pairs.push({ key: SEARCH_ATTRIBUTES.stream, value: labels.stream });
  if (kinds.length) pairs.push({ key: SEARCH_ATTRIBUTES.kind, value: kinds });
  return pairs;
}

const INDEXED_TYPE: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  KEYWORD: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  KEYWORD_LIST: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

/** `Name=Type` for `temporal server start-dev --search-attribute`. */
export function searchAttributeFlags(): string[] {
  const cli: Record<string, string> = { KEYWORD: 'Keyword', KEYWORD_LIST: 'KeywordList' };
  return Object.values(SEARCH_ATTRIBUTES).flatMap((k) => ['--search-attribute', `${k.name}=${cli[k.type]}`]);
}

/**
 * Makes sure the namespace has every search attribute the engine sets, adding the missing ones
 * (the operator API; a dev server and a self-hosted cluster allow it). False when they are not
 * all there and cannot be added (a Temporal Cloud key without the right, say): runs then start
 * without them, and the log says which to create.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string, log: Logger): Promise<boolean> {
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  try {
    const have = await connection.operatorService.listSearchAttributes({ namespace });
    const known = new Set([...Object.keys(have.customAttributes ?? {}), ...Object.keys(have.systemAttributes ?? {})]);
    const missing = wanted.filter((k) => !known.has(k.name));
    if (missing.length === 0) return true;
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((k) => [k.name, INDEXED_TYPE[k.type]])),
    });
    log.info({ added: missing.map((k) => k.name) }, 'temporal search attributes registered');
    return true;
  } catch (err) {
    log.warn(
      { err, wanted: wanted.map((k) => `${k.name}=${k.type}`) },
      'temporal search attributes missing and not registrable; runs start without them (create them with temporal operator search-attribute create)',
    );
    return false;
  }
}
