import pino from 'pino';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal as proto } from '@temporalio/proto';
import { readConfig, type Config, type TemporalConfig } from '../../server/config';
import { startTemporalWorkers } from '../../server/temporal-workers';
import { startService, type Service } from '../../server/service';
import { openOrm } from '../../db/orm';
import type { Stream } from '../../db/entities';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { newDatabase } from './pg';
import { SmtpSink } from './sink';
import { TestDns } from './dns';
import { request, type RequestOptions } from './http';
import { testConfig } from './service';
import { liveTemporal, type LiveServer } from './temporal-server';
import { waitFor } from './wait';
import { recordHistory } from './history-corpus';
import { TEST_SECRETS_KEY } from './child';
import { startSecondProcesses } from './temporal-live-processes';

export interface LiveOptions {
  /** Names the database and the task queue (so the Temporal UI tells the suites apart). */
  name: string;
  /**
   * CONFIRMATION_WINDOW_HOURS. 0 (the default here): the outbox starts SendBatch runs; above 0,
   * one SendEmail run per message that waits at `sent` (worker/outbox.ts).
   */
  confirmationWindowHours?: number;
  /** SEND_RATE_PER_SECOND, for the outbox and the delivery workers alike (default testConfig's 1000). */
  sendRatePerSecond?: number;
  /** TEMPORAL_SCHEDULE_LEAD_SECONDS (default 1 here): scheduled mail further ahead gets a timer run at once. */
  scheduleLeadSeconds?: number;
  /** The stream of the organization's verified domain (broadcasts need `bulk`). */
  stream?: Stream;
  /**
   * A second API (`svc start`) and a second `svc worker`, each a process of its own on the same
   * database, namespace and task queue, as a deployment scales out: `call` then alternates
   * between the two APIs, and either worker may run any step.
   */
  secondProcesses?: boolean;
  /** The worker's workflow code: another release's (the upgrade test) instead of this one's. */
  workflowsPath?: string;
}

/** A workflow run as the Temporal server recorded it. */
export interface RunOnServer {
  type: string;
  /** COMPLETED, RUNNING, FAILED... */
  status: string;
  taskQueue: string;
  /** Its history, one entry per event, with what the assertions look at. */
  events: { type: string; activity?: string; activityInput?: any; signal?: string; timerMs?: number }[];
  /** Its input (the first argument), decoded. */
  input: any;
  /** Its result, decoded (completed runs only). */
  result: any;
}

/**
 * ENGINE=temporal end to end for one suite, set up like a deployment: the API service (client
 * engine, outbox, dispatchers, sweep) and `svc worker`'s workers from its own builder (the same
 * identity secrets, thread mailer, DNS servers and webhook client as the API's configuration), in
 * this process, on a task queue of its own so suites sharing one dev server never take each other's
 * work. Around them: an SMTP sink as the relay, a DNS server on loopback as DNS_SERVERS, one
 * organization (standard plan, warm-up off) with a verified domain and live SEND, test SEND and
 * ADMIN keys, and a @temporalio/client Client to read what the server recorded.
 */
export interface LiveStack {
  /** The project's cluster or dev server, when it is the one in use (its Web UI at server.uiUrl). */
  server?: LiveServer;
  config: Config;
  temporal: TemporalConfig;
  service: Service;
  sink: SmtpSink;
  dns: TestDns;
  client: Client;
  orgId: string;
  domain: string;
  call: <T = any>(
    method: string,
    path: string,
    opts?: RequestOptions & { as?: 'send' | 'test' | 'admin' },
  ) => ReturnType<typeof request<T>>;
  sql: <T = any>(text: string, values?: unknown[]) => Promise<T[]>;
  /** The run under `workflowId`, once its status is one of `statuses` (default: COMPLETED). */
  run(workflowId: string, statuses?: string[], timeoutMs?: number): Promise<RunOnServer>;
  /** Ids of the runs on this stack's task queue matching a visibility query (e.g. `WorkflowType = 'SendBatch'`). */
  list(query: string): Promise<string[]>;
  /** Stops the worker (its runs in flight stay on the server) and starts one with `workflowsPath`'s code (default: this release's). */
  replaceWorker(workflowsPath?: string): Promise<void>;
  stop(): Promise<void>;
}

let stacks = 0;

