import type Router from '@koa/router';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Orm } from '../../db/orm';
import { Template, TemplateVersion } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { publishTemplate } from '../../db/sql/publish-template';
import { updateTemplateDraft, type DraftChanges } from '../../db/sql/update-template-draft';
import { ServiceError, notFound } from '../../core/errors';
import { SLUG_RE } from '../../core/contacts/rules';
import { parseVariables } from '../../core/templates/variables';
import { checkPublishable, compileTemplate, renderTemplate, type CompiledTemplate } from '../../core/templates/render';
import { wireBodies } from '../../core/emails/wire-bodies';
import type { TemplateResolver } from '../../core/templates/resolver';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import {
  createTemplateSchema,
  renderTemplateSchema,
  updateTemplateSchema,
  type CreateTemplateBody,
  type RenderTemplateBody,
  type UpdateTemplateBody,
} from './schema';
import { presentTemplate, presentTemplateSummary, presentVersion } from './present';

const templateExists = (slug: string) => new ServiceError('template_exists', `a template "${slug}" exists already`);

/** Runs a write that may meet the slug's unique index, answering 409 template_exists for it. */
async function slugChecked<T>(slug: string | null | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException && slug) throw templateExists(slug);
    throw err;
  }
}

/** A draft edit can race a publish: it is retried against the new revision this many times. */
const PUBLISH_ATTEMPTS = 5;

