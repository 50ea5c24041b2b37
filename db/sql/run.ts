import type { EntityManager } from '@mikro-orm/postgresql';

/** One hand-written statement on `em`'s connection, inside its transaction when it has one. */
export const runSql = <T>(em: EntityManager, sql: string, params: unknown[]) =>
  em.getConnection().execute<T[]>(sql, params, 'all', em.getTransactionContext());
