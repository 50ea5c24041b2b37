/**
 * The search attribute saying how a run ended (its definition's `outcome`), a Keyword: set by the
 * run in its last workflow task (workflows/temporal/binding.ts), registered with the others by
 * the engine (worker/temporal-search-attributes.ts).
 */
export const OUTCOME_ATTRIBUTE = 'SvcOutcome';

/** Patch marking runs that set SvcOutcome as they end; runs recorded before it end as they did. */
export const OUTCOME_PATCH = 'outcome-search-attribute';
