import type { Orm } from '../orm';
import type { EmailStatus } from '../entities';
import type { PgTimestamp } from './pg-types';

export interface EmailSummaryRow {
  id: string;
  from_address: string;
  to_addresses: string[];
  subject: string;
  status: EmailStatus;
  mode: string;
  source: string;
  kind: string | null;
  created_at: PgTimestamp;
  sent_at: PgTimestamp | null;
}

export interface ListEmailsFilter {
  organizationId: string;
  /** A domain-restricted key's domains; null: every domain. */
  domainIds: string[] | null;
  status?: EmailStatus;
  kind?: string;
  mode?: string;
  since?: Date;
  until?: Date;
  /** Lower-cased address of any recipient (to, cc or bcc). */
  to?: string;
  /** Keyset position: rows strictly older than this (created_at, id). */
  after?: { createdAt: Date; id: string };
  limit: number;
}

/**
 * A page of an organization's messages, newest first by (created_at, id), read with a keyset
 * condition on the (organization_id, created_at desc, id desc) index, so mail arriving during a
 * walk never shifts later pages. Only the filters given are part of the statement.
 */
export function listEmails(orm: Orm, f: ListEmailsFilter): Promise<EmailSummaryRow[]> {
  const where: string[] = ['e.organization_id = ?'];
  const params: unknown[] = [f.organizationId];
  const add = (sql: string, value: unknown) => {
    where.push(sql);
    params.push(value);
  };
  if (f.domainIds !== null) add('e.domain_id = any(?::uuid[])', `{${f.domainIds.join(',')}}`);
  if (f.status !== undefined) add('e.status = ?', f.status);
  if (f.kind !== undefined) add('e.kind = ?', f.kind);
  if (f.mode !== undefined) add('e.mode = ?', f.mode);
  if (f.since !== undefined) add('e.created_at >= ?', f.since);
  if (f.until !== undefined) add('e.created_at < ?', f.until);
  if (f.to !== undefined) add('exists (select 1 from recipients r where r.email_id = e.id and r.address = ?)', f.to);
  if (f.after !== undefined) {
    where.push('(e.created_at, e.id) < (?, ?)');
    params.push(f.after.createdAt, f.after.id);
  }
  return orm.em
    .fork()
    .getConnection()
    .execute(
      `select e.id, e.from_address, e.to_addresses, e.subject, e.status, e.mode, e.source, e.kind, e.created_at, e.sent_at
         from emails e where ${where.join(' and ')}
        order by e.created_at desc, e.id desc limit ${Math.trunc(f.limit) + 1}`,
      params,
    );
}
