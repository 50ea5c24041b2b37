import type { Orm } from '../orm';

// The console's operators and their one-time set-password links (core/console/operators.ts).
// Links and sessions are found by the SHA-256 of their token; the token itself is never stored.

/** What a page shows of an operator. */
export interface OperatorRow {
  id: string;
  email: string;
  organization_id: string | null;
  totp_enabled: boolean;
}

/** An operator with what signing in checks. */
export interface OperatorAuthRow extends OperatorRow {
  password_hash: string | null;
  /** Sealed (core/secrets.ts); pending while totp_enabled is false. */
  totp_secret: string | null;
}

const conn = (orm: Orm) => orm.em.fork().getConnection();
const AUTH_COLUMNS = `id, email, organization_id, totp_enabled, password_hash, totp_secret`;
/** `ms` milliseconds from now, `?` bound to a number. */
const FROM_NOW = `now() + ? * interval '1 millisecond'`;

/**
 * A new operator and its first set-password link, in one statement (an operator is never left
 * without a way in). Nothing is written when the email is taken (`id` null) or the organization
 * does not exist (`organization_found` false). A null organization: a platform operator.
 */
export async function insertOperatorWithLink(
  orm: Orm,
  o: { id: string; email: string; organizationId: string | null; tokenHash: string; linkMs: number },
): Promise<{ id: string | null; organization_found: boolean }> {
  const [row] = await conn(orm).execute<{ id: string | null; organization_found: boolean }[]>(
    `
with org as (
  select ?::uuid is null or exists (select 1 from organizations where id = ?::uuid) as found
), o as (
  insert into operators (id, email, organization_id, created_at)
  select ?, ?, ?::uuid, now() from org where org.found
  on conflict (email) do nothing
  returning id
), l as (
  insert into operator_links (token_hash, operator_id, expires_at, created_at)
  select ?, o.id, ${FROM_NOW}, now() from o
)
select (select id from o) as id, (select found from org) as organization_found`,
    [o.organizationId, o.organizationId, o.id, o.email, o.organizationId, o.tokenHash, o.linkMs],
  );
  return row;
}

/**
 * A fresh set-password link for an operator; its earlier unused links stop working (deleted in
 * the same statement). False when there is no such operator.
 */
export async function issueLink(orm: Orm, operatorId: string, tokenHash: string, linkMs: number): Promise<boolean> {
  const rows = await conn(orm).execute(
    `
with earlier as (
  delete from operator_links where operator_id = ? and used_at is null
)
insert into operator_links (token_hash, operator_id, expires_at, created_at)
select ?, id, ${FROM_NOW}, now() from operators where id = ?
returning operator_id`,
    [operatorId, tokenHash, linkMs, operatorId],
  );
  return rows.length > 0;
}

/** The operator a link is for, while the link is unused and unexpired; else null. */
export async function readLink(orm: Orm, tokenHash: string): Promise<{ operator_id: string; email: string } | null> {
  const [row] = await conn(orm).execute<{ operator_id: string; email: string }[]>(
    `select l.operator_id, o.email from operator_links l join operators o on o.id = l.operator_id
      where l.token_hash = ? and l.used_at is null and l.expires_at > now()`,
    [tokenHash],
  );
  return row ?? null;
}

/**
 * Spends a link and sets its operator's password, in one statement: the link is marked used only
 * while unused and unexpired (of two concurrent uses, the second waits for the first's row lock,
 * then finds it used), the password is set and every session of the operator is revoked. Answers
 * the operator's id, or null when the link was not valid.
 */
export async function consumeLink(orm: Orm, tokenHash: string, passwordHash: string): Promise<string | null> {
  const [row] = await conn(orm).execute<{ id: string }[]>(
    `
with l as (
  update operator_links set used_at = now()
   where token_hash = ? and used_at is null and expires_at > now()
  returning operator_id
), o as (
  update operators set password_hash = ?, password_changed_at = now()
   where id = (select operator_id from l)
  returning id
), s as (
  update operator_sessions set revoked_at = now()
   where operator_id = (select operator_id from l) and revoked_at is null
)
select id from o`,
    [tokenHash, passwordHash],
  );
  return row?.id ?? null;
}

