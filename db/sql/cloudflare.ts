import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';

// Cloudflare publishing (issue 41): the organization's internal flag, its sealed token, and what was
// published for each domain record. Writes take the caller's EntityManager so an audit row commits
// with them.

export type PublicationState = 'pending' | 'verified' | 'conflict' | 'failed';

export interface Publication {
  purpose: string;
  type: string;
  name: string;
  content: string;
  zoneId: string | null;
  recordId: string | null;
  state: PublicationState;
  detail: string | null;
  publishedBy: string | null;
  publishedAt: Date;
  verifiedAt: Date | null;
}

export interface Connection {
  tokenEnc: string;
  tokenId: string;
  attachedBy: string | null;
  attachedAt: Date;
}

const iso = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export async function isInternal(orm: Orm, organizationId: string): Promise<boolean> {
  const [row] = await orm.em.fork().execute<{ internal: boolean }[]>(`select internal from organizations where id = ?`, [organizationId]);
  return row?.internal === true;
}

/** Sets the flag; the value it had before (null: no such organization). */
export async function setInternal(em: EntityManager, organizationId: string, internal: boolean): Promise<boolean | null> {
  const rows = await em.execute<{ before: boolean }[]>(
    `update organizations o set internal = ?, updated_at = now()
       from (select id, internal as before from organizations where id = ? for update) b
      where o.id = b.id returning b.before`,
    [internal, organizationId],
  );
  return rows[0] ? rows[0].before : null;
}

export async function readConnection(orm: Orm, organizationId: string): Promise<Connection | null> {
  const [row] = await orm.em
    .fork()
    .execute<{ token_enc: string; token_id: string; attached_by: string | null; attached_at: string }[]>(
      `select token_enc, token_id, attached_by, ${iso('attached_at')} as attached_at from cloudflare_connections where organization_id = ?`,
      [organizationId],
    );
  return row
    ? { tokenEnc: row.token_enc, tokenId: row.token_id, attachedBy: row.attached_by, attachedAt: new Date(row.attached_at) }
    : null;
}

export async function saveConnection(
  em: EntityManager,
  organizationId: string,
  c: { tokenEnc: string; tokenId: string; attachedBy: string | null },
) {
  await em.execute(
    `insert into cloudflare_connections (organization_id, token_enc, token_id, attached_by, attached_at) values (?, ?, ?, ?, now())
     on conflict (organization_id) do update set token_enc = excluded.token_enc, token_id = excluded.token_id,
       attached_by = excluded.attached_by, attached_at = excluded.attached_at`,
    [organizationId, c.tokenEnc, c.tokenId, c.attachedBy],
  );
}

/** Removes the token; its Cloudflare id when there was one. */
export async function deleteConnection(em: EntityManager, organizationId: string): Promise<string | null> {
  const rows = await em.execute<{ token_id: string }[]>(`delete from cloudflare_connections where organization_id = ? returning token_id`, [
    organizationId,
  ]);
  return rows[0]?.token_id ?? null;
}

interface RawPublication {
  purpose: string;
  type: string;
  name: string;
  content: string;
  zone_id: string | null;
  record_id: string | null;
  state: PublicationState;
  detail: string | null;
  published_by: string | null;
  published_at: string;
  verified_at: string | null;
}

export async function listPublications(orm: Orm, domainId: string): Promise<Publication[]> {
  const rows = await orm.em.fork().execute<RawPublication[]>(
    `select purpose, type, name, content, zone_id, record_id, state, detail, published_by,
            ${iso('published_at')} as published_at, ${iso('verified_at')} as verified_at
       from dns_publications where domain_id = ? order by published_at, purpose, name`,
    [domainId],
  );
  return rows.map((r) => ({
    purpose: r.purpose,
    type: r.type,
    name: r.name,
    content: r.content,
    zoneId: r.zone_id,
    recordId: r.record_id,
    state: r.state,
    detail: r.detail,
    publishedBy: r.published_by,
    publishedAt: new Date(r.published_at),
    verifiedAt: r.verified_at ? new Date(r.verified_at) : null,
  }));
}

export async function savePublication(em: EntityManager, domainId: string, p: Omit<Publication, 'publishedAt' | 'verifiedAt'>) {
  await em.execute(
    `insert into dns_publications (domain_id, purpose, type, name, content, zone_id, record_id, state, detail, published_by, published_at, verified_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), null)
     on conflict (domain_id, purpose, type, name) do update set content = excluded.content, zone_id = excluded.zone_id,
       record_id = excluded.record_id, state = excluded.state, detail = excluded.detail, published_by = excluded.published_by,
       published_at = excluded.published_at,
       verified_at = case when dns_publications.state = 'verified' and excluded.state = 'verified' then dns_publications.verified_at end`,
    [domainId, p.purpose, p.type, p.name, p.content, p.zoneId, p.recordId, p.state, p.detail, p.publishedBy],
  );
}

/**
 * Forgets what an earlier publish did with records the domain no longer has (an old tracking host,
 * a key that changed state), among `purposes` when given (a publish of some records only).
 */
export async function forgetOtherPublications(
  em: EntityManager,
  domainId: string,
  keep: { purpose: string; type: string; name: string }[],
  purposes?: string[],
) {
  if (keep.length === 0) return;
  await em.execute(
    `delete from dns_publications where domain_id = ? and (purpose || ' ' || type || ' ' || name) not in (?)
      ${purposes ? 'and purpose in (?)' : ''}`,
    [domainId, keep.map((k) => `${k.purpose} ${k.type} ${k.name}`), ...(purposes ? [purposes] : [])],
  );
}

/** A pending publication DNS now answers: verified (only if its content is still the one looked up). */
export async function markVerified(orm: Orm, domainId: string, p: { purpose: string; type: string; name: string; content: string }) {
  await orm.em.fork().execute(
    `update dns_publications set state = 'verified', verified_at = now()
        where domain_id = ? and purpose = ? and type = ? and name = ? and content = ? and state = 'pending'`,
    [domainId, p.purpose, p.type, p.name, p.content],
  );
}