/** Templates (ADMIN; writes audit-logged), named in paths by id or slug. */
export function templateRoutes(deps: { orm: Orm; maxBodyBytes: number; templates: TemplateResolver }): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');

  async function find(ctx: ApiContext): Promise<Template> {
    const ref = ctx.params.id;
    const organizationId = auth(ctx).organization.id;
    const where = isUuid(ref) ? { id: ref.toLowerCase() } : SLUG_RE.test(ref) ? { slug: ref } : null;
    const template = where ? await deps.orm.em.fork().findOne(Template, { organizationId, ...where }) : null;
    if (!template) throw notFound('template');
    return template;
  }

  const versionsOf = (templateId: string) =>
    deps.orm.em.fork().find(TemplateVersion, { templateId }, { fields: ['version', 'publishedAt'], orderBy: { version: 'asc' } });

  router.post('/templates', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateTemplateBody = await readValidBody(ctx, createTemplateSchema, deps.maxBodyBytes);
    const now = new Date();
    const template = Object.assign(new Template(), {
      id: uuidv7(),
      organizationId: a.organization.id,
      name: body.name,
      slug: body.slug ?? null,
      subject: body.subject,
      html: body.html ?? null,
      text: body.text ?? null,
      variables: body.variables === undefined ? [] : parseVariables(body.variables),
      createdAt: now,
      updatedAt: now,
    });
    const em = deps.orm.em.fork();
    em.persist(template);
    audit(em, a, 'template.created', { type: 'template', id: template.id }, { name: template.name, slug: template.slug });
    await slugChecked(template.slug, () => em.flush());
    ctx.status = 201;
    ctx.body = presentTemplate(template, []);
  });

  router.get('/templates', admin, async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(listQuerySchema, ctx.query);
    const rows = await deps.orm.em.fork().find(
      Template,
      { organizationId: a.organization.id, ...olderThanCursor(q.cursor) },
      {
        fields: ['id', 'name', 'slug', 'latestVersion', 'createdAt', 'updatedAt'],
        orderBy: { createdAt: 'desc', id: 'desc' },
        limit: q.limit + 1,
      },
    );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentTemplateSummary), nextCursor);
  });

  router.get('/templates/:id', admin, async (ctx) => {
    const template = await find(ctx);
    ctx.body = presentTemplate(template, await versionsOf(template.id));
  });

  router.get('/templates/:id/versions/:n', admin, async (ctx) => {
    const template = await find(ctx);
    const n = /^[1-9][0-9]{0,8}$/.test(ctx.params.n) ? Number(ctx.params.n) : null;
    const version = n === null ? null : await deps.orm.em.fork().findOne(TemplateVersion, { templateId: template.id, version: n });
    if (!version) throw notFound('template version');
    ctx.body = presentVersion(template, version);
  });

  router.patch('/templates/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const template = await find(ctx);
    const body: UpdateTemplateBody = await readValidBody(ctx, updateTemplateSchema, deps.maxBodyBytes);
    const changes: DraftChanges = {
      name: body.name,
      slug: body.slug,
      subject: body.subject,
      html: body.html,
      text: body.text,
      variables: body.variables === undefined ? undefined : parseVariables(body.variables),
    };
    const changed = (Object.keys(changes) as (keyof DraftChanges)[]).filter((k) => changes[k] !== undefined);
    const at = new Date();
    if (changed.length) {
      await slugChecked(changes.slug, () =>
        deps.orm.em.fork().transactional(async (em) => {
          if (!(await updateTemplateDraft(em, { templateId: template.id, organizationId: a.organization.id, changes, at }))) {
            throw notFound('template');
          }
          // Field names only: the parts themselves may be megabytes.
          audit(em, a, 'template.updated', { type: 'template', id: template.id }, { changed });
        }),
      );
    }
    const updated = Object.assign(
      template,
      Object.fromEntries(changed.map((k) => [k, changes[k]])),
      changed.length ? { updatedAt: at } : {},
    );
    ctx.body = presentTemplate(updated, await versionsOf(template.id));
  });

  router.post('/templates/:id/publish', admin, async (ctx) => {
    const a = auth(ctx);
    let template = await find(ctx);
    for (let attempt = 1; ; attempt++) {
      checkPublishable(template);
      const versionId = uuidv7();
      const published = await deps.orm.em.fork().transactional(async (em) => {
        const row = await publishTemplate(em, {
          templateId: template.id,
          organizationId: a.organization.id,
          draftRevision: template.draftRevision,
          versionId,
          at: new Date(),
        });
        if (row) audit(em, a, 'template.published', { type: 'template', id: template.id }, { version: row.version });
        return row;
      });
      if (published) {
        const version = Object.assign(new TemplateVersion(), {
          id: published.id,
          templateId: template.id,
          version: published.version,
          subject: template.subject,
          html: template.html,
          text: template.text,
          variables: template.variables,
          publishedAt: new Date(published.published_at),
        });
        ctx.status = 201;
        ctx.body = presentVersion(template, version);
        return;
      }
      // The draft changed (or the template went) since it was read: check the new draft.
      if (attempt === PUBLISH_ATTEMPTS) throw new Error('template draft kept changing while publishing');
      template = await find(ctx);
    }
  });

  router.delete('/templates/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const template = await find(ctx);
    await deps.orm.em.fork().transactional(async (em) => {
      // Versions go by the foreign key's cascade; stored messages keep their template id and version.
      if (!(await em.nativeDelete(Template, { id: template.id, organizationId: a.organization.id }))) throw notFound('template');
      audit(em, a, 'template.deleted', { type: 'template', id: template.id }, { name: template.name, slug: template.slug });
    });
    ctx.body = { ...presentTemplateSummary(template), deleted: true };
  });

  router.post('/templates/:id/render', admin, async (ctx) => {
    const a = auth(ctx);
    const template = await find(ctx);
    const body: RenderTemplateBody = await readValidBody(ctx, renderTemplateSchema, deps.maxBodyBytes);
    let compiled: CompiledTemplate;
    let version: number | 'draft';
    if (body.version === 'draft') {
      // A preview of what publishing would freeze: the publish checks first (422 validation_error).
      checkPublishable(template);
      compiled = compileTemplate(template);
      version = 'draft';
    } else {
      const ref = { id: template.id, slug: null, version: typeof body.version === 'number' ? body.version : null };
      const [resolved] = (await deps.templates.resolve({ organizationId: a.organization.id }, [ref]))!;
      if (resolved instanceof ServiceError) throw resolved;
      compiled = resolved.compiled;
      version = resolved.version;
    }
    const rendered = renderTemplate(compiled, body.data ?? {}, 'refuse');
    // The parts as the recipient gets them: an html fragment in its document (core/emails/wire-bodies.ts).
    ctx.body = {
      object: 'rendered_template',
      template: { id: template.id, version },
      ...rendered,
      ...wireBodies(rendered.html, rendered.text),
    };
  });

  return router;
}
