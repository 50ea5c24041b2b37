import type { Orm } from '../../db/orm';
import { resolveTemplates, type TemplateRefRow } from '../../db/sql/resolve-templates';
import { readTemplateVersions } from '../../db/sql/read-template-versions';
import { ServiceError } from '../errors';
import { compileTemplate, type CompiledTemplate } from './render';

/** How a send names a template: by id or slug, a published version number or null for the latest. */
export type TemplateRef = TemplateRefRow;

export interface ResolvedTemplate {
  templateId: string;
  versionId: string;
  version: number;
  /** Resolved as the latest: the store statement checks it still is. */
  latest: boolean;
  compiled: CompiledTemplate;
}

export type ResolveScope = { tokenHash: string } | { organizationId: string };

export const templateNotFound = (ref: TemplateRef) =>
  new ServiceError(
    'template_not_found',
    `no published ${ref.version === null ? 'version' : `version ${ref.version}`} of template ${ref.id ?? ref.slug}`,
    [{ field: 'template', message: 'missing, deleted or not published' }],
  );

const keyOf = (organizationId: string, r: TemplateRef) => `${organizationId}|${r.id ?? ''}|${r.slug ?? ''}|${r.version ?? ''}`;

/** Which version a ref named when last asked. */
interface Resolution {
  templateId: string;
  versionId: string;
  version: number;
}

/** A Map that forgets its oldest entries past a size. */
class Bounded<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }
  override set(key: K, value: V): this {
    super.delete(key);
    super.set(key, value);
    for (const k of this.keys()) {
      if (this.size <= this.max) break;
      this.delete(k);
    }
    return this;
  }
}

/**
 * Finds the published versions sends name, and compiles each version once.
 *
 * - Compiled versions are kept by version id, least recently used out first. Versions never
 *   change, so a compiled one is never stale.
 * - Which version a ref names (the latest, whether the template still exists) is remembered too,
 *   so a send costs no round trip of its own for it. PostgreSQL still decides: the store statement
 *   stores a message only if its template is still there and, for `latest`, still at that version
 *   (db/sql/store-emails.ts); otherwise the message comes back `template_changed` and is rendered
 *   again from a `fresh` lookup (core/emails/render-templates.ts). A template deleted or published
 *   a moment ago therefore never sends the old version, on any process.
 * - A token's organization never changes; it is remembered so sends by different keys of one
 *   organization share the remembered refs. The store statement authenticates every send anyway.
 */
export class TemplateResolver {
  private readonly compiled = new Map<string, CompiledTemplate>();
  private compiledSize = 0;
  private readonly resolutions = new Bounded<string, Resolution>(10_000);
  private readonly organizations = new Bounded<string, string>(10_000);

  constructor(
    private readonly orm: Orm,
    /** Source characters the compiled cache may hold (a version's html alone may be 2 MB). */
    private readonly maxCompiledSize = 64 * 1024 * 1024,
  ) {}

  /**
   * The versions `refs` name, each or a 422 `template_not_found`, in the organization of a key's
   * token (null when it names no live key) or a known organization. `fresh` asks PostgreSQL even
   * for refs resolved before.
   */
  async resolve(
    scope: ResolveScope,
    refs: TemplateRef[],
    opts: { fresh?: boolean } = {},
  ): Promise<(ResolvedTemplate | ServiceError)[] | null> {
    const org = 'organizationId' in scope ? scope.organizationId : this.organizations.get(scope.tokenHash);
    if (!opts.fresh && org !== undefined) {
      // The common case, a send whose ref and version were seen before: no lookup, no allocation beyond the answer.
      const hits: ResolvedTemplate[] = [];
      for (const ref of refs) {
        const f = this.resolutions.get(keyOf(org, ref));
        const compiled = f && this.get(f.versionId);
        if (!compiled) break;
        hits.push({ templateId: f.templateId, versionId: f.versionId, version: f.version, latest: ref.version === null, compiled });
      }
      if (hits.length === refs.length) return hits;
    }
    const found: (Resolution | undefined)[] = refs.map((r) =>
      opts.fresh || org === undefined ? undefined : this.resolutions.get(keyOf(org, r)),
    );
    const ask = refs.map((r, i) => ({ r, i })).filter(({ i }) => found[i] === undefined);
    if (ask.length) {
      const rows = await resolveTemplates(
        this.orm,
        scope,
        ask.map(({ r }) => r),
      );
      if (rows.length === 0) return null;
      const organizationId = rows[0].organization_id;
      if ('tokenHash' in scope) this.organizations.set(scope.tokenHash, organizationId);
      for (const row of rows) {
        if (row.version_id === null) continue;
        const { r, i } = ask[row.i];
        found[i] = { templateId: row.template_id!, versionId: row.version_id, version: row.version! };
        this.resolutions.set(keyOf(organizationId, r), found[i]!);
      }
    }
    const missing = [...new Set(found.filter((f) => f !== undefined && !this.compiled.has(f.versionId)).map((f) => f!.versionId))];
    // Held here too: a request naming many large versions may push its own out of the cache.
    const loaded = new Map<string, CompiledTemplate>();
    if (missing.length) {
      for (const v of await readTemplateVersions(this.orm, missing)) {
        const c = compileTemplate(v);
        loaded.set(v.id, c);
        this.remember(v.id, c);
      }
    }
    return refs.map((ref, i) => {
      const f = found[i];
      const compiled = f && (loaded.get(f.versionId) ?? this.get(f.versionId));
      // A version remembered but gone by now (its template deleted) is not found.
      if (!f || !compiled) return templateNotFound(ref);
      return { ...f, latest: ref.version === null, compiled };
    });
  }

  /** The organization a scope names, when known (a token's, once a lookup by it found its key). */
  organizationOf(scope: ResolveScope): string | undefined {
    return 'organizationId' in scope ? scope.organizationId : this.organizations.get(scope.tokenHash);
  }

  private get(versionId: string): CompiledTemplate | undefined {
    const hit = this.compiled.get(versionId);
    if (hit) {
      this.compiled.delete(versionId);
      this.compiled.set(versionId, hit);
    }
    return hit;
  }

  private remember(versionId: string, c: CompiledTemplate) {
    if (this.compiled.has(versionId)) return;
    this.compiled.set(versionId, c);
    this.compiledSize += c.size;
    for (const [id, old] of this.compiled) {
      if (this.compiledSize <= this.maxCompiledSize || this.compiled.size === 1) break;
      this.compiled.delete(id);
      this.compiledSize -= old.size;
    }
  }
}
