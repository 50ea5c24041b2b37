import { ApiError } from './errors';
import { isUuid } from '../server/ids';

/** Opaque keyset cursor: the (created_at, id) of the last row served. */
export interface Cursor {
  createdAt: string;
  id: string;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(`v1|${c.createdAt}|${c.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(s: string): Cursor {
  const bad = () => new ApiError(422, 'invalid_cursor', 'cursor is not valid; pass next_cursor from a previous page unchanged');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(s)) throw bad();
  const parts = Buffer.from(s, 'base64url').toString('utf8').split('|');
  if (parts.length !== 3 || parts[0] !== 'v1' || !isUuid(parts[2])) throw bad();
  const t = Date.parse(parts[1]);
  if (Number.isNaN(t) || new Date(t).toISOString() !== parts[1]) throw bad();
  return { createdAt: parts[1], id: parts[2] };
}
