import type { Orm } from '../orm';

/** One round trip to the database: whether it answers (for /health). */
export async function ping(orm: Orm): Promise<boolean> {
  try {
    await orm.em.fork().getConnection().execute('select 1');
    return true;
  } catch {
    return false;
  }
}
