import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import type { temporal } from '@temporalio/proto';
import { readConfig, verificationTiming } from '../../server/config';
import { createActivities } from '../../activities';
import { createSmtpMailer, type Mailer } from '../../activities/mailer';
import { createWebhookHttp } from '../../activities/webhook-http';
import { systemClock } from '../../core/clock';
import { createSecrets, type Secrets } from '../../core/secrets';
import { hashToken } from '../../core/tokens';
import { createDnsResolver } from '../../core/domains/dns';
import { platformDns } from '../../core/domains/identity';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { prepareEmail } from '../../core/emails/prepare';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { newWebhookSecret } from '../../core/webhooks/sign';
import { uuidv7 } from '../../db/ids';
import { migrate, openOrm, type Orm } from '../../db/orm';
import { WebhookEndpoint } from '../../db/entities';
import { startTemporalEngine, type TemporalSettings } from '../../worker/temporal-engine';
import { runTemporalWorker, type RunningTemporalWorker } from '../../worker/temporal-worker';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { startVerificationLoop } from '../../worker/domain-sweep';
import { WebhookDispatcher } from '../../worker/webhook-dispatcher';
import type { Engine } from '../../worker/engine';
import { Outbox } from '../../worker/outbox';
import { sendEmail } from '../../workflows/send-email';
import { sendBatch } from '../../workflows/send-batch';
import { verificationWorkflowId } from '../../workflows/domain-verification';
import { dkimRotation, dkimRotationWorkflowId } from '../../workflows/dkim-rotation';
import { dkimRecordName, dkimRecordValue, dkimRotationTiming, startDkimRotation } from '../../core/domains/dkim-keys';
import { dmarcRamp, dmarcRampWorkflowId, DMARC_REQUEST_SIGNAL } from '../../workflows/dmarc-ramp';
import { requestDmarcStep, startDmarcRamp } from '../../core/dmarc/ramp-ops';
import { WEBHOOK_RETRY_DELAYS_MS, webhookDeliveryWorkflowId } from '../../workflows/webhook-delivery';
import { temporalToolPath } from '../../tools/temporal-tools';
import { newDatabase } from '../support/pg';
import { SmtpSink } from '../support/sink';
import { TestDns } from '../support/dns';
import { WebhookReceiver } from '../support/webhook-receiver';
import { skipBecause } from '../support/skips';
import { recordHistory } from '../support/history-corpus';
import { waitFor } from '../support/wait';

/**
 * The real schedules on Temporal's time-skipping test server (`npm run tools` installs it): the
 * project's worker (bundled workflows/temporal, the real activities) against a fresh database, an
 * SMTP sink, a DNS server and a webhook receiver, with the production delays (RETRY_BASE_SECONDS
 * 30, the 72-hour windows, the webhook schedule). Days of workflow time pass in seconds of wall
 * time, so each test waits out a whole schedule and checks when things happened, in workflow time.
 *
 * - A message scheduled 3 days ahead waits on its timer (still queued, nothing sent), then goes out
 *   once, at its time.
 * - DomainVerification re-checks DNS from 1 minute, doubling up to an hour, for 72 hours, then ends
 *   with the domain pending, after exactly the number of checks those delays allow.
 * - A `sent` message's SendEmail keeps waiting for a delivery event or the operator's close for the
 *   72-hour confirmation window: still open just before, finished at `sent` after it.
 * - A webhook endpoint that always answers 500: the delivery is tried 8 times, at the gaps of
 *   WEBHOOK_RETRY_DELAYS_MS, then `failed`; the endpoint stays enabled until a failure 5 days after
 *   its first, which disables it (`failing`, audit-logged), and the pending delivery then fails
 *   unsent at its next attempt.
 * - SendBatch: a recipient the relay refuses with 4xx is tried 4 times, 30, 60 and 120 s apart,
 *   then failed; the batch's other message goes out once at the first pass. Each pass runs on the
 *   delivery task queue with the database retry policy (its own failures are database trouble).
 *
 * Skipped, with the reason, when the test server is not installed (no Java or Maven).
 */
