import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/common';
import { SEND_EMAIL_WORKFLOW, CANCEL_SIGNAL, CLOSE_UNCONFIRMED_SIGNAL } from '../workflows/send-email';
import type { TemporalSendEmailInput } from '../workflows/temporal';
import { DOMAIN_VERIFICATION_WORKFLOW } from '../workflows/domain-verification';
import type { Engine, SendEmailJob } from './engine';
import type { Config, TemporalConfig } from '../server/config';
import type { Logger } from '../server/logger';

export interface TemporalSettings extends TemporalConfig {
  /** First retry delay of transient delivery failures (RETRY_BASE_SECONDS). */
  retryBaseSeconds: number;
}

/** The Temporal settings of a configuration read with ENGINE=temporal. */
export function temporalSettings(config: Config): TemporalSettings {
  if (!config.temporal) throw new Error('ENGINE=temporal is required for this');
  return { ...config.temporal, retryBaseSeconds: config.retryBaseSeconds };
}

/** Temporal only: a `sent` message's workflow waits for this signal during its confirmation window. */
export interface TemporalEngine extends Engine {
  signalCloseUnconfirmed(emailId: string): Promise<void>;
}

/**
 * The API's side of the Temporal engine: starts and signals workflows through @temporalio/client.
 * Workflows run in `svc worker` processes (worker/temporal-worker.ts).
 */
export async function startTemporalEngine(settings: TemporalSettings, log: Logger): Promise<TemporalEngine> {
  const connection = await Connection.connect(settings.connection as ConnectionOptions).catch((err: Error) => {
    throw new Error(`cannot reach Temporal at ${settings.connection.address} (TEMPORAL_ADDRESS): ${err.message}`);
  });
  const client = new Client({ connection, namespace: settings.namespace });
  let running = true;
  log.info(
    { address: settings.connection.address, namespace: settings.namespace, taskQueue: settings.taskQueue },
    'temporal engine connected',
  );

  async function signal(emailId: string, name: string): Promise<void> {
    try {
      await client.workflow.getHandle(emailId).signal(name, { at: Date.now() });
    } catch (err) {
      // Already finished (or never started): the database decided; nothing is waiting to wake.
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
  }

  /**
   * Workflow id = email id (or domain loop id): a repeated start (dispatcher retry, replayed
   * idempotency key, verification sweep) joins the running workflow, and a finished one is never
   * run again.
   */
  async function start(workflowType: string, workflowId: string, input: unknown): Promise<void> {
    try {
      await client.workflow.start(workflowType, {
        taskQueue: settings.taskQueue,
        workflowId,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) return;
      throw err;
    }
  }

  return {
    name: 'temporal',
    // Temporal task queues hold any backlog durably and cheaply; the outbox need not hold it back.
    sendEmailRoom: async () => null,
    async startSendEmail(job: SendEmailJob) {
      const input: TemporalSendEmailInput = {
        emailId: job.emailId,
        transportRetryBaseSeconds: settings.retryBaseSeconds,
        // Test mail never leaves the machine, so it skips the rate-limited delivery queue.
        ...(job.mode === 'live' ? { deliveryTaskQueue: settings.deliveryTaskQueue } : {}),
        ...(settings.confirmationWindowMs > 0 ? { confirmationWindowMs: settings.confirmationWindowMs } : {}),
      };
      await start(SEND_EMAIL_WORKFLOW, job.emailId, input);
    },
    startDomainVerification: (workflowId, input) => start(DOMAIN_VERIFICATION_WORKFLOW, workflowId, input),
    signalCancel: (emailId) => signal(emailId, CANCEL_SIGNAL),
    signalCloseUnconfirmed: (emailId) => signal(emailId, CLOSE_UNCONFIRMED_SIGNAL),
    ready: () => running,
    async stop() {
      running = false;
      await connection.close();
    },
  };
}
