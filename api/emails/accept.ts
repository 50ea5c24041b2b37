import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../server/ids';
import type { AuthState } from '../middleware/auth';
import type { PreparedEmail } from './prepare';
import { runPrepared } from '../../db/prepared';
import { STORE_EMAILS, storeEmailsParams, type StoredRow } from './store-sql';

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
 * Stores prepared messages (the outbox), then wakes the dispatcher that starts their workflows.
 *
 * One statement stores every message of the request with its recipients, their `queued` (or
 * `suppressed`) events and its attachments, and drops suppressed recipients: it is atomic on its
 * own and costs one round trip whatever the batch size. Idempotency keys are unique per
 * organization in the database and the insert skips a taken key (waiting for a concurrent
 * holder to commit), so concurrent duplicates resolve to one message; the skipped items are
 * replays and answer the stored id. A replay of a message stored but never queued queues it.
 */
export async function acceptEmails(deps: AcceptDeps, auth: AuthState, items: PreparedEmail[]): Promise<Accepted[]> {
  const results: Accepted[] = new Array(items.length);
  const now = new Date();
  const emails: Record<string, unknown>[] = [];
  const recipients: Record<string, unknown>[] = [];
  const attachments: Record<string, unknown>[] = [];
  /** Index of the item that claimed each idempotency key in this request. */
  const claimed = new Map<string, number>();
  const byId = new Map<string, number>();

  items.forEach((item, index) => {
    const key = item.idempotencyKey;
    if (key !== null) {
      if (claimed.has(key)) return; // the same key twice in one batch: a replay of the earlier item
      claimed.set(key, index);
    }
    const id = uuidv7(now.getTime());
    byId.set(id, index);
    emails.push({
      id,
      pos: emails.length,
      domain_id: item.domain.id,
      from_address: item.from,
      to_addresses: item.to,
      cc_addresses: item.cc,
      bcc_addresses: item.bcc,
      reply_to: item.replyTo,
      subject: item.subject,
      html: item.html,
      text: item.text,
      headers: item.headers,
      tags: item.tags,
      kind: item.kind,
      scheduled_at: item.scheduledAt?.toISOString() ?? null,
      message_id: `<${id}@${item.domain.name}>`,
      idempotency_key: key,
    });
    for (const r of item.recipients) recipients.push({ id: uuidv7(), email_id: id, pos: recipients.length, address: r.address, field: r.field });
    item.attachments.forEach((a, position) => {
      attachments.push({ id: uuidv7(), email_id: id, position, filename: a.filename, content_type: a.contentType, size: a.content.length, content: a.content.toString('base64') });
    });
  });

  let wake = false;
  if (emails.length > 0) {
    const rows = await runPrepared<StoredRow>(
      deps.orm,
      STORE_EMAILS,
      storeEmailsParams({ organizationId: auth.organization.id, apiKeyId: auth.key.id, mode: auth.key.mode, now, emails, recipients, attachments }),
    );
    for (const row of rows) {
      const index = byId.get(row.id)!;
      const dropped = new Set(row.suppressed);
      results[index] = { id: row.id, suppressed: items[index].recipients.filter((r) => dropped.has(r.address)).map((r) => r.given), replayed: false };
      if (row.status === 'queued') wake = true;
    }
  }

  // Items the insert skipped hold a key that another message (earlier, or concurrent) already took.
  const taken = [...claimed].filter(([, index]) => results[index] === undefined).map(([key]) => key);
  if (taken.length > 0) {
    const prior: { id: string; idempotency_key: string; enqueued_at: string | null }[] = await deps.orm.em.fork().getConnection().execute(
      'select id, idempotency_key, enqueued_at from emails where organization_id = ? and idempotency_key in (select jsonb_array_elements_text(?::jsonb))',
      [auth.organization.id, JSON.stringify(taken)],
    );
    for (const p of prior) {
      results[claimed.get(p.idempotency_key)!] = { id: p.id, suppressed: [], replayed: true };
      if (p.enqueued_at === null) wake = true;
    }
  }

  items.forEach((item, index) => {
    if (results[index] === undefined) {
      const first = item.idempotencyKey !== null ? results[claimed.get(item.idempotencyKey)!] : undefined;
      if (!first) throw new Error(`message ${index} of the request was neither stored nor found by its idempotency key`);
      results[index] = { id: first.id, suppressed: [], replayed: true };
    }
  });
  if (wake) deps.dispatch();
  return results;
}
