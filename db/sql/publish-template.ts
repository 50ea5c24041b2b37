import type { EntityManager } from '@mikro-orm/postgresql';
import type { PgTimestamp } from './pg-types';

export interface PublishedRow {
  id: string;
  version: number;
  published_at: PgTimestamp;
}

/**
 * Freezes a template's draft as its next version in one statement: the update takes the
 * template's row lock, so concurrent publishes number 1, 2, … in turn. It publishes only the
 * draft revision the caller checked: null when the template is gone or its draft changed since
 * (the caller reads and checks again). Runs on `em` so the audit entry commits with it.
 */
export async function publishTemplate(
  em: EntityManager,
  p: { templateId: string; organizationId: string; draftRevision: number; versionId: string; at: Date },
): Promise<PublishedRow | null> {
  const [row] = await em.execute<PublishedRow[]>(
    `with t as (
       update templates set latest_version = latest_version + 1, updated_at = ?
        where id = ? and organization_id = ? and draft_revision = ?
       returning id, latest_version, subject, html, text, variables
     )
     insert into template_versions (id, template_id, version, subject, html, text, variables, published_at)
     select ?, t.id, t.latest_version, t.subject, t.html, t.text, t.variables, ? from t
     returning id, version, published_at`,
    [p.at, p.templateId, p.organizationId, p.draftRevision, p.versionId, p.at],
  );
  return row ?? null;
}
