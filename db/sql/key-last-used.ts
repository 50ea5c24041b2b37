import type { Orm } from '../orm';
import type { PgTimestamp } from './pg-types';

/**
 * When each key was last charged a request: the start of its rate window (key_rate_windows keeps
 * one row per key, moved to the current second by every charge, db/sql/rate-window.ts). So "last
 * used" costs no write of its own on the hot path, to the second.
 */
export async function keysLastUsed(orm: Orm, keyIds: string[]): Promise<Map<string, Date>> {
  if (keyIds.length === 0) return new Map();
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ api_key_id: string; window_start: PgTimestamp }[]>(
      `select api_key_id, window_start from key_rate_windows where api_key_id in (?)`,
      [keyIds],
    );
  return new Map(rows.map((r) => [r.api_key_id, new Date(r.window_start)]));
}
