import type { Orm } from '../../db/orm';
import { resolveTemplates, type TemplateRefRow } from '../../db/sql/resolve-templates';
import { readTemplateVersions } from '../../db/sql/read-template-versions';
import { ServiceError } from '../errors';
import { compileTemplate, type CompiledTemplate } from './render';

/** How a send names a template: by id or slug, a published version number or null for the latest. */
export type TemplateRef = TemplateRefRow;

export interface ResolvedTemplate {
  templateId: string;
  version: number;
  compiled: CompiledTemplate;
}

export const templateNotFound = (ref: TemplateRef) =>
  new ServiceError(
    'template_not_found',
    `no published ${ref.version === null ? 'version' : `version ${ref.version}`} of template ${ref.id ?? ref.slug}`,
    [{ field: 'template', message: 'missing, deleted or not published' }],
  );

/**
 * Published versions compiled once and kept by version id, least recently used first out. Versions
 * never change, so a cached compile is never stale; which version a ref names (the latest, whether
 * the template still exists) is asked of PostgreSQL on every send, one statement per request.
 */
export class TemplateResolver {
  private readonly cache = new Map<string, CompiledTemplate>();
  private cachedSize = 0;

  constructor(
    private readonly orm: Orm,
    /** Source characters the cache may hold (a version's html alone may be 2 MB). */
    private readonly maxCachedSize = 64 * 1024 * 1024,
  ) {}

  /**
   * The versions `refs` name, each or a 422 `template_not_found`, in the organization of a key's
   * token (answers null when it names no live key) or a known organization.
   */
  async resolve(
    scope: { tokenHash: string } | { organizationId: string },
    refs: TemplateRef[],
  ): Promise<(ResolvedTemplate | ServiceError)[] | null> {
    const rows = await resolveTemplates(this.orm, scope, refs);
    if (rows.length === 0 && refs.length > 0) return null;
    const missing = [...new Set(rows.filter((r) => r.version_id !== null && !this.cache.has(r.version_id)).map((r) => r.version_id!))];
    // Held here too: a request naming many large versions may push its own out of the cache.
    const loaded = new Map<string, CompiledTemplate>();
    if (missing.length) {
      for (const v of await readTemplateVersions(this.orm, missing)) {
        const compiled = compileTemplate(v);
        loaded.set(v.id, compiled);
        this.remember(v.id, compiled);
      }
    }
    const out: (ResolvedTemplate | ServiceError)[] = refs.map(templateNotFound);
    for (const r of rows) {
      const compiled = r.version_id !== null ? (loaded.get(r.version_id) ?? this.get(r.version_id)) : undefined;
      if (compiled) out[r.i] = { templateId: r.template_id!, version: r.version!, compiled };
    }
    return out;
  }

  private get(versionId: string): CompiledTemplate | undefined {
    const hit = this.cache.get(versionId);
    if (hit) {
      this.cache.delete(versionId);
      this.cache.set(versionId, hit);
    }
    return hit;
  }

  private remember(versionId: string, compiled: CompiledTemplate) {
    if (this.cache.has(versionId)) return;
    this.cache.set(versionId, compiled);
    this.cachedSize += compiled.size;
    for (const [id, c] of this.cache) {
      if (this.cachedSize <= this.maxCachedSize || this.cache.size === 1) break;
      this.cache.delete(id);
      this.cachedSize -= c.size;
    }
  }
}
