import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { TOOLS_BIN } from './temporal-tools';
import { CLUSTER_DATABASES, type ClusterDatabase } from './temporal-cluster-config';

/** Creates both databases and applies the server's own schema files to them, to the newest version. */
export async function setUpSchemas(c: ClusterDatabase): Promise<void> {
  const tool = path.join(TOOLS_BIN, 'temporal-sql-tool');
  const query = async (database: string, text: string) => {
    const pg = new PgClient({ ...c, database });
    await pg.connect();
    try {
      return (await pg.query(text)).rows;
    } finally {
      await pg.end();
    }
  };
  for (const [kind, database] of Object.entries(CLUSTER_DATABASES)) {
    const run = (args: string[]) => {
      // The password in the environment, not on a command line other users can read.
      const r = spawnSync(tool, ['--ep', c.host, '-p', String(c.port), '-u', c.user, '--pl', 'postgres12', '--db', database, ...args], {
        encoding: 'utf8',
        env: { ...process.env, SQL_PASSWORD: c.password },
      });
      if (r.status !== 0) throw new Error(`temporal-sql-tool ${args[0]} (${database}) failed: ${r.error ?? ''}${r.stderr || r.stdout}`);
    };
    const exists = await query('postgres', `select 1 from pg_database where datname = '${database}'`);
    if (exists.length === 0) run(['create-database']);
    const [{ versioned }] = await query(database, "select to_regclass('schema_version') is not null as versioned");
    if (!versioned) run(['setup-schema', '-v', '0.0']);
    run(['update-schema', '--schema-name', `postgresql/v12/${kind === 'persistence' ? 'temporal' : 'visibility'}`]);
  }
}
