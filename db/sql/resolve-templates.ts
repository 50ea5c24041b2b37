import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { keyForToken } from './key-for-token';

/** A template named in a send: by id or by slug, and a published version number or null for the latest. */
export interface TemplateRefRow {
  id: string | null;
  slug: string | null;
  version: number | null;
}

export interface ResolvedRow {
  organization_id: string;
  /** The ref's position in the request. */
  i: number;
  template_id: string | null;
  version_id: string | null;
  version: number | null;
}

/**
 * Finds the published versions that sends name, in the organization of a key's token (a single send,
 * authenticated later by its store statement) or of a known organization. Answers no rows when the
 * token names no live key; otherwise one row per ref, with nulls where the template is missing or
 * has no such version (latest of a never-published template: version 0, no row). Versions are
 * immutable, so callers cache what they compile by version id.
 */
const RESOLVE_SQL = `
with org as (
  select a.organization_id from ${keyForToken('$1')} where $2::uuid is null
  union all
  select $2::uuid where $2::uuid is not null
)
select org.organization_id, r.i, t.id as template_id, v.id as version_id, v.version
  from org
 cross join jsonb_to_recordset($3::jsonb) as r(i int, id uuid, slug text, version int)
  left join lateral (
    select t.id, t.latest_version from templates t where t.organization_id = org.organization_id and t.id = r.id
    union all
    select t.id, t.latest_version from templates t where t.organization_id = org.organization_id and t.slug = r.slug and r.id is null
  ) t on true
  left join template_versions v on v.template_id = t.id and v.version = coalesce(r.version, t.latest_version)`;

const RESOLVE: PreparedStatement = { name: 'resolve_templates_v2', text: RESOLVE_SQL };

export async function resolveTemplates(
  orm: Orm,
  scope: { tokenHash: string } | { organizationId: string },
  refs: TemplateRefRow[],
): Promise<ResolvedRow[]> {
  return runPrepared<ResolvedRow>(orm, RESOLVE, [
    'tokenHash' in scope ? scope.tokenHash : null,
    'organizationId' in scope ? scope.organizationId : null,
    JSON.stringify(refs.map((r, i) => ({ i, ...r }))),
  ]);
}
