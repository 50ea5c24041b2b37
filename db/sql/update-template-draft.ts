import type { EntityManager } from '@mikro-orm/postgresql';
import type { TemplateVariable } from '../entities';

export interface DraftChanges {
  name?: string;
  slug?: string | null;
  subject?: string;
  html?: string | null;
  text?: string | null;
  variables?: TemplateVariable[];
}

/** The changeable fields, each named as its column. */
const COLUMNS: (keyof DraftChanges)[] = ['name', 'slug', 'subject', 'html', 'text', 'variables'];

/**
 * Edits a template's draft and bumps its revision in one statement, so a publish that checked the
 * draft before this edit publishes nothing (publish-template.ts). False when the template is gone.
 * Runs on `em` so the audit entry commits with it.
 */
export async function updateTemplateDraft(
  em: EntityManager,
  p: { templateId: string; organizationId: string; changes: DraftChanges; at: Date },
): Promise<boolean> {
  const entries = COLUMNS.filter((k) => p.changes[k] !== undefined);
  const sets = entries.map((k) => `${k} = ?${k === 'variables' ? '::jsonb' : ''}`);
  const values = entries.map((k) => (k === 'variables' ? JSON.stringify(p.changes[k]) : p.changes[k]));
  const res = await em.execute(
    `update templates set ${[...sets, 'draft_revision = draft_revision + 1', 'updated_at = ?'].join(', ')}
      where id = ? and organization_id = ?`,
    [...values, p.at, p.templateId, p.organizationId],
    'run',
  );
  return (res as unknown as { affectedRows: number }).affectedRows > 0;
}
