import type { Config } from '../../server/config';
import { freePort, runSvc, waitHealthy, waitWorkerPolling, type Child } from './child';

/**
 * `svc start` and `svc worker` as processes of their own, configured as the in-process service:
 * answers the second API's URL. Both are stopped (SIGTERM, as a supervisor would) with the stack.
 */
export async function startSecondProcesses(config: Config, address: string, stops: (() => Promise<unknown> | void)[]): Promise<string> {
  const t = config.temporal!;
  const env: Record<string, string> = {
    DATABASE_URL: config.databaseUrl!,
    SMTP_URL: config.smtpUrl!,
    DNS_SERVERS: (config.dnsServers ?? []).join(','),
    DATA_DIR: config.dataDir,
    ENGINE: 'temporal',
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: t.namespace,
    TEMPORAL_TASK_QUEUE: t.taskQueue,
    CONFIRMATION_WINDOW_HOURS: String(t.confirmationWindowMs / 3_600_000),
    TEMPORAL_SCHEDULE_LEAD_SECONDS: String(t.scheduleLeadMs / 1000),
    RETRY_BASE_SECONDS: String(config.retryBaseSeconds),
    SEND_RATE_PER_SECOND: String(config.sendRatePerSecond),
    DOMAIN_VERIFY_FIRST_DELAY_SECONDS: String(config.domainVerifyFirstDelaySeconds),
    DOMAIN_VERIFY_SWEEP_SECONDS: String(config.domainVerifySweepSeconds),
  };
  const stopChild = async (c: Child) => {
    if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
    c.proc.kill('SIGTERM');
    await c.exited;
  };
  const port = await freePort();
  const api = runSvc(['start'], { ...env, PORT: String(port), DEV_SMTP_PORT: '0' });
  stops.push(() => stopChild(api));
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, api, 120_000);
  // 'temporal worker running' is how a test knows the worker polls.
  const worker = runSvc(['worker'], { ...env, LOG_LEVEL: 'info' });
  stops.push(() => stopChild(worker));
  await waitWorkerPolling(worker, 120_000);
  return url;
}
