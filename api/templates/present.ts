import type { Template, TemplateVersion } from '../../db/entities';

/** In lists: the template without its draft's parts (a draft may weigh 4 MB). */
export function presentTemplateSummary(t: Pick<Template, 'id' | 'name' | 'slug' | 'latestVersion' | 'createdAt' | 'updatedAt'>) {
  return {
    object: 'template',
    id: t.id,
    name: t.name,
    slug: t.slug,
    latest_version: t.latestVersion || null,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
  };
}

export function presentTemplate(t: Template, versions: Pick<TemplateVersion, 'version' | 'publishedAt'>[]) {
  return {
    ...presentTemplateSummary(t),
    draft: { subject: t.subject, html: t.html, text: t.text, variables: t.variables },
    versions: versions.map((v) => ({ version: v.version, published_at: v.publishedAt.toISOString() })),
  };
}

export function presentVersion(t: Pick<Template, 'id'>, v: TemplateVersion) {
  return {
    object: 'template_version',
    template_id: t.id,
    version: v.version,
    subject: v.subject,
    html: v.html,
    text: v.text,
    variables: v.variables,
    published_at: v.publishedAt.toISOString(),
  };
}