/** A platform operator with this email, only when there are no operators at all (first run). */
export async function insertFirstOperator(orm: Orm, id: string, email: string): Promise<void> {
  await conn(orm).execute(
    `insert into operators (id, email, organization_id, created_at)
     select ?, ?, null, now() where not exists (select 1 from operators)
     on conflict (email) do nothing`,
    [id, email],
  );
}

/** While no operator has a password: the oldest operator (who needs a link to get in). Else null. */
export async function firstOperatorWithoutPassword(orm: Orm): Promise<string | null> {
  const [row] = await conn(orm).execute<{ id: string }[]>(
    `select id from operators
      where not exists (select 1 from operators where password_hash is not null)
      order by created_at, id limit 1`,
  );
  return row?.id ?? null;
}

export async function readOperatorByEmail(orm: Orm, email: string): Promise<OperatorAuthRow | null> {
  const [row] = await conn(orm).execute<OperatorAuthRow[]>(`select ${AUTH_COLUMNS} from operators where email = ?`, [email]);
  return row ?? null;
}

export async function readOperator(orm: Orm, id: string): Promise<OperatorAuthRow | null> {
  const [row] = await conn(orm).execute<OperatorAuthRow[]>(`select ${AUTH_COLUMNS} from operators where id = ?`, [id]);
  return row ?? null;
}

/**
 * Replaces an operator's password and revokes all its sessions, in one statement, only while the
 * stored hash is still `expected` (the one the current password was checked against): of two
 * concurrent changes one wins. False when it changed meanwhile.
 */
export async function replacePassword(orm: Orm, id: string, expected: string, passwordHash: string): Promise<boolean> {
  const [row] = await conn(orm).execute<{ n: number }[]>(
    `
with o as (
  update operators set password_hash = ?, password_changed_at = now()
   where id = ? and password_hash = ?
  returning id
), s as (
  update operator_sessions set revoked_at = now()
   where operator_id = (select id from o) and revoked_at is null
)
select count(*)::int as n from o`,
    [passwordHash, id, expected],
  );
  return row.n > 0;
}

/** Stores a pending TOTP secret (sealed), only while TOTP is off. False otherwise. */
export async function setPendingTotp(orm: Orm, id: string, sealed: string): Promise<boolean> {
  const rows = await conn(orm).execute(
    `update operators set totp_secret = ?, totp_last_step = null where id = ? and not totp_enabled returning id`,
    [sealed, id],
  );
  return rows.length > 0;
}

/**
 * Turns TOTP on, only for the pending secret that was checked (not one a later setup replaced it
 * with); `step` is the confirming code's, so that code cannot sign in afterwards.
 */
export async function enableTotp(orm: Orm, id: string, sealed: string, step: number): Promise<boolean> {
  const rows = await conn(orm).execute(
    `update operators set totp_enabled = true, totp_last_step = ? where id = ? and totp_secret = ? and not totp_enabled returning id`,
    [step, id, sealed],
  );
  return rows.length > 0;
}

export async function disableTotp(orm: Orm, id: string): Promise<void> {
  await conn(orm).execute(`update operators set totp_secret = null, totp_enabled = false, totp_last_step = null where id = ?`, [id]);
}

/**
 * Records the time step of an accepted code, only when it is later than the last one accepted:
 * a code (or an earlier one) is good once, even under concurrent sign-ins. False: replayed.
 */
export async function acceptTotpStep(orm: Orm, id: string, step: number): Promise<boolean> {
  const rows = await conn(orm).execute(
    `update operators set totp_last_step = ? where id = ? and (totp_last_step is null or totp_last_step < ?) returning id`,
    [step, id, step],
  );
  return rows.length > 0;
}
