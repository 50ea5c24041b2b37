import pino, { type Logger } from 'pino';

/**
 * A database error's message, detail, hint and (for MikroORM) text carry the statement with the
 * caller's values inlined ("insert ... values ('someone@example.com') - duplicate key ...",
 * `Key (email)=(...)`). Logs keep what identifies the failure, never what was in it: the error
 * class, SQLSTATE, constraint, table, column, the named statement (db/prepared.ts sets it) and the
 * stack frames.
 */
function databaseError(err: Record<string, unknown>): Record<string, unknown> {
  const stack = typeof err.stack === 'string' ? err.stack.split('\n').filter((l) => l.trim().startsWith('at ')) : [];
  const out: Record<string, unknown> = { type: err.name ?? 'DatabaseError', message: 'database error (values withheld)' };
  for (const k of ['statement', 'constraint', 'table', 'column', 'routine', 'severity'] as const)
    if (typeof err[k] === 'string') out[k] = err[k];
  const sqlState = typeof err.sqlState === 'string' ? err.sqlState : typeof err.code === 'string' ? err.code : undefined;
  if (sqlState) out.sqlState = sqlState;
  out.stack = stack.join('\n');
  return out;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** pg's DatabaseError (a SQLSTATE and a severity) or anything MikroORM converted from one. */
export function isDatabaseError(err: unknown): err is Record<string, unknown> {
  if (!err || typeof err !== 'object') return false;
  const e = err as Record<string, unknown>;
  if (typeof e.sqlState === 'string') return true;
  return typeof e.code === 'string' && SQLSTATE.test(e.code) && typeof e.severity === 'string';
}

/**
 * The error serializer of every service log: an error's type, message, own stack and fields, its
 * cause serialized the same way (pino's own would fold a cause's message and stack into the
 * outer ones), and database errors reduced to what is safe to keep.
 */
export function serializeError(err: unknown): unknown {
  if (isDatabaseError(err)) return databaseError(err);
  if (!(err instanceof Error)) return err;
  const out: Record<string, unknown> = { type: err.constructor?.name ?? err.name, message: err.message, stack: err.stack };
  for (const [k, v] of Object.entries(err)) if (!(k in out) && k !== 'cause') out[k] = v;
  if (err.cause !== undefined) out.cause = serializeError(err.cause);
  return out;
}

/** JSON lines to stdout (or `destination`), with the error serializer above. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { svc: 'mail' }, serializers: { err: serializeError } }, destination);
}
