import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { Segment } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { listContacts } from '../../db/sql/list-contacts';
import { readContact } from '../../db/sql/read-contact';
import { deleteContact } from '../../db/sql/delete-contact';
import type { AuthState } from '../../core/auth';
import { ServiceError, notFound, validationError } from '../../core/errors';
import { contactRef } from '../../core/contacts/lookup';
import { parseContactUpsert, parseSubscriptionChanges } from '../../core/contacts/schema';
import { testKeyRefused, upsertContact } from '../../core/contacts/upsert';
import { changeSubscriptions } from '../../core/contacts/subscriptions';
import { GroupUpsert } from '../../core/contacts/group-upsert';
import { resolveConditions } from '../../core/segments/filter';
import type { AudienceCondition } from '../../db/sql/audience-conditions';
import { deferredAuth, requirePermission } from '../middleware/auth';
import { readJsonBody } from '../middleware/json-body';
import { apiRouter, auth, type ApiState } from '../state';
import { validateQuery } from '../validate';
import { decodeCursor, listBody, pageOf } from '../cursor';
import { audit } from '../audit';
import { listContactsQuerySchema, type ListContactsQuery } from './schema';
import { presentContact } from './present';

/** Test keys read contacts but never write them (spec: Test mode). */
function liveKey(a: AuthState): void {
  if (a.key.mode === 'test') throw testKeyRefused();
}

/** Whole-audience operations (list, delete): FULL or higher, without a domain restriction. */
function unrestricted(a: AuthState, what: string): void {
  if (a.key.domainIds !== null) throw new ServiceError('forbidden_domain', `a domain-restricted key cannot ${what}`);
}

export function contactRoutes(deps: { orm: Orm; log: Logger; maxBodyBytes: number; automations?: () => void }): Router<ApiState> {
  const router = apiRouter();
  const { orm } = deps;
  const upserts = new GroupUpsert(orm, deps.log);
  const full = requirePermission('full');

  // Test keys read contacts but never write them: refused (403) before any complaint about the body.
  router.post('/contacts', deferredAuth(orm, liveKey), async (ctx) => {
    const tokenHash = ctx.state.credentials!.tokenHash;
    const input = parseContactUpsert(await readJsonBody(ctx, deps.maxBodyBytes));
    ctx.state.charged = true; // by the upsert statement, which authenticates the request
    const { contact, created } = await upsertContact(upserts, tokenHash, input);
    // A creation or a subscription wrote trigger rows: the automation dispatcher turns them into runs.
    if (created || input.topics.length) deps.automations?.();
    ctx.status = created ? 201 : 200;
    ctx.body = { ...presentContact(contact), created };
  });

  router.get('/contacts', full, async (ctx) => {
    const a = auth(ctx);
    unrestricted(a, 'list the whole audience');
    const q: ListContactsQuery = validateQuery(listContactsQuerySchema, ctx.query);
    if ((q.topic === undefined) !== (q.state === undefined))
      throw validationError('topic and state filter together', [
        { field: q.topic === undefined ? 'topic' : 'state', message: 'needs the other' },
      ]);
    const em = orm.em.fork();
    const conditions: AudienceCondition[] = [];
    if (q.status !== undefined) conditions.push({ status: q.status });
    if (q.topic !== undefined)
      conditions.push(...(await resolveConditions(em, a.organization.id, [{ topic: q.topic, state: q.state! }], true)));
    if (q.segment_id !== undefined) {
      const segment = isUuid(q.segment_id) ? await em.findOne(Segment, { id: q.segment_id, organizationId: a.organization.id }) : null;
      if (!segment) throw notFound('segment');
      conditions.push(...(await resolveConditions(em, a.organization.id, segment.filter.all, false)));
    }
    const limit = q.limit;
    const rows = await listContacts(orm, {
      organizationId: a.organization.id,
      conditions,
      emailPrefix: q.email?.trim().toLowerCase(),
      after: q.cursor !== undefined ? decodeCursor(q.cursor) : undefined,
      limit,
    });
    const { page, nextCursor } = pageOf(rows, limit, (r) => ({ createdAt: r.created_at, id: r.id }));
    ctx.body = listBody(page.map(presentContact), nextCursor);
  });

  router.get('/contacts/:id', async (ctx) => {
    const contact = await readContact(orm, auth(ctx).organization.id, contactRef(ctx.params.id));
    if (!contact) throw notFound('contact');
    ctx.body = presentContact(contact);
  });

  router.post('/contacts/:id/subscriptions', async (ctx) => {
    const a = auth(ctx);
    liveKey(a);
    const ref = contactRef(ctx.params.id);
    const changes = parseSubscriptionChanges(await readJsonBody(ctx, deps.maxBodyBytes));
    ctx.body = presentContact(await changeSubscriptions(orm, a.organization.id, ref, changes));
    if (changes.some((c) => c.state === 'subscribed')) deps.automations?.();
  });

  router.delete('/contacts/:id', async (ctx) => {
    const a = auth(ctx);
    liveKey(a);
    if (a.key.permission === 'send') throw new ServiceError('forbidden', 'deleting a contact needs a FULL key');
    unrestricted(a, 'delete contacts');
    const ref = contactRef(ctx.params.id);
    await orm.em.fork().transactional(async (em) => {
      const contact = await deleteContact(em, a.organization.id, ref);
      if (!contact) throw notFound('contact');
      audit(em, a, 'contact.deleted', { type: 'contact', id: contact.id }, { email: contact.email });
      ctx.body = { ...presentContact(contact), deleted: true };
    });
  });

  return router;
}
