import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import { Email, Recipient, EmailEvent, Attachment, Suppression } from '../../db/entities';
import { uuidv7 } from '../../server/ids';
import type { AuthState } from '../middleware/auth';
import type { PreparedEmail } from './prepare';

export interface Accepted {
  id: string;
  suppressed: string[];
  replayed: boolean;
}

export interface AcceptDeps {
  orm: Orm;
  /** Wakes the outbox dispatcher, which starts the workflows of stored messages. */
  dispatch: () => void;
}

/**
 * Stores prepared messages in one transaction (the outbox), then wakes the dispatcher that starts
 * their workflows. Idempotency keys are unique per organization in the database, so concurrent
 * duplicates resolve to one message; a replay of a message stored but never queued queues it.
 */
export async function acceptEmails(deps: AcceptDeps, auth: AuthState, items: PreparedEmail[]): Promise<Accepted[]> {
  const orgId = auth.organization.id;
  const em = deps.orm.em.fork();
  const results: (Accepted | undefined)[] = new Array(items.length);
  let wake = false;

  const keys = [...new Set(items.map((i) => i.idempotencyKey).filter((k): k is string => k !== null))];
  const existing = new Map<string, Pick<Email, 'id' | 'idempotencyKey' | 'enqueuedAt'>>();
  if (keys.length > 0) {
    for (const e of await em.find(Email, { organizationId: orgId, idempotencyKey: { $in: keys } }, { fields: ['id', 'idempotencyKey', 'enqueuedAt'] })) {
      existing.set(e.idempotencyKey!, e);
    }
  }

  const fresh: { index: number; item: PreparedEmail }[] = [];
  const claimedInRequest = new Map<string, number>();
  items.forEach((item, index) => {
    const key = item.idempotencyKey;
    const prior = key !== null ? existing.get(key) : undefined;
    if (prior) {
      results[index] = { id: prior.id, suppressed: [], replayed: true };
      if (!prior.enqueuedAt) wake = true;
    } else if (key !== null && claimedInRequest.has(key)) {
      // Same key twice in one batch: the later item is a replay of the earlier one.
      results[index] = { id: '', suppressed: [], replayed: true };
    } else {
      if (key !== null) claimedInRequest.set(key, index);
      fresh.push({ index, item });
    }
  });

  if (fresh.length > 0) {
    const addresses = [...new Set(fresh.flatMap((f) => f.item.recipients.map((r) => r.address)))];
    const suppressedSet = new Set(
      (await em.find(Suppression, { organizationId: orgId, email: { $in: addresses } }, { fields: ['email'] })).map((s) => s.email),
    );
    try {
      const stored = await em.transactional(async (tx) => fresh.map((f) => stage(tx, auth, f.item, suppressedSet)));
      stored.forEach((s, i) => {
        results[fresh[i].index] = { id: s.id, suppressed: s.suppressed, replayed: false };
        if (s.queued) wake = true;
      });
    } catch (err) {
      if (!(err instanceof UniqueConstraintViolationException)) throw err;
      // A concurrent request took one of the keys: store one by one so each item resolves on its own.
      for (const f of fresh) {
        const one = await storeOne(deps.orm, auth, f.item, suppressedSet);
        results[f.index] = one.result;
        if (one.enqueue) wake = true;
      }
    }
  }

  items.forEach((item, index) => {
    if (results[index]!.id === '') results[index]!.id = results[claimedInRequest.get(item.idempotencyKey!)!]!.id;
  });
  if (wake) deps.dispatch();
  return results as Accepted[];
}

async function storeOne(orm: Orm, auth: AuthState, item: PreparedEmail, suppressedSet: Set<string>): Promise<{ result: Accepted; enqueue: boolean }> {
  try {
    const s = await orm.em.fork().transactional(async (tx) => stage(tx, auth, item, suppressedSet));
    return { result: { id: s.id, suppressed: s.suppressed, replayed: false }, enqueue: s.queued };
  } catch (err) {
    if (!(err instanceof UniqueConstraintViolationException) || item.idempotencyKey === null) throw err;
    const prior = await orm.em.fork().findOneOrFail(Email, { organizationId: auth.organization.id, idempotencyKey: item.idempotencyKey }, { fields: ['id', 'enqueuedAt'] });
    return { result: { id: prior.id, suppressed: [], replayed: true }, enqueue: !prior.enqueuedAt };
  }
}

function stage(em: EntityManager, auth: AuthState, item: PreparedEmail, suppressedSet: Set<string>): { id: string; suppressed: string[]; queued: boolean } {
  const now = new Date();
  const id = uuidv7(now.getTime());
  const suppressed = item.recipients.filter((r) => suppressedSet.has(r.address));
  const queued = suppressed.length < item.recipients.length;
  const email = Object.assign(new Email(), {
    id,
    organizationId: auth.organization.id,
    apiKeyId: auth.key.id,
    domainId: item.domain.id,
    from: item.from,
    to: item.to,
    cc: item.cc,
    bcc: item.bcc,
    replyTo: item.replyTo,
    subject: item.subject,
    html: item.html,
    text: item.text,
    headers: item.headers,
    tags: item.tags,
    kind: item.kind,
    mode: auth.key.mode,
    status: queued ? 'queued' : 'suppressed',
    scheduledAt: item.scheduledAt,
    messageId: `<${id}@${item.domain.name}>`,
    idempotencyKey: item.idempotencyKey,
    // Nothing to run for a fully suppressed message, so it never waits for the enqueue sweep.
    enqueuedAt: queued ? null : now,
    createdAt: now,
    updatedAt: now,
  } satisfies Partial<Email>);
  em.persist(email);
  for (const r of item.recipients) {
    const isSuppressed = suppressedSet.has(r.address);
    em.persist(Object.assign(new Recipient(), { id: uuidv7(), emailId: id, address: r.address, field: r.field, state: isSuppressed ? 'suppressed' : 'pending', updatedAt: now }));
    em.persist(Object.assign(new EmailEvent(), { emailId: id, organizationId: auth.organization.id, type: isSuppressed ? 'suppressed' : 'queued', recipient: r.address, at: now }));
  }
  item.attachments.forEach((a, position) => {
    em.persist(Object.assign(new Attachment(), { id: uuidv7(), emailId: id, position, filename: a.filename, contentType: a.contentType, size: a.content.length, content: a.content }));
  });
  return { id, suppressed: suppressed.map((r) => r.given), queued };
}

