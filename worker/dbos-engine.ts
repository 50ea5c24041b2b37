import { DBOS } from '@dbos-inc/dbos-sdk';
import type { Activities } from '../activities';
import { isNonRetryable } from '../activities/errors';
import type { WorkflowContext } from '../workflows/context';
import { retryPolicy, type RetryClass } from '../workflows/context';
import type { SendEmailActivities } from '../activities/send-email-types';
import type { DomainVerificationActivities } from '../activities/domain-verification-types';
import {
  sendEmailWorkflow,
  sendEmailActivityRetry,
  SEND_EMAIL_WORKFLOW,
  CANCEL_SIGNAL,
  type SendEmailInput,
} from '../workflows/send-email';
import type { Engine, SendEmailJob } from './engine';
import {
  domainVerificationWorkflow,
  domainVerificationActivityRetry,
  DOMAIN_VERIFICATION_WORKFLOW,
  type DomainVerificationInput,
} from '../workflows/domain-verification';
import type { Logger } from '../server/logger';

export interface DbosEngineOptions {
  databaseUrl: string;
  activities: Activities;
  retryBaseSeconds: number;
  log: Logger;
  /** Platform-wide live sends per second (the spec's worker send rate), enforced by the queue. */
  sendRatePerSecond: number;
  /** SendEmail workflows running at once in this process, per queue. */
  workerConcurrency: number;
  /** Fixed so that workflows left pending by a crash are recovered by the next process, whatever its code hash. */
  applicationVersion?: string;
}

/** Live mail: rate-limited across every process sharing the database. */
export const DELIVERY_QUEUE = 'delivery';
/** Test-mode mail: nothing leaves the machine, so only concurrency is bounded. */
export const SIMULATION_QUEUE = 'simulation';

let registered: ((input: SendEmailInput) => Promise<unknown>) | undefined;
let registeredDomain: ((input: DomainVerificationInput) => Promise<unknown>) | undefined;
let current: { activities: Activities; retryBaseSeconds: number } | undefined;

/** The context one workflow gets: only its own activities (those its retry map names), as DBOS steps. */
function dbosContext<A extends object>(activities: A, retry: Record<keyof A, RetryClass>, retryBaseSeconds: number): WorkflowContext<A> {
  const proxy = {} as Record<string, unknown>;
  for (const name of Object.keys(retry) as (keyof A & string)[]) {
    const policy = retryPolicy(retry[name], retryBaseSeconds);
    proxy[name] = (...args: unknown[]) =>
      DBOS.runStep(() => (activities[name] as (...a: unknown[]) => Promise<unknown>)(...args), {
        name,
        retriesAllowed: true,
        maxAttempts: policy.maxAttempts,
        intervalSeconds: policy.initialIntervalSeconds,
        backoffRate: policy.backoffCoefficient,
        shouldRetry: (err) => !isNonRetryable(err),
      });
  }
  return {
    now: () => DBOS.now(),
    sleepUntil: async (epochMs) => {
      const now = await DBOS.now();
      if (epochMs > now) await DBOS.sleep(epochMs - now);
    },
    waitForSignal: async (name, deadlineEpochMs) => (await DBOS.recv(name, { deadlineEpochMS: deadlineEpochMs })) !== null,
    activities: proxy as A,
  };
}

/**
 * The embedded engine: DBOS Transact on the service's own PostgreSQL (schema `dbos`), in-process.
 * DBOS is a process-wide singleton, so one process runs one embedded engine.
 */
export async function startDbosEngine(opts: DbosEngineOptions): Promise<Engine> {
  current = { activities: opts.activities, retryBaseSeconds: opts.retryBaseSeconds };
  if (!registered) {
    registered = DBOS.registerWorkflow(
      async (input: SendEmailInput) => {
        if (!current) throw new Error('embedded engine not started');
        return sendEmailWorkflow(
          dbosContext<SendEmailActivities>(current.activities, sendEmailActivityRetry, current.retryBaseSeconds),
          input,
        );
      },
      { name: SEND_EMAIL_WORKFLOW },
    );
    registeredDomain = DBOS.registerWorkflow(
      async (input: DomainVerificationInput) => {
        if (!current) throw new Error('embedded engine not started');
        return domainVerificationWorkflow(
          dbosContext<DomainVerificationActivities>(current.activities, domainVerificationActivityRetry, current.retryBaseSeconds),
          input,
        );
      },
      { name: DOMAIN_VERIFICATION_WORKFLOW },
    );
  }
  const log = opts.log.child({ component: 'dbos' });
  DBOS.setConfig({
    name: 'svc-mail',
    systemDatabaseUrl: opts.databaseUrl,
    systemDatabasePoolSize: 20,
    applicationVersion: opts.applicationVersion ?? 'svc-mail-1',
    logger: {
      info: (m) => log.debug(m as object),
      debug: (m) => log.trace(m as object),
      warn: (m) => log.warn(m as object),
      error: (m) => log.error(m as object),
    },
  });
  await DBOS.launch();
  // Queues decouple acceptance from execution: the API only records the start; workers dispatch
  // at a bounded concurrency, so a burst of sends never starves the API of CPU or connections.
  await DBOS.registerQueue(DELIVERY_QUEUE, {
    workerConcurrency: opts.workerConcurrency,
    rateLimit: { limitPerPeriod: opts.sendRatePerSecond, periodSec: 1 },
    minPollingIntervalMs: 100,
    onConflict: 'always_update',
  });
  await DBOS.registerQueue(SIMULATION_QUEUE, {
    workerConcurrency: opts.workerConcurrency,
    minPollingIntervalMs: 100,
    onConflict: 'always_update',
  });
  // Enough started work to keep each queue busy for a while; the backlog past it waits in the outbox.
  const highWater = {
    live: Math.max(opts.workerConcurrency * 4, opts.sendRatePerSecond * 5),
    test: opts.workerConcurrency * 32,
  };
  const waiting = async (queueName: string, limit: number) =>
    (await DBOS.listQueuedWorkflows({ queueName, status: ['ENQUEUED', 'PENDING'], limit, loadInput: false, loadOutput: false })).length;
  let running = true;
  log.info('embedded workflow engine (DBOS) launched');
  return {
    name: 'embedded',
    async startSendEmail(job: SendEmailJob) {
      // A scheduled message waits as a delayed queue entry, not as a running workflow holding a slot.
      const delayMs = job.notBeforeMs === null ? 0 : job.notBeforeMs - Date.now();
      await DBOS.startWorkflow(registered!, {
        workflowID: job.emailId,
        queueName: job.mode === 'live' ? DELIVERY_QUEUE : SIMULATION_QUEUE,
        ...(delayMs > 0 ? { enqueueOptions: { delaySeconds: Math.ceil(delayMs / 1000) } } : {}),
      })({ emailId: job.emailId });
    },
    async sendEmailRoom() {
      const [live, test] = await Promise.all([waiting(DELIVERY_QUEUE, highWater.live), waiting(SIMULATION_QUEUE, highWater.test)]);
      return { live: highWater.live - live, test: highWater.test - test };
    },
    async signalCancel(emailId) {
      await DBOS.send(emailId, { at: Date.now() }, CANCEL_SIGNAL, `cancel:${emailId}`);
    },
    async startDomainVerification(workflowId, input) {
      // Not on a queue: the loop mostly sleeps, and a queued workflow would hold its slot meanwhile.
      await DBOS.startWorkflow(registeredDomain!, { workflowID: workflowId })(input);
    },
    ready: () => running,
    async stop() {
      running = false;
      await DBOS.shutdown({ workflowCompletionTimeoutMS: 5000 });
    },
  };
}
