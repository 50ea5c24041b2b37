import { MikroORM, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { entities } from './entities';
import { migrationsList } from './migrations';
import { LOCKS, withAdvisoryLock } from './advisory-lock';

export type Orm = MikroORM;

export function ormOptions(clientUrl: string, poolSize = 10): Options {
  return {
    clientUrl,
    entities,
    extensions: [Migrator],
    discovery: { warnWhenNoEntities: false },
    migrations: { migrationsList, transactional: true, allOrNothing: true, tableName: 'mikro_orm_migrations', silent: true },
    pool: { min: 0, max: poolSize },
    // Every write names its columns; never let MikroORM touch the schema at boot.
    ensureDatabase: false,
    allowGlobalContext: false,
    debug: false,
  };
}

export async function openOrm(clientUrl: string, poolSize = 10): Promise<Orm> {
  return MikroORM.init(ormOptions(clientUrl, poolSize));
}

/** Applies the committed migrations (one process at a time, db/advisory-lock.ts); returns the names applied now. */
export async function migrate(orm: Orm): Promise<string[]> {
  return withAdvisoryLock(orm.config.get('clientUrl')!, LOCKS.migrations, async () => {
    const applied = await orm.getMigrator().up();
    return applied.map((m) => m.name);
  });
}
