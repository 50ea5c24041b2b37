import { temporalSettings, type Config } from './config';
import type { Parts } from './parts';
import { buildActivities, deliveryMailer, directMailer, type ActivityWiring } from './activities';
import type { Orm } from '../db/orm';
import type { Mailer } from '../activities/mailer';
import { APPLICATION_NAME, APPLICATION_VERSION, DBOS_INTERNAL_QUEUE, startDbosEngine } from '../worker/dbos-engine';
import { startTemporalEngine } from '../worker/temporal-engine';
import type { Engine } from '../worker/engine';
import { claimExecutor } from '../worker/executors';

export interface EngineWiring extends Omit<ActivityWiring, 'mailer' | 'orm' | 'direct'> {
  databaseUrl: string;
  workerOrm: Orm;
  /** The dev inbox's SMTP port (no SMTP_URL): the embedded engine's mailer delivers there. */
  devInboxPort: number | undefined;
  /** Tests' mailer instead of SMTP_URL's or the dev inbox's. */
  mailer: Mailer | undefined;
  /** This process was taken for dead and its work taken over (default: exit 70). */
  onExecutorLost: (() => void) | undefined;
}

/**
 * DBOS's idle-in-transaction cap (its default, 60 s) as a connection option. Given in the URL,
 * DBOS leaves out the `SET` it would otherwise send from its pool's `connect` event, where it
 * races the borrower's first query on the same client (pg's "client.query() when the client is
 * already executing a query" DeprecationWarning, at every start).
 */
export function dbosDatabaseUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  const options = url.searchParams.get('options') ?? '';
  if (options.includes('idle_in_transaction_session_timeout')) return databaseUrl;
  url.searchParams.set('options', `${options} -c idle_in_transaction_session_timeout=60000`.trim());
  return url.toString();
}

/**
 * The workflow engine's parts, added to the process's list: a Temporal client (its workers run in
 * `svc worker`), or the embedded engine after the executor it runs as and the mailer its
 * activities send with.
 */
export async function addEngine(parts: Parts, config: Config, w: EngineWiring): Promise<{ engine: Engine; executorId: string | null }> {
  if (config.engine === 'temporal') {
    const log = w.log.child({ component: 'temporal' });
    const engine = await parts.add('temporal client', startTemporalEngine(temporalSettings(config), log), (e) => e.stop());
    if (w.mailer) await parts.add('mailer', w.mailer, (m) => m.close());
    return { engine, executorId: null };
  }
  // Claimed before the engine launches: DBOS's start-up recovery then covers this process's own work only.
  const claiming = claimExecutor({
    orm: w.workerOrm,
    dataDir: config.dataDir,
    configuredId: config.workerId,
    deadAfterSeconds: config.workerDeadAfterSeconds,
    log: w.log.child({ component: 'executor' }),
    onLost: w.onExecutorLost ?? (() => process.exit(70)),
  });
  const executor = await parts.add('executor', claiming, (e) => e.stop());
  const mailer = await parts.add('mailer', w.mailer ?? deliveryMailer(config, w.devInboxPort ?? config.devSmtpPort), (m) => m.close());
  const direct = await parts.add('direct mailer', directMailer(config, w.workerOrm, w.log), (m) => m.close());
  const launching = startDbosEngine({
    databaseUrl: dbosDatabaseUrl(w.databaseUrl),
    activities: buildActivities(config, { ...w, orm: w.workerOrm, mailer, direct }),
    retryBaseSeconds: config.retryBaseSeconds,
    log: w.log,
    workerConcurrency: config.workerConcurrency,
    executorId: executor.id,
    applicationVersion: APPLICATION_VERSION,
  });
  const engine = await parts.add('embedded engine', launching, (e) => e.stop());
  executor.takeOver({ internalQueue: DBOS_INTERNAL_QUEUE, applicationName: APPLICATION_NAME });
  return { engine, executorId: executor.id };
}
