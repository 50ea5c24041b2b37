import type { Orm } from '../orm';

// Console sessions (core/console/sessions.ts), found by the SHA-256 of the cookie's token.

/** A live session's operator and CSRF token. */
export interface SessionRow {
  id: string;
  email: string;
  organization_id: string | null;
  totp_enabled: boolean;
  csrf_token: string;
}

const conn = (orm: Orm) => orm.em.fork().getConnection();

/**
 * A new session ending `absoluteMs` from now whatever its use. The operator's sessions that have
 * ended (expired or revoked) are deleted in the same statement, so the table holds about the
 * live ones.
 */
export async function insertSession(orm: Orm, s: { idHash: string; operatorId: string; csrf: string; absoluteMs: number }): Promise<void> {
  await conn(orm).execute(
    `
with ended as (
  delete from operator_sessions where operator_id = ? and (revoked_at is not null or expires_at <= now())
)
insert into operator_sessions (id_hash, operator_id, csrf_token, created_at, last_seen_at, expires_at)
values (?, ?, ?, now(), now(), now() + ? * interval '1 millisecond')`,
    [s.operatorId, s.idHash, s.operatorId, s.csrf, s.absoluteMs],
  );
}

/**
 * A request's session, in one statement: live (not revoked, before its absolute end, seen within
 * `idleMs`), its idle clock restarted, answered with its operator. Null otherwise.
 */
export async function touchSession(orm: Orm, idHash: string, idleMs: number): Promise<SessionRow | null> {
  const [row] = await conn(orm).execute<SessionRow[]>(
    `update operator_sessions s set last_seen_at = now()
       from operators o
      where s.id_hash = ? and o.id = s.operator_id and s.revoked_at is null and s.expires_at > now()
        and s.last_seen_at > now() - ? * interval '1 millisecond'
     returning o.id, o.email, o.organization_id, o.totp_enabled, s.csrf_token`,
    [idHash, idleMs],
  );
  return row ?? null;
}

export async function revokeSession(orm: Orm, idHash: string): Promise<void> {
  await conn(orm).execute(`update operator_sessions set revoked_at = now() where id_hash = ? and revoked_at is null`, [idHash]);
}

/** Every session of an operator ("sign out everywhere"). */
export async function revokeOperatorSessions(orm: Orm, operatorId: string): Promise<void> {
  await conn(orm).execute(`update operator_sessions set revoked_at = now() where operator_id = ? and revoked_at is null`, [operatorId]);
}
