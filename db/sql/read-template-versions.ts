import type { Orm } from '../orm';
import type { TemplateVariable } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';

export interface TemplateVersionRow {
  id: string;
  subject: string;
  html: string | null;
  text: string | null;
  variables: TemplateVariable[];
}

const READ: PreparedStatement = {
  name: 'read_template_versions_v1',
  text: 'select id, subject, html, text, variables from template_versions where id = any($1::uuid[])',
};

/** The content of published versions by id: what the render cache compiles on a miss. */
export async function readTemplateVersions(orm: Orm, ids: string[]): Promise<TemplateVersionRow[]> {
  return runPrepared<TemplateVersionRow>(orm, READ, [ids]);
}