export async function startLiveStack(ctx: Mocha.Context, opts: LiveOptions): Promise<LiveStack> {
  const { address, server } = await liveTemporal(ctx);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  installTemporalRuntime(log);
  // Stopped in reverse order, each whatever happens to the others.
  const stops: (() => Promise<unknown> | void)[] = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await Promise.resolve(s()).catch(() => undefined);
  };
  try {
    const sink = new SmtpSink();
    const smtpUrl = await sink.start();
    stops.push(() => sink.stop());
    const dns = new TestDns();
    const dnsServer = await dns.start();
    stops.push(() => dns.stop());
    const databaseUrl = await newDatabase(`svc_live_${opts.name.replace(/\W/g, '_')}`);
    const temporal = readConfig({
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: process.env.TEMPORAL_NAMESPACE ?? 'default',
      TEMPORAL_TASK_QUEUE: `svc-mail-live-${opts.name}-${process.pid}-${++stacks}-${Date.now()}`,
      CONFIRMATION_WINDOW_HOURS: String(opts.confirmationWindowHours ?? 0),
      // Mail scheduled more than a second ahead waits on its SendEmail run's timer (60 s in production).
      TEMPORAL_SCHEDULE_LEAD_SECONDS: String(opts.scheduleLeadSeconds ?? 1),
    }).temporal!;
    const config = testConfig({
      databaseUrl,
      smtpUrl,
      engine: 'temporal',
      temporal,
      dnsServers: [dnsServer],
      // As test/support/service.ts: the loop re-checks after 1 s, 2 s, 4 s... for 30 s.
      domainVerifyFirstDelaySeconds: 1,
      domainVerifyWindowHours: 30 / 3600,
      domainVerifySweepSeconds: 1,
      ...(opts.sendRatePerSecond !== undefined ? { sendRatePerSecond: opts.sendRatePerSecond } : {}),
      // The key `svc` processes get (test/support/child.ts): a second process decrypts what this one sealed.
      ...(opts.secondProcesses ? { secretsKey: TEST_SECRETS_KEY } : {}),
    });
    // Runs terminated in a test are found within a second, not after minutes.
    const service = await startService(config, { log, strandedRuns: { intervalMs: 500, queuedGraceMs: 0, sendingGraceMs: 1_000 } });
    stops.push(() => service.stop());

    // `svc worker`'s own builder, with this configuration: the same DATA_DIR secrets key as the
    // API, so it signs with the DKIM keys the API generated and makes the links the API answers.
    const workerOrm = await openOrm(service.db.url, 5);
    stops.push(() => workerOrm.close());
    let worker = await startTemporalWorkers(config, workerOrm, log, service.port, opts.workflowsPath);
    // Stopped before the sink: its pooled connections would hold the sink's close for 30 s.
    stops.push(() => worker.stop());

    const apis = [service.url];
    if (opts.secondProcesses) apis.push(await startSecondProcesses(config, address, stops));

    const connection = await Connection.connect({ address });
    stops.push(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace });

    const orm = service.db.orm;
    const org = await createOrganization(orm, `Temporal live ${opts.name}`, 'standard');
    const domain = await createDomain(orm, org.id, `live-${opts.name}-${Date.now()}.example.test`, {
      verified: true,
      stream: opts.stream,
      warmup: false,
    });
    const key = async (permission: 'send' | 'admin', mode: 'live' | 'test') =>
      (await createKey(orm, org.id, { name: `${permission}-${mode}`, permission, mode, rateLimit: 1000 })).token;
    const keys = { send: await key('send', 'live'), test: await key('send', 'test'), admin: await key('admin', 'live') };

    const decode = (payloads: proto.api.common.v1.IPayloads | null | undefined) => {
      const first = payloads?.payloads?.[0];
      return first ? defaultPayloadConverter.fromPayload(first as never) : undefined;
    };
    const decodeAll = (payloads: proto.api.common.v1.IPayloads | null | undefined) =>
      (payloads?.payloads ?? []).map((p) => defaultPayloadConverter.fromPayload(p as never));
    const EventType = proto.api.enums.v1.EventType;
    let turn = 0;
    return {
      server,
      config,
      temporal,
      service,
      sink,
      dns,
      client,
      orgId: org.id,
      domain: domain.name,
      call: (method, path, o = {}) => request(apis[turn++ % apis.length], method, path, { token: keys[o.as ?? 'send'], ...o }),
      sql: (text, values = []) => orm.em.fork().getConnection().execute(text, values),
      async run(workflowId, statuses = ['COMPLETED'], timeoutMs = 60_000) {
        const handle = client.workflow.getHandle(workflowId);
        const described = await waitFor(
          async () => {
            const d = await handle.describe().catch(() => undefined);
            return d && statuses.includes(d.status.name) ? d : undefined;
          },
          `workflow ${workflowId} to be ${statuses.join(' or ')}`,
          timeoutMs,
          200,
        );
        const history = await handle.fetchHistory();
        recordHistory(history, described.type, described.status.name);
        const events = (history.events ?? []).map((e) => {
          const type = String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, '');
          const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
          const scheduled = e.activityTaskScheduledEventAttributes;
          return {
            type,
            ...(scheduled ? { activity: scheduled.activityType?.name ?? '', activityInput: decodeAll(scheduled.input) } : {}),
            ...(e.workflowExecutionSignaledEventAttributes ? { signal: e.workflowExecutionSignaledEventAttributes.signalName ?? '' } : {}),
            ...(timeout ? { timerMs: Number(timeout.seconds ?? 0) * 1000 + Math.round((timeout.nanos ?? 0) / 1e6) } : {}),
          };
        });
        const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
        const completed = history.events?.find(
          (e) => e.workflowExecutionCompletedEventAttributes,
        )?.workflowExecutionCompletedEventAttributes;
        return {
          type: described.type,
          status: described.status.name,
          taskQueue: described.taskQueue,
          events,
          input: decode(started?.input),
          result: decode(completed?.result),
        };
      },
      async list(query) {
        const ids: string[] = [];
        for await (const w of client.workflow.list({ query: `TaskQueue = '${temporal.taskQueue}' AND ${query}` })) ids.push(w.workflowId);
        return ids;
      },
      async replaceWorker(workflowsPath) {
        await worker.stop();
        worker = await startTemporalWorkers(config, workerOrm, log, service.port, workflowsPath);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Names of the activities a run scheduled, in order. */
export const activitiesOf = (run: RunOnServer) => run.events.filter((e) => e.activity).map((e) => e.activity!);
/** The arguments of each scheduled `name` activity, in order. */
export const activityInputs = (run: RunOnServer, name: string) =>
  run.events.filter((e) => e.activity === name).map((e) => e.activityInput as unknown[]);
/** Durations of the timers a run started, in order. */
export const timersOf = (run: RunOnServer) => run.events.filter((e) => e.type === 'TIMER_STARTED').map((e) => e.timerMs!);
/** Names of the signals a run received, in order. */
export const signalsOf = (run: RunOnServer) => run.events.filter((e) => e.signal).map((e) => e.signal!);
