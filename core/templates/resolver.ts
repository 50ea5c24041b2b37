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

const TEMPLATE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Names what was asked for the way it was asked (issue 51: `{"id": "welcome"}` answered "no
 * published version of template welcome" when welcome was a published slug).
 */
export const templateNotFound = (ref: TemplateRef) => {
  const version = ref.version === null ? 'no published version' : `no published version ${ref.version}`;
  const named = ref.id !== null ? `id ${ref.id}` : `slug ${ref.slug}`;
  const hint =
    ref.id !== null && !TEMPLATE_ID.test(ref.id)
      ? `: template.id takes a template's id (a UUID); a slug such as ${ref.id} goes in template.slug`
      : '';
  return new ServiceError('template_not_found', `${version} of the template with ${named}${hint}`, [
    { field: 'template', message: 'missing, deleted or not published' },
  ]);
};

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
 *   again from a `fresh` lookup (core/emails/submit.ts). A template deleted or published
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
    const known = 'organizationId' in scope ? scope.organizationId : this.organizations.get(scope.tokenHash);
    const found: (Resolution | undefined)[] = [];
    const ask: number[] = [];
    refs.forEach((ref, i) => {
      found[i] = opts.fresh || known === undefined ? undefined : this.resolutions.get(keyOf(known, ref));
      if (found[i] === undefined) ask.push(i);
    });
    if (ask.length) {
      const rows = await resolveTemplates(
        this.orm,
        scope,
        ask.map((i) => refs[i]),
      );
      if (rows.length === 0) return null;
      const organizationId = rows[0].organization_id;
      if ('tokenHash' in scope) this.organizations.set(scope.tokenHash, organizationId);
      for (const row of rows) {
        if (row.version_id === null) continue;
        const i = ask[row.i];
        found[i] = { templateId: row.template_id!, versionId: row.version_id, version: row.version! };
        this.resolutions.set(keyOf(organizationId, refs[i]), found[i]!);
      }
    }
    // Held per ref, not only in the cache: a request naming many large versions may push its own out.
    const compiled = found.map((f) => f && this.get(f.versionId));
    const missing = [...new Set(found.flatMap((f, i) => (f && !compiled[i] ? [f.versionId] : [])))];
    if (missing.length) {
      for (const v of await readTemplateVersions(this.orm, missing)) {
        const c = compileTemplate(v);
        this.remember(v.id, c);
        found.forEach((f, i) => f?.versionId === v.id && (compiled[i] = c));
      }
    }
    return refs.map((ref, i) => {
      const f = found[i];
      const c = compiled[i];
      // A version remembered but gone by now (its template deleted) is not found.
      return f && c ? { ...f, latest: ref.version === null, compiled: c } : templateNotFound(ref);
    });
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
