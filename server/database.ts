import type { Config } from './config';
import type { Logger } from 'pino';
import { ensureEmbeddedPostgres, type RunningPostgres } from '../db/embedded-postgres';
import { openOrm, migrate, type Orm } from '../db/orm';

export interface Database {
  url: string;
  orm: Orm;
  embedded: RunningPostgres | null;
  close(): Promise<void>;
}

/** DATABASE_URL when given, else the embedded PostgreSQL of DATA_DIR; migrations applied. */
export async function openDatabase(config: Config, log: Logger, opts: { migrate?: boolean } = {}): Promise<Database> {
  const embedded = config.databaseUrl ? null : await ensureEmbeddedPostgres(config.dataDir, log);
  const url = config.databaseUrl ?? embedded!.url;
  const orm = await openOrm(url, config.dbPoolSize);
  if (opts.migrate !== false) {
    const applied = await migrate(orm);
    if (applied.length) log.info({ applied }, 'database migrations applied');
  }
  return {
    url,
    orm,
    embedded,
    async close() {
      await orm.close();
      if (embedded) await embedded.stop();
    },
  };
}