describe('Temporal engine, time-skipping: the real schedules in seconds', function () {
  this.timeout(180_000);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  const MINUTE = 60_000;
  const HOUR = 60 * MINUTE;
  const DAY = 24 * HOUR;
  let env: TestWorkflowEnvironment;
  let orm: Orm;
  let databaseUrl: string;
  let worker: RunningTemporalWorker;
  let engine: Engine;
  let sink: SmtpSink;
  let mailer: Mailer;
  let dns: TestDns;
  let receiver: WebhookReceiver;
  let secrets: Secrets;
  let store: GroupStore;
  let orgId: string;
  let domain: string;
  let tokenHash: string;
  let deliveryTaskQueue: string;

  before(async function () {
    const path = temporalToolPath('temporal-test-server');
    if (!path) skipBecause(this, 'no Temporal time-skipping test server in .tools/bin (run `npm run tools`; it needs Java 17+ and Maven)');
    installTemporalRuntime(log);
    env = await startTimeSkipping(path);
    databaseUrl = await newDatabase('svc_time_skipping');
    orm = await openOrm(databaseUrl, 8);
    await migrate(orm);
    sink = new SmtpSink();
    const smtpUrl = await sink.start();
    dns = new TestDns();
    const dnsServer = await dns.start();
    receiver = new WebhookReceiver();
    await receiver.start();
    secrets = createSecrets(randomBytes(32));
    mailer = createSmtpMailer(smtpUrl, false);
    const activities = createActivities({
      orm,
      mailer,
      clock: systemClock,
      log,
      dns: createDnsResolver([dnsServer]),
      secrets,
      webhooks: createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 }),
    });
    const queue = `svc-mail-skipping-${Date.now()}`;
    // What `svc worker` and the API run with ENGINE=temporal, with the default RETRY_BASE_SECONDS.
    const settings: TemporalSettings = {
      connection: { address: env.address },
      namespace: env.namespace ?? 'default',
      taskQueue: queue,
      deliveryTaskQueue: `${queue}-delivery`,
      retryBaseSeconds: readConfig({}).retryBaseSeconds,
    };
    assert.equal(settings.retryBaseSeconds, 30);
    deliveryTaskQueue = settings.deliveryTaskQueue;
    worker = await runTemporalWorker({ settings, activities, sendRatePerSecond: 12, concurrency: 8, log });
    engine = await startTemporalEngine(settings, log);
    store = new GroupStore(orm, log);
    const org = await newSender('Time skipping');
    ({ orgId, domain, tokenHash } = org);
  });

  after(async () => {
    await worker?.stop();
    await engine?.stop();
    await env?.teardown();
    await orm?.close();
    // Its pooled connections closed first, or the sink waits 30 s for them.
    mailer?.close();
    await sink?.stop();
    await dns?.stop();
    await receiver?.stop();
  });

  /** An organization with a verified sending domain and a live SEND key. */
  async function newSender(name: string): Promise<{ orgId: string; domain: string; tokenHash: string }> {
    const org = await createOrganization(orm, name, 'standard');
    const d = await createDomain(orm, org.id, `skip-${uuidv7().slice(-12)}.example.test`, { verified: true, warmup: false });
    const { token } = await createKey(orm, org.id, { name: 'send', permission: 'send', mode: 'live', rateLimit: 1000 });
    return { orgId: org.id, domain: d.name, tokenHash: hashToken(token) };
  }

  /**
   * Stores a message as POST /emails does (prepare, then the store statement), `now` being the
   * workflow clock: the test server's time runs days ahead of the wall clock once a test skipped.
   * Nothing starts its workflow: each test starts it as the outbox would.
   */
  async function storeEmail(body: Record<string, unknown>, now: number, sender = { domain, tokenHash }): Promise<string> {
    const prepared = prepareEmail(
      { from: `Skip <skip@${sender.domain}>`, subject: 'Time skipping', text: 'hi', ...body },
      { inBatch: false, now: new Date(now) },
    );
    const [r] = await acceptEmails({ orm, store, dispatch: () => undefined }, { tokenHash: sender.tokenHash }, [prepared], { cost: 1 });
    if (typeof r !== 'object' || r instanceof Error) throw new Error(`not stored: ${String(r)}`);
    return r.id;
  }

  type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
  const history = async (workflowId: string): Promise<HistoryEvent[]> => {
    const handle = env.client.workflow.getHandle(workflowId);
    const [h, d] = await Promise.all([handle.fetchHistory(), handle.describe()]);
    recordHistory(h, d.type, d.status.name);
    return h.events ?? [];
  };
  const at = (e: HistoryEvent) => tsToMs(e.eventTime);
  /**
   * When each activity of that type was decided, in workflow time: the start of the workflow task
   * that scheduled it, which is what the body's `ctx.now()` read there. The scheduled event itself
   * is stamped when that task completed, a few milliseconds later (measured: a gap of 119,998 ms
   * between two checks the body spaced 120,000 ms apart).
   */
  const scheduled = (events: HistoryEvent[], activity: string) =>
    events.flatMap((e, i) => {
      if (e.activityTaskScheduledEventAttributes?.activityType?.name !== activity) return [];
      let j = i;
      while (j > 0 && !events[j].workflowTaskStartedEventAttributes) j--;
      return [at(events[j])];
    });
  /** The durations of the workflow's timers, in order. */
  const timers = (events: HistoryEvent[]) =>
    events.filter((e) => e.timerStartedEventAttributes).map((e) => tsToMs(e.timerStartedEventAttributes!.startToFireTimeout));
  const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]);
  const sql = <T extends object>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  const emailStatus = async (id: string) => (await sql<{ status: string }>(`select status from emails where id = ?`, [id]))[0].status;
  const received = (to: string) => sink.received.filter((m) => m.envelopeTo.includes(to));

  /**
   * Lets exactly `ms` of workflow time pass (the timers due meanwhile fire in order; a running
   * activity or workflow task holds the clock), then answers the run's result, which must be in by
   * then. Awaiting result() on the time-skipping client instead leaves the clock unlocked for a
   * moment after the run ends, and an idle test server then skips to its next deadline (measured:
   * 10 years on): fine at the end of a test, not where a test goes on from earlier times.
   */
  async function runFor(workflowId: string, ms: number): Promise<unknown> {
    await env.sleep(ms);
    // A plain client: its result() leaves the clock alone.
    const handle = new Client({ connection: env.connection, namespace: env.namespace }).workflow.getHandle(workflowId);
    await waitFor(async () => (await handle.describe()).status.name !== 'RUNNING', `${workflowId} to end`, 30_000);
    return handle.result();
  }

  it('a send scheduled 3 days ahead waits on its timer, is handed back to the outbox at its time, and is delivered once', async () => {
    const now = await env.currentTimeMs();
    const to = `scheduled-${Date.now()}@example.com`;
    const dueAt = now + 3 * DAY;
    const id = await storeEmail({ to, scheduled_at: new Date(dueAt).toISOString() }, now);
    // The outbox on the workflow clock: it starts the timer run at acceptance, and the delivery when due.
    const clock = { at: now, now: () => new Date(clock.at) };
    const outbox = new Outbox(orm, engine, log, { clock, retryBaseSeconds: 30 });
    await outbox.runOnce();
    const handle = env.client.workflow.getHandle(id);

    // Waiting: a timer of 3 days, the message queued (cancelable), nothing at the relay.
    const waiting = await waitFor(
      async () => {
        const started = timers(await history(id));
        return started.length > 0 && started;
      },
      'the scheduled wait',
      30_000,
    );
    assert.equal(waiting.length, 1);
    assert.ok(Math.abs(waiting[0] - 3 * DAY) < MINUTE, `a wait of 3 days, not ${waiting[0]} ms`);
    assert.equal(await emailStatus(id), 'queued');
    assert.equal(received(to).length, 0);

    // Awaiting the result lets the server skip the 3 days: the run hands the message back.
    assert.deepEqual(await handle.result(), { status: 'queued' });
    const events = await history(id);
    const [handedBack] = scheduled(events, 'handBack');
    assert.ok(handedBack >= dueAt && handedBack < dueAt + MINUTE, 'handed back at scheduled_at, not before');
    assert.equal(received(to).length, 0, 'nothing sent by the timer run itself');

    // The outbox, at the run's time, reserves it and starts its delivery (a SendBatch run).
    clock.at = await env.currentTimeMs();
    await outbox.runOnce();
    await waitFor(async () => (await emailStatus(id)) === 'sent', 'the delivery', 30_000);
    assert.equal(received(to).length, 1);
    assert.equal(received(to)[0].parsed.messageId, `<${id}@${domain}>`);
  });

  it('DomainVerification checks for its whole 72-hour window and ends pending, after the checks its delays allow', async () => {
    const timing = verificationTiming(readConfig({}));
    assert.deepEqual(timing, { firstDelayMs: MINUTE, maxDelayMs: HOUR, windowMs: 72 * HOUR }, 'the defaults this test reasons about');
    const d = await createDomain(orm, orgId, `verify-${uuidv7().slice(-12)}.example.test`, {
      identity: { secrets, platform: platformDns('mail.example.test') },
    });
    // The return-path records published, the DKIM key never: it can never verify.
    for (const r of d.records) {
      if (r.purpose === 'return_path_spf') dns.txt.set(r.name, [r.value]);
      if (r.purpose === 'return_path_mx') dns.mx.set(r.name, [{ exchange: r.value.split(' ')[1], priority: 10 }]);
    }
    // The loop as the workflow runs it: check, wait (first delay, doubling up to the maximum),
    // check again, as long as the next check falls within the window (77 with the defaults:
    // 1 + 6 waits from 1 min to 32 min + 70 hourly ones).
    const waits: number[] = [];
    for (let elapsed = 0, delay = timing.firstDelayMs; elapsed + delay <= timing.windowMs; delay = Math.min(delay * 2, timing.maxDelayMs)) {
      waits.push(delay);
      elapsed += delay;
    }
    const expectedChecks = waits.length + 1;

    await startVerificationLoop(engine, d, timing);
    const id = verificationWorkflowId(d.id, d.verificationGeneration);
    assert.deepEqual(await env.client.workflow.getHandle(id).result(), { status: 'pending', checks: expectedChecks });
    const events = await history(id);
    assert.equal(scheduled(events, 'checkDomain').length, expectedChecks);
    assert.deepEqual(timers(events), waits);
    const span = at(events.at(-1)!) - at(events[0]);
    assert.ok(span <= timing.windowMs && span > timing.windowMs - HOUR, `ran ${span} ms of a ${timing.windowMs} ms window`);
    const [row] = await sql<{ status: string; records: { purpose: string; status: string }[] }>(
      `select status, records from domains where id = ?`,
      [d.id],
    );
    assert.equal(row.status, 'pending');
    const byPurpose = Object.fromEntries(row.records.map((r) => [r.purpose, r.status]));
    assert.equal(byPurpose.return_path_spf, 'verified', 'the published records were resolved');
    assert.equal(byPurpose.dkim, 'missing');
  });

  it('DkimRotation with the defaults: 4 checks 2 min apart (3 matching over 5 min, the TTL 1 s), the switch, 7 days retiring, then revoked', async () => {
    const timing = dkimRotationTiming();
    assert.deepEqual(
      [timing.checkIntervalMs, timing.requiredChecks, timing.minSpreadMs, timing.retiringMs],
      [2 * MINUTE, 3, 5 * MINUTE, 7 * DAY],
      'the defaults this test reasons about',
    );
    const d = await createDomain(orm, orgId, `dkim-${uuidv7().slice(-12)}.example.test`, {
      verified: true,
      identity: { secrets, platform: platformDns('mail.example.test') },
    });
    const ref = { id: d.id, organizationId: orgId, name: d.name };
    const started = await startDkimRotation(orm, secrets, ref, 'console:op@example.com');
    dns.txt.set(dkimRecordName(started.selector, d.name), [dkimRecordValue(started.publicKey)]);
    const id = dkimRotationWorkflowId(d.id, started.keyId);
    await engine.start(dkimRotation, id, { domainId: d.id, keyId: started.keyId, ...timing });
    // Matching from the first check: checks at 0, 2, 4 and 6 min; the 3 at 0-4 min span only 4.
    assert.deepEqual(await env.client.workflow.getHandle(id).result(), { outcome: 'revoked', checks: 4 });
    const events = await history(id);
    const checks = scheduled(events, 'checkDkimKey');
    const [switched] = scheduled(events, 'switchDkimKey');
    const [revoked] = scheduled(events, 'revokeDkimKeys');
    assert.equal(checks.length, 4);
    assert.ok(switched - checks[0] >= timing.minSpreadMs, 'the switch only after the spread');
    assert.ok(
      revoked - switched >= timing.retiringMs && revoked - switched < timing.retiringMs + MINUTE,
      'revoked 7 days after the switch',
    );
    const keys = await sql<{ selector: string; state: string; private_key_enc: string | null }>(
      `select selector, state, private_key_enc from dkim_keys where domain_id = ? order by created_at`,
      [d.id],
    );
    assert.deepEqual(
      keys.map((k) => [k.selector, k.state, k.private_key_enc === null]),
      [
        [d.dkimSelector, 'revoked', true],
        [started.selector, 'active', false],
      ],
    );
  });

  it("DkimRotation waits out the record's TTL: served with TTL 600 s, 6 checks 2 min apart (matches over 10 min) before the switch", async () => {
    const timing = dkimRotationTiming();
    const d = await createDomain(orm, orgId, `dkim-ttl-${uuidv7().slice(-12)}.example.test`, {
      verified: true,
      identity: { secrets, platform: platformDns('mail.example.test') },
    });
    const started = await startDkimRotation(orm, secrets, { id: d.id, organizationId: orgId, name: d.name }, 'console:op@example.com');
    const name = dkimRecordName(started.selector, d.name);
    dns.txt.set(name, [dkimRecordValue(started.publicKey)]);
    dns.txtTtl.set(name, 600);
    const id = dkimRotationWorkflowId(d.id, started.keyId);
    await engine.start(dkimRotation, id, { domainId: d.id, keyId: started.keyId, ...timing });
    assert.deepEqual(await env.client.workflow.getHandle(id).result(), { outcome: 'revoked', checks: 6 });
    const events = await history(id);
    const checks = scheduled(events, 'checkDkimKey');
    const [switched] = scheduled(events, 'switchDkimKey');
    assert.equal(checks.length, 6);
    // Never checked early; and the waits are the workflow's own timers, one per gap, none longer
    // than the interval (a gap's excess over it is the check activity's own run time, which on a
    // loaded machine is seconds of wall clock: issue 51 asked to stop asserting on that).
    assert.ok(
      gaps(checks).every((g) => g >= timing.checkIntervalMs),
      String(gaps(checks)),
    );
    // The timers in order: a wait after each check but the last, then the retiring one.
    const waits = timers(events).slice(0, checks.length - 1);
    assert.equal(waits.length, checks.length - 1, String(timers(events)));
    assert.ok(
      waits.every((t) => t > 0 && t <= timing.checkIntervalMs),
      String(timers(events)),
    );
    assert.ok(switched - checks[0] >= 600_000, 'the matching checks span the TTL before the switch');
    // Not an internal organization with a token: each publish step answers that nothing was published.
    assert.equal(scheduled(events, 'publishDkimRecords').length, 3, 'at the start, after the switch, after the revocation');
  });

  it('DmarcRamp re-checks its gate daily: not holding until the 14th day of reports, then an advance applied and a stop ending it', async () => {
    const now = await env.currentTimeMs();
    const d = await createDomain(orm, orgId, `dmarc-${uuidv7().slice(-12)}.example.test`, {
      verified: true,
      identity: { secrets, platform: platformDns('mail.example.test') },
    });
    const ref = { id: d.id, organizationId: orgId, name: d.name };
    const id = dmarcRampWorkflowId(d.id, uuidv7());
    await startDmarcRamp(orm, ref, id, 'console:op@example.com', new Date(now));
    // One report a day, each begun an hour before the day's check: this service's mail, all aligned.
    for (let k = 1; k <= 14; k++) {
      const reportId = uuidv7();
      const begin = new Date(now + k * DAY - HOUR);
      await sql(
        `insert into dmarc_reports (id, domain_id, reporter, report_id, begin_at, end_at, received_at) values (?, ?, 'r', ?, ?, ?, ?)`,
        [reportId, d.id, `r${k}`, begin, new Date(begin.getTime() + 30 * MINUTE), begin],
      );
      await sql(
        `insert into dmarc_report_rows (report_id, source_ip, count, disposition, dkim_aligned, spf_aligned, header_from, ours)
          values (?, '192.0.2.1', 100, 'none', true, true, ?, true)`,
        [reportId, d.name],
      );
    }
    await engine.start(dmarcRamp, id, { domainId: d.id, checkIntervalMs: DAY, runId: id, startedBy: 'console:op@example.com' });
    const verdict = async () =>
      (await sql<{ verdict: { holds: boolean; days: number } }>(`select verdict from dmarc_ramps where domain_id = ?`, [d.id]))[0].verdict;
    await env.sleep(13 * DAY + HOUR);
    await waitFor(async () => (await verdict()).days === 13, 'the 13th day counted');
    assert.equal((await verdict()).holds, false, 'day 13: 13 days of reports, short of 14');
    await env.sleep(DAY);
    await waitFor(async () => (await verdict()).days === 14, 'the 14th day counted');
    assert.equal((await verdict()).holds, true);
    await requestDmarcStep(orm, ref, 'advance', 'console:op@example.com');
    await engine.signal(id, DMARC_REQUEST_SIGNAL, 'advance-1');
    const step = async () => (await sql<{ step: string }>(`select step from dmarc_ramps where domain_id = ?`, [d.id]))[0].step;
    await waitFor(async () => (await step()) === 'quarantine', 'the advance applied');
    const record = (
      await sql<{ records: { purpose: string; value: string }[] }>(`select records from domains where id = ?`, [d.id])
    )[0].records.find((r) => r.purpose === 'dmarc');
    assert.equal(record?.value, `v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@${d.returnPathHost}`);
    await requestDmarcStep(orm, ref, 'stop', 'console:op@example.com');
    await engine.signal(id, DMARC_REQUEST_SIGNAL, 'stop-1');
    assert.deepEqual(await runFor(id, 0), { outcome: 'stopped', checks: 16, requests: 2 });
    // The start's record and the advance's, each a publish step (a no-op here: no Cloudflare zone).
    assert.equal(scheduled(await history(id), 'publishDmarcRecord').length, 2);
    const checks = scheduled(await history(id), 'checkDmarcGate');
    assert.ok(
      gaps(checks.slice(0, 15)).every((g) => g >= DAY && g < DAY + MINUTE),
      'a check a day',
    );
  });

  it('a sent message waits out its 72-hour confirmation window at `sent`, and its run ends after it, not before', async () => {
    // CONFIRMATION_WINDOW_HOURS' default, which the outbox puts in every SendEmail it starts.
    const window = readConfig({ ENGINE: 'temporal' }).temporal!.confirmationWindowMs;
    assert.equal(window, 72 * HOUR);
    const to = `window-${Date.now()}@example.com`;
    const id = await storeEmail({ to }, await env.currentTimeMs());
    await engine.start(sendEmail, id, { emailId: id, confirmationWindowMs: window });
    const handle = env.client.workflow.getHandle(id);
    // Handed to the relay, then waiting on the window's timer.
    const started = await waitFor(
      async () => {
        const events = await history(id);
        return timers(events).length > 0 && events;
      },
      'the confirmation window to start',
      30_000,
    );
    const deliver = started.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliver')!;
    const sentAt = at(started.find((e) => Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === Number(deliver.eventId))!);
    assert.equal(await emailStatus(id), 'sent');
    assert.equal(received(to).length, 1);

    // Just before the window ends: still open, still `sent`.
    await env.sleep(window - 10 * MINUTE);
    assert.equal((await handle.describe()).status.name, 'RUNNING');
    assert.equal(await emailStatus(id), 'sent');

    assert.deepEqual(await handle.result(), { status: 'sent' });
    const events = await history(id);
    assert.deepEqual(timers(events), [window]);
    const closedAt = at(events.at(-1)!);
    assert.ok(closedAt - sentAt >= window, `ended ${closedAt - sentAt} ms after the send, before the window ended`);
    assert.ok(closedAt - sentAt < window + MINUTE);
    assert.ok(!scheduled(events, 'closeUnconfirmed').length);
    assert.equal(await emailStatus(id), 'sent');
    assert.equal(received(to).length, 1);
  });

  it('a webhook that always fails: 8 attempts on the retry schedule, then failed; 5 days of failures disable the endpoint', async () => {
    const sender = await newSender('Webhooks, time skipping');
    const path = `/always-500-${Date.now()}`;
    receiver.respond = (r) => (r.path === path ? 500 : 200);
    const endpointId = uuidv7();
    const em = orm.em.fork();
    em.persist(
      Object.assign(new WebhookEndpoint(), {
        id: endpointId,
        organizationId: sender.orgId,
        url: `${receiver.url}${path}`,
        events: ['email.queued'],
        secretEnc: secrets.encrypt(newWebhookSecret()),
      }),
    );
    await em.flush();
    const endpoint = async () =>
      (
        await sql<{ enabled: boolean; disabled_reason: string | null; failing_since_ms: number | null }>(
          `select enabled, disabled_reason, (extract(epoch from failing_since) * 1000)::float8 as failing_since_ms
             from webhook_endpoints where id = ?`,
          [endpointId],
        )
      )[0];
    const delivery = async (id: string) =>
      (
        await sql<{ status: string; attempts: number; run_attempts: number; last_error: string | null; enqueued_at: string | null }>(
          `select status, attempts, run_attempts, last_error, enqueued_at from webhook_deliveries where id = ?`,
          [id],
        )
      )[0];
    // The service's dispatcher, one pass at a time (no LISTEN, no poller).
    const dispatcher = new WebhookDispatcher(orm, databaseUrl, engine, log, { concurrencyPerEndpoint: 4 });
    /**
     * A new event's delivery, from the dispatcher's batched first attempt (WebhookFirstAttempts,
     * which hands a failure back) to the WebhookDelivery run it then starts for the rest.
     */
    const deliverNewEvent = async () => {
      await storeEmail({ to: `hooked-${Date.now()}@example.com` }, await env.currentTimeMs(), sender);
      const [{ id }] = await sql<{ id: string }>(
        `select id from webhook_deliveries where endpoint_id = ? and run_attempts = 0 order by created_at desc limit 1`,
        [endpointId],
      );
      assert.equal(await dispatcher.runOnce(), 1);
      await waitFor(async () => {
        const d = await delivery(id);
        return d.run_attempts === 1 && d.enqueued_at === null;
      }, 'the first attempt to be handed back');
      assert.equal(await dispatcher.runOnce(), 1);
      return { id, workflowId: webhookDeliveryWorkflowId(id, 1) };
    };
    const posts = (id: string) => receiver.at(path).filter((r) => r.headers['webhook-id'] === id);

    // The whole schedule: 8 attempts, each wait as long as the schedule says, then failed.
    const first = await deliverNewEvent();
    const schedule = WEBHOOK_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0);
    assert.deepEqual(await runFor(first.workflowId, schedule + HOUR), { status: 'failed', attempts: WEBHOOK_RETRY_DELAYS_MS.length + 1 });
    assert.equal(posts(first.id).length, WEBHOOK_RETRY_DELAYS_MS.length + 1);
    const d1 = await delivery(first.id);
    assert.deepEqual([d1.status, d1.attempts, d1.last_error], ['failed', 8, 'HTTP 500']);
    // The first attempt (the batch's) started the endpoint's failure streak, in workflow time.
    const failingSince = (await endpoint()).failing_since_ms!;
    const attemptsAt = [failingSince, ...scheduled(await history(first.workflowId), 'attemptWebhookDelivery')];
    const waited = gaps(attemptsAt);
    assert.ok(waited[0] >= WEBHOOK_RETRY_DELAYS_MS[0] && waited[0] < WEBHOOK_RETRY_DELAYS_MS[0] + 30_000, `first wait ${waited[0]} ms`);
    for (let i = 1; i < waited.length; i++) {
      assert.ok(
        Math.abs(waited[i] - WEBHOOK_RETRY_DELAYS_MS[i]) < 5_000,
        `wait ${i + 1}: ${waited[i]} ms, not ${WEBHOOK_RETRY_DELAYS_MS[i]}`,
      );
    }
    // About 27.5 hours of failures: not yet 5 days, so the endpoint stays enabled.
    assert.deepEqual(await endpoint(), { enabled: true, disabled_reason: null, failing_since_ms: failingSince });

    // An hour short of 5 days after the first failure, a new event: its attempts fail while the
    // streak is under 5 days; the first failure at 5 days or more disables the endpoint, and the
    // attempt after that fails without a POST.
    await env.sleep(failingSince + 5 * DAY - HOUR - (await env.currentTimeMs()));
    const second = await deliverNewEvent();
    assert.deepEqual(await endpoint(), { enabled: true, disabled_reason: null, failing_since_ms: failingSince });
    // The first attempt's time: its next_attempt_at less the first delay.
    const [{ next_ms }] = await sql<{ next_ms: number }>(
      `select (extract(epoch from next_attempt_at) * 1000)::float8 as next_ms from webhook_deliveries where id = ?`,
      [second.id],
    );
    const startsAt = next_ms - WEBHOOK_RETRY_DELAYS_MS[0];
    const offsets = [0, ...WEBHOOK_RETRY_DELAYS_MS].map((_, i, all) => all.slice(0, i + 1).reduce((a, b) => a + b, 0));
    const sentBeforeDisable = offsets.filter((o) => startsAt + o < failingSince + 5 * DAY).length + 1;
    assert.equal(sentBeforeDisable, 5, 'the schedule crosses the 5 days at the fifth attempt');
    assert.deepEqual(await runFor(second.workflowId, 8 * HOUR), { status: 'failed', attempts: sentBeforeDisable + 1 });
    assert.equal(posts(second.id).length, sentBeforeDisable);
    const d2 = await delivery(second.id);
    assert.deepEqual([d2.status, d2.attempts, d2.last_error], ['failed', sentBeforeDisable, 'the endpoint is disabled']);
    const e = await endpoint();
    assert.deepEqual([e.enabled, e.disabled_reason], [false, 'failing']);
    const audit = await sql<{ details: { reason: string } }>(
      `select details from audit_log where action = 'webhook.disabled' and target_id = ?`,
      [endpointId],
    );
    assert.deepEqual(
      audit.map((a) => a.details.reason),
      ['failing'],
    );
  });

  it('SendBatch: a recipient refused with 4xx is tried 4 times, 30, 60 and 120 s apart, then failed; the other message goes once', async () => {
    const busy = `busy-${Date.now()}@example.com`;
    const fine = `fine-${Date.now()}@example.com`;
    sink.rules.set(busy, { rcpt: 'tempfail', times: 1_000 });
    const now = await env.currentTimeMs();
    const refused = await storeEmail({ to: busy }, now);
    const accepted = await storeEmail({ to: fine }, now);
    const batchId = `send-batch-skipping-${Date.now()}`;
    await engine.start(sendBatch, batchId, { batchId, emailIds: [refused, accepted], retryBaseSeconds: 30 });
    assert.deepEqual(await env.client.workflow.getHandle(batchId).result(), { claimed: 2, failed: 1 });

    const events = await history(batchId);
    const passes = scheduled(events, 'deliverBatch');
    assert.equal(passes.length, 4);
    // Each pass runs on the delivery task queue, and what it throws (database or worker trouble)
    // is retried on the database schedule, not after the relay's backoff.
    for (const e of events.filter((x) => x.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverBatch')) {
      const a = e.activityTaskScheduledEventAttributes!;
      assert.equal(a.taskQueue?.name, deliveryTaskQueue);
      assert.deepEqual([a.retryPolicy?.maximumAttempts, tsToMs(a.retryPolicy?.initialInterval)], [10, 1_000]);
    }
    assert.deepEqual(timers(events), [30_000, 60_000, 120_000]);
    const between = gaps(passes);
    // The timers above are the backoff; the wall clock between passes only adds the passes' own run time.
    [30_000, 60_000, 120_000].forEach((wait, i) => assert.ok(between[i] >= wait, `pass ${i + 2} after ${between[i]} ms`));
    assert.equal(scheduled(events, 'failBatch').length, 1);
    assert.ok(scheduled(events, 'failBatch')[0] > passes[3], 'failed after the fourth pass');

    const recipients = await sql<{ address: string; state: string; attempts: number }>(
      `select address, state, attempts from recipients where email_id in (?, ?) order by address`,
      [refused, accepted],
    );
    assert.deepEqual(
      recipients.map((r) => [r.address, r.state, r.attempts]),
      [
        [busy, 'failed', 4],
        [fine, 'sent', 1],
      ],
    );
    assert.equal(await emailStatus(refused), 'failed');
    const [failed] = await sql<{ detail: string }>(`select detail from email_events where email_id = ? and type = 'failed'`, [refused]);
    assert.match(failed.detail, /mailbox busy|temporarily refused/);
    assert.equal(await emailStatus(accepted), 'sent');
    assert.equal(received(fine).length, 1);
    assert.equal(received(busy).length, 0);
  });
});

/**
 * The time-skipping server, started by the SDK. sdk-core gives the JVM a fixed 5 s to answer
 * (crates/sdk-core/src/ephemeral_server/mod.rs: 50 tries 100 ms apart; no option of
 * @temporalio/testing changes it), and a first start reading its 38 MB of jars cold on a busy
 * 2-core machine can take about that long (measured 4.9 s cold, 0.8 s warm). A start that timed
 * out is stopped by the SDK; the next one finds the jars in the page cache.
 */
async function startTimeSkipping(path: string): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } });
    } catch (err) {
      if (attempt >= 3 || !/did not start within/.test(String((err as Error).message))) throw err;
    }
  }
}
