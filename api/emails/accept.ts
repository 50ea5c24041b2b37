import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import { Email, Recipient, EmailEvent, Attachment, Suppression } from '../../db/entities';
import { uuidv7 } from '../../server/ids';
import type { Engine, SendEmailJob } from '../../worker/engine';
import type { Logger } from '../../server/logger';
import type { AuthState } from '../middleware/auth';
import type { PreparedEmail } from './prepare';

export interface Accepted {
  id: string;
  suppressed: string[];
  replayed: boolean;
}

export interface AcceptDeps {
  orm: Orm;
  engine: Engine;
  log: Logger;
}

/**
 * Stores prepared messages in one transaction, then starts their workflows. Idempotency keys are
 * unique per organization in the database, so concurrent duplicates resolve to one message; a
 * replay of a message that was stored but never queued queues it.
 */
export async function acceptEmails(deps: AcceptDeps, auth: AuthState, items: PreparedEmail[]): Promise<Accepted[]> {
  const orgId = auth.organization.id;
  const em = deps.orm.em.fork();
  const results: (Accepted | undefined)[] = new Array(items.length);
  const toEnqueue: SendEmailJob[] = [];

  const keys = [...new Set(items.map((i) => i.idempotencyKey).filter((k): k is string => k !== null))];
  const existing = new Map<string, Pick<Email, 'id' | 'idempotencyKey' | 'enqueuedAt' | 'mode' | 'scheduledAt'>>();
  if (keys.length > 0) {
    for (const e of await em.find(Email, { organizationId: orgId, idempotencyKey: { $in: keys } }, { fields: ['id', 'idempotencyKey', 'enqueuedAt', 'mode', 'scheduledAt'] })) {
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
      if (!prior.enqueuedAt) toEnqueue.push(jobOf(prior));
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
        if (s.queued) toEnqueue.push(jobOf(s.email));
      });
    } catch (err) {
      if (!(err instanceof UniqueConstraintViolationException)) throw err;
      // A concurrent request took one of the keys: store one by one so each item resolves on its own.
      for (const f of fresh) {
        const one = await storeOne(deps.orm, auth, f.item, suppressedSet);
        results[f.index] = one.result;
        if (one.enqueue) toEnqueue.push(one.enqueue);
      }
    }
  }

  items.forEach((item, index) => {
    if (results[index]!.id === '') results[index]!.id = results[claimedInRequest.get(item.idempotencyKey!)!]!.id;
  });
  await enqueue(deps, toEnqueue);
  return results as Accepted[];
}

async function storeOne(orm: Orm, auth: AuthState, item: PreparedEmail, suppressedSet: Set<string>): Promise<{ result: Accepted; enqueue: SendEmailJob | null }> {
  try {
    const s = await orm.em.fork().transactional(async (tx) => stage(tx, auth, item, suppressedSet));
    return { result: { id: s.id, suppressed: s.suppressed, replayed: false }, enqueue: s.queued ? jobOf(s.email) : null };
  } catch (err) {
    if (!(err instanceof UniqueConstraintViolationException) || item.idempotencyKey === null) throw err;
    const prior = await orm.em.fork().findOneOrFail(Email, { organizationId: auth.organization.id, idempotencyKey: item.idempotencyKey }, { fields: ['id', 'enqueuedAt', 'mode', 'scheduledAt'] });
    return { result: { id: prior.id, suppressed: [], replayed: true }, enqueue: prior.enqueuedAt ? null : jobOf(prior) };
  }
}

export function jobOf(e: Pick<Email, 'id' | 'mode' | 'scheduledAt'>): SendEmailJob {
  return { emailId: e.id, mode: e.mode, notBeforeMs: e.scheduledAt ? e.scheduledAt.getTime() : null };
}

function stage(em: EntityManager, auth: AuthState, item: PreparedEmail, suppressedSet: Set<string>): { id: string; email: Email; suppressed: string[]; queued: boolean } {
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
  return { id, email, suppressed: suppressed.map((r) => r.given), queued };
}

/** Starts workflows for stored messages; a failure leaves them for the replay or the sweep. */
export async function enqueue(deps: AcceptDeps, jobs: SendEmailJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const started: string[] = [];
  await Promise.all(
    jobs.map(async (job) => {
      try {
        await deps.engine.startSendEmail(job);
        started.push(job.emailId);
      } catch (err) {
        deps.log.error({ err, emailId: job.emailId }, 'could not start SendEmail; the message stays stored and is queued by a replay or the sweep');
      }
    }),
  );
  if (started.length > 0) markEnqueued(deps, started);
}

/**
 * enqueued_at is bookkeeping for the sweep and for replays, and starting a workflow twice is a
 * no-op, so the marks are written in one UPDATE every 200 ms instead of one per request. A crash
 * before the write only means the sweep starts those workflows again, harmlessly.
 */
const pending = new Map<Orm, { ids: string[]; timer: NodeJS.Timeout; log: Logger }>();

function markEnqueued(deps: AcceptDeps, ids: string[]): void {
  let p = pending.get(deps.orm);
  if (!p) {
    p = { ids: [], log: deps.log, timer: setTimeout(() => void flushEnqueued(deps.orm), 200) };
    p.timer.unref();
    pending.set(deps.orm, p);
  }
  p.ids.push(...ids);
}

export async function flushEnqueued(orm: Orm): Promise<void> {
  const p = pending.get(orm);
  if (!p) return;
  pending.delete(orm);
  clearTimeout(p.timer);
  try {
    await orm.em.fork().nativeUpdate(Email, { id: { $in: p.ids }, enqueuedAt: null }, { enqueuedAt: new Date() });
  } catch (err) {
    p.log.warn({ err, count: p.ids.length }, 'could not mark messages enqueued; the sweep will start them again (a no-op)');
  }
}
