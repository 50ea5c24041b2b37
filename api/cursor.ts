import { ServiceError } from '../core/errors';
import { inRange } from '../core/time';
import { isUuid } from '../db/ids';

/** Opaque keyset cursor: the (created_at, id) of the last row served. */
export interface Cursor {
  createdAt: Date;
  id: string;
}

export function encodeCursor(c: { createdAt: Date | string; id: string }): string {
  return Buffer.from(`v1|${new Date(c.createdAt).toISOString()}|${c.id}`, 'utf8').toString('base64url');
}

/** A cursor we issued, or 422 invalid_cursor (also for a forged one whose time is outside what is stored: 1970–9999). */
export function decodeCursor(s: string): Cursor {
  const bad = () => new ServiceError('invalid_cursor', 'cursor is not valid; pass next_cursor from a previous page unchanged');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(s)) throw bad();
  const parts = Buffer.from(s, 'base64url').toString('utf8').split('|');
  if (parts.length !== 3 || parts[0] !== 'v1' || !isUuid(parts[2])) throw bad();
  const t = Date.parse(parts[1]);
  if (!inRange(t) || new Date(t).toISOString() !== parts[1]) throw bad();
  return { createdAt: new Date(t), id: parts[2] };
}

/** MikroORM filter for rows strictly older than a cursor's (created_at, id); none without a cursor. */
export function olderThanCursor(cursor: string | undefined) {
  if (cursor === undefined) return {};
  const after = decodeCursor(cursor);
  return { $or: [{ createdAt: { $lt: after.createdAt } }, { createdAt: after.createdAt, id: { $lt: after.id } }] };
}

/**
 * The page of `limit` rows out of the `limit + 1` a list read, and the cursor to the next page when
 * there is more: the (created_at, id) of the last row served, by `position` for raw SQL rows.
 */
export function pageOf<T>(
  rows: T[],
  limit: number,
  position: (row: T) => { createdAt: Date | string; id: string } = (row) => row as { createdAt: Date; id: string },
): { page: T[]; nextCursor?: string } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, ...(rows.length > limit && last !== undefined ? { nextCursor: encodeCursor(position(last)) } : {}) };
}

/** The list envelope (spec: `object: list`, `data`, `next_cursor` only when more pages exist). */
export const listBody = <D>(data: D[], nextCursor?: string) => ({
  object: 'list',
  data,
  ...(nextCursor ? { next_cursor: nextCursor } : {}),
});
