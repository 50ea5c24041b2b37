import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { scenarios, DELIVERY_TASK_QUEUE } from '../support/send-email-scenarios';
import { batchScenarios, replayOnlyBatchScenarios } from '../support/send-batch-scenarios';
import { SEND_BATCH_WORKFLOW } from '../../workflows/send-batch';
import * as temporalWorkflows from '../../workflows/temporal';
import pino from 'pino';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { SEND_EMAIL_WORKFLOW, ADMITTED_SIGNAL } from '../../workflows/send-email';
import { DOMAIN_VERIFICATION_WORKFLOW } from '../../workflows/domain-verification';
import { DKIM_ROTATION_WORKFLOW, DKIM_CANCEL_SIGNAL } from '../../workflows/dkim-rotation';
import { DMARC_RAMP_WORKFLOW, DMARC_REQUEST_SIGNAL } from '../../workflows/dmarc-ramp';
import { HistoryBuilder } from '../support/temporal-history';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { corpusFiles, CORPUS_DIR } from '../support/history-corpus';
import { WEBHOOK_DELIVERY_WORKFLOW, WAKE_SIGNAL } from '../../workflows/webhook-delivery';
import { WEBHOOK_FIRST_ATTEMPTS_WORKFLOW } from '../../workflows/webhook-first-attempts';
import { TASK_QUEUE } from '../support/send-email-scenarios';
import { BROADCAST_WORKFLOW, BROADCAST_PAGE_SIZE } from '../../workflows/broadcast';
import { WORKFLOWS } from '../../workflows';
import { AUTOMATION_RUN_WORKFLOW } from '../../workflows/automation-run';
import { automationRunReplays, automationRunWrongTwins } from '../support/automation-run-scenarios';

const silent = { warn() {}, info() {}, debug() {}, trace() {}, error() {}, log() {} };

/** assert.rejects's check: the replay failed as nondeterministic (and not for another reason). */
function nondeterministic(err: unknown): true {
  assert.ok(err instanceof DeterminismViolationError, `expected a DeterminismViolationError, got ${String(err)}`);
  return true;
}

describe('Temporal engine: bundled workflows replayed through the real worker', function () {
  this.timeout(180_000);
  let bundle: WorkflowBundleWithSourceMap;

  before(async () => {
    installTemporalRuntime(pino({ level: process.env.TEST_LOG_LEVEL || 'silent' }));
    bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows/temporal'), logger: silent });
  });

  it('bundles the workflow code, and each engine names the workflow the same', () => {
    assert.ok(bundle.code.length > 1000);
    assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[SEND_EMAIL_WORKFLOW], 'function');
  });

  it('refuses to bundle workflow code that imports activity implementations or Node modules', async () => {
    const errors: string[] = [];
    const collect = { ...silent, error: (m: string, meta?: unknown) => errors.push(`${m} ${JSON.stringify(meta ?? '')}`) };
    await assert.rejects(
      bundleWorkflowCode({ workflowsPath: path.join(__dirname, '..', 'fixtures', 'bad-workflow.ts'), logger: collect }),
      /Webpack finished with errors/,
    );
    // The bundler names what was refused: Node built-ins pulled in through the activities.
    assert.match(errors.join('\n'), /disallowed|node:|Can't resolve/i, errors.join('\n').slice(0, 2000));
  });

  for (const s of scenarios) {
    it(`replays: ${s.name}`, async () => {
      await Worker.runReplayHistory({ workflowBundle: bundle }, s.history(false).history(), `replay-${s.name}`);
    });

    it(`fails with a determinism error on a wrong history: ${s.name}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, s.history(true).history(), `wrong-${s.name}`),
        nondeterministic,
      );
    });
  }

  for (const s of [...batchScenarios, ...replayOnlyBatchScenarios]) {
    it(`replays SendBatch: ${s.name}`, async () => {
      assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[SEND_BATCH_WORKFLOW], 'function');
      const h = s.history(false);
      // The fixture says what it holds: the activities in order, each on its task queue (deliverBatch
      // is `transport`: the delivery queue the input names), the backoff timers, and the result.
      const events = h.toJSON().events as { eventType: string; [k: string]: unknown }[];
      const scheduled = events
        .filter((e) => e.eventType === 'ActivityTaskScheduled')
        .map((e) => e.activityTaskScheduledEventAttributes as { activityType: { name: string }; taskQueue: { name: string } });
      assert.deepEqual(
        scheduled.map((a) => a.activityType.name),
        s.activities,
      );
      for (const a of scheduled) {
        assert.equal(a.taskQueue.name, a.activityType.name === 'deliverBatch' ? DELIVERY_TASK_QUEUE : TASK_QUEUE, a.activityType.name);
      }
      const timers = events
        .filter((e) => e.eventType === 'TimerStarted')
        .map((e) => (e.timerStartedEventAttributes as { startToFireTimeout: string }).startToFireTimeout);
      const passes = s.activities.filter((a) => a === 'deliverBatch').length;
      assert.deepEqual(timers, ['30s', '60s', '120s'].slice(0, Math.max(0, passes - 1)));
      const done = events.at(-1)!.workflowExecutionCompletedEventAttributes as { result: { payloads: { data: string }[] } };
      assert.deepEqual(JSON.parse(Buffer.from(done.result.payloads[0].data, 'base64').toString()), s.result);
      await Worker.runReplayHistory({ workflowBundle: bundle }, h.history(), `replay-batch-${s.name}`);
    });

    it(`fails with a determinism error on a wrong SendBatch history: ${s.name}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, s.history(true).history(), `wrong-batch-${s.name}`),
        nondeterministic,
      );
    });
  }

  /** Pending on the first check, verified on the second after a 60 s timer; wrong: no wait between checks. */
  function domainHistory(wrong: boolean): HistoryBuilder {
    const id = '019a0000-0000-7000-8000-0000000000d1';
    const h = new HistoryBuilder(DOMAIN_VERIFICATION_WORKFLOW, TASK_QUEUE, [
      { domainId: id, firstDelayMs: 60_000, maxDelayMs: 3_600_000, windowMs: 72 * 3_600_000 },
    ]).workflowTask();
    const first = h.scheduleActivity('checkDomain', [id]);
    h.advance(20).completeActivity(first, { status: 'pending' });
    h.workflowTask();
    if (!wrong) {
      const t = h.startTimer(60_000);
      h.advance(60_000).fireTimer(t).workflowTask();
    }
    const second = h.scheduleActivity('checkDomain', [id]);
    h.advance(20).completeActivity(second, { status: 'verified' });
    return h.workflowTask().complete({ status: 'verified', checks: 2 });
  }

  it('replays DomainVerification: pending, a timer, then verified', async () => {
    assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[DOMAIN_VERIFICATION_WORKFLOW], 'function');
    await Worker.runReplayHistory({ workflowBundle: bundle }, domainHistory(false).history(), 'replay-domain');
  });

  it('fails with a determinism error on a DomainVerification history without the backoff timer', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, domainHistory(true).history(), 'wrong-domain'),
      DeterminismViolationError,
    );
  });

  /**
   * DkimRotation: the pending key published (not connected: `published: false`), three matching
   * checks a minute apart, the switch, published, the 7-day retiring timer, the revocation,
   * published (the empty key). `canceled`: the console's cancel signal ends the first wait, the next
   * check finds the key gone, and the revoked key is published. `ttl`: the record is served with a
   * TTL of 150 s, so the third match (at 2 min) is not enough and a fourth (at 3 min) switches.
   * Wrong twins: `wrong`, the revocation right after the switch, without the retiring timer;
   * `ttl-early`, the switch after the third match although the matches span less than the TTL.
   */
  function dkimHistory(kind: 'rotated' | 'canceled' | 'ttl' | 'wrong' | 'ttl-early'): HistoryBuilder {
    const [domainId, keyId, oldKeyId] = [
      '019a0000-0000-7000-8000-0000000000e1',
      '019a0000-0000-7000-8000-0000000000e2',
      '019a0000-0000-7000-8000-0000000000e3',
    ];
    const retiringMs = 7 * 86_400_000;
    const ttl = kind === 'ttl' || kind === 'ttl-early';
    const h = new HistoryBuilder(DKIM_ROTATION_WORKFLOW, TASK_QUEUE, [
      { domainId, keyId, checkIntervalMs: 60_000, requiredChecks: 3, minSpreadMs: 100_000, retiringMs, windowMs: 14 * 86_400_000 },
    ]).workflowTask();
    const publish = () => {
      const p = h.scheduleActivity('publishDkimRecords', [domainId]);
      h.advance(20).completeActivity(p, { published: false }).workflowTask();
    };
    publish();
    const matches = kind === 'ttl' ? 4 : 3;
    for (let i = 1; i <= matches; i++) {
      const check = h.scheduleActivity('checkDkimKey', [keyId]);
      h.advance(20)
        .completeActivity(check, { state: 'pending', matches: true, ttlSeconds: ttl ? 150 : 1 })
        .workflowTask();
      if (i === matches) break;
      const t = h.startTimer(60_000);
      if (kind === 'canceled') {
        h.advance(1_000).signal(DKIM_CANCEL_SIGNAL).workflowTask().cancelTimer(t);
        const gone = h.scheduleActivity('checkDkimKey', [keyId]);
        h.advance(20).completeActivity(gone, { state: 'gone', matches: false }).workflowTask();
        const p = h.scheduleActivity('publishDkimRecords', [domainId]);
        h.advance(20).completeActivity(p, { published: false });
        return h.workflowTask().complete({ outcome: 'canceled', checks: 2 });
      }
      h.advance(60_000).fireTimer(t).workflowTask();
    }
    const sw = h.scheduleActivity('switchDkimKey', [keyId, retiringMs]);
    h.advance(20)
      .completeActivity(sw, { switched: true, retiringKeyIds: [oldKeyId] })
      .workflowTask();
    publish();
    if (kind !== 'wrong') {
      const t = h.startTimer(retiringMs);
      h.advance(retiringMs).fireTimer(t).workflowTask();
    }
    const revoke = h.scheduleActivity('revokeDkimKeys', [domainId, [oldKeyId]]);
    h.advance(20).completeActivity(revoke, null).workflowTask();
    const p = h.scheduleActivity('publishDkimRecords', [domainId]);
    h.advance(20).completeActivity(p, { published: false });
    return h.workflowTask().complete({ outcome: 'revoked', checks: matches });
  }

  for (const [kind, what] of [
    ['rotated', 'published, three matching checks, the switch, the retiring timer, the revocation, each published'],
    ['canceled', 'canceled by signal in its wait between checks'],
    ['ttl', "a fourth matching check, for the record's TTL of 150 s"],
  ] as const) {
    it(`replays DkimRotation: ${what}`, async () => {
      await Worker.runReplayHistory({ workflowBundle: bundle }, dkimHistory(kind).history(), `replay-dkim-${kind}`);
    });
  }

  for (const [kind, what] of [
    ['wrong', 'revokes without the retiring timer'],
    ['ttl-early', "switches before the matches span the record's TTL"],
  ] as const) {
    it(`fails with a determinism error on a DkimRotation history that ${what}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, dkimHistory(kind).history(), `wrong-dkim-${kind}`),
        DeterminismViolationError,
      );
    });
  }

  /**
   * DmarcRamp: the start's record published, a daily gate check, a day's timer, another check;
   * then the operator's advance signal ends the wait and is applied and its record published, and a
   * stop signal ends the run. `wrong`: the request applied right after the first check, without
   * the wait for a signal; `unpublished`: the advance applied without its publish step.
   */
  function dmarcHistory(kind: 'stepped' | 'wrong' | 'unpublished'): HistoryBuilder {
    const domainId = '019a0000-0000-7000-8000-0000000000f1';
    const runId = `dmarc-ramp:${domainId}:019a0000-0000-7000-8000-0000000000f2`;
    const day = 86_400_000;
    const h = new HistoryBuilder(DMARC_RAMP_WORKFLOW, TASK_QUEUE, [
      { domainId, checkIntervalMs: day, runId, startedBy: 'console:op@example.com' },
    ]).workflowTask();
    const publish = () => {
      const a = h.scheduleActivity('publishDmarcRecord', [domainId, 'console:op@example.com']);
      h.advance(20).completeActivity(a, { state: 'pending' }).workflowTask();
    };
    const check = (holds: boolean) => {
      const a = h.scheduleActivity('checkDmarcGate', [domainId, 0, runId]);
      h.advance(20).completeActivity(a, { state: 'running', holds, requested: false }).workflowTask();
    };
    const apply = (result: { state: string; applied: string; by?: string }) => {
      const a = h.scheduleActivity('applyDmarcRequest', [domainId, 0, runId]);
      h.advance(20).completeActivity(a, result).workflowTask();
    };
    publish();
    check(false);
    if (kind === 'wrong') {
      apply({ state: 'stopped', applied: 'stopped' });
      return h.complete({ outcome: 'stopped', checks: 1, requests: 1 });
    }
    const t1 = h.startTimer(day);
    h.advance(day).fireTimer(t1).workflowTask();
    check(true);
    const t2 = h.startTimer(day);
    h.advance(3_600_000).signal(DMARC_REQUEST_SIGNAL).workflowTask().cancelTimer(t2);
    apply({ state: 'running', applied: 'advanced', by: 'console:op@example.com' });
    if (kind !== 'unpublished') publish();
    check(false);
    const t3 = h.startTimer(day);
    h.advance(60_000).signal(DMARC_REQUEST_SIGNAL).workflowTask().cancelTimer(t3);
    apply({ state: 'stopped', applied: 'stopped' });
    return h.complete({ outcome: 'stopped', checks: 3, requests: 2 });
  }

  it('replays DmarcRamp: the record published at the start and after an advance, daily checks on a timer, a stop by signal', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, dmarcHistory('stepped').history(), 'replay-dmarc-ramp');
  });

  it('fails with a determinism error on a DmarcRamp history that applies a request without waiting for its signal', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, dmarcHistory('wrong').history(), 'wrong-dmarc-ramp'),
      DeterminismViolationError,
    );
  });

  it('fails with a determinism error on a DmarcRamp history that applies a step without publishing it', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, dmarcHistory('unpublished').history(), 'unpublished-dmarc-ramp'),
      DeterminismViolationError,
    );
  });

  /**
   * A 500, the 5 s wait, then a 2xx; wrong: the second attempt without the wait. `superseded`: a
   * manual retry wakes the run in its wait and the next attempt stops.
   */
  function webhookHistory(kind: 'retried' | 'wrong' | 'superseded'): HistoryBuilder {
    const id = '019a0000-0000-7000-8000-0000000000w1';
    const h = new HistoryBuilder(WEBHOOK_DELIVERY_WORKFLOW, TASK_QUEUE, [
      { deliveryId: id, run: 1, transportRetryBaseSeconds: 30 },
    ]).workflowTask();
    const first = h.scheduleActivity('attemptWebhookDelivery', [{ deliveryId: id, run: 1, retryInMs: 5_000 }]);
    h.advance(30);
    const next = h.now + 5_000;
    h.completeActivity(first, { outcome: 'retry', nextAttemptAtMs: next }).workflowTask();
    if (kind !== 'wrong') {
      const t = h.startTimer(next - h.now);
      if (kind === 'superseded')
        h.advance(1_000)
          .signal(WAKE_SIGNAL, [{ at: h.now }])
          .workflowTask()
          .cancelTimer(t);
      else h.advance(5_000).fireTimer(t).workflowTask();
    }
    const second = h.scheduleActivity('attemptWebhookDelivery', [{ deliveryId: id, run: 1, retryInMs: 300_000 }]);
    const outcome = kind === 'superseded' ? 'stopped' : 'succeeded';
    h.advance(30).completeActivity(second, { outcome });
    return h.workflowTask().complete({ status: outcome, attempts: 2 });
  }

  for (const kind of ['retried', 'superseded'] as const) {
    it(`replays WebhookDelivery: ${kind === 'retried' ? 'a 500, the 5 s timer, then a 2xx' : 'woken in its wait by a newer run, then stopped'}`, async () => {
      assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[WEBHOOK_DELIVERY_WORKFLOW], 'function');
      await Worker.runReplayHistory({ workflowBundle: bundle }, webhookHistory(kind).history(), `replay-webhook-${kind}`);
    });
  }

  /** Handed back by a batch after a failed first attempt: waits until due, then the second attempt; wrong: no wait. */
  function handedBackHistory(wrong: boolean): HistoryBuilder {
    const id = '019a0000-0000-7000-8000-0000000000w2';
    const start = Date.UTC(2026, 10, 22, 12, 0, 0);
    const due = start + 4_000;
    const h = new HistoryBuilder(WEBHOOK_DELIVERY_WORKFLOW, TASK_QUEUE, [
      { deliveryId: id, run: 1, fromAttempt: 1, nextAttemptAtMs: due, transportRetryBaseSeconds: 30 },
    ]).workflowTask();
    if (!wrong) {
      const t = h.startTimer(due - h.now);
      h.advance(due - h.now)
        .fireTimer(t)
        .workflowTask();
    }
    const second = h.scheduleActivity('attemptWebhookDelivery', [{ deliveryId: id, run: 1, retryInMs: 300_000 }]);
    h.advance(30).completeActivity(second, { outcome: 'succeeded' });
    return h.workflowTask().complete({ status: 'succeeded', attempts: 2 });
  }

  it('replays WebhookDelivery handed back by a batch: the wait until due, then the second attempt', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, handedBackHistory(false).history(), 'replay-webhook-handed-back');
  });

  it('fails with a determinism error on a handed-back WebhookDelivery history without the wait', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, handedBackHistory(true).history(), 'wrong-webhook-handed-back'),
      DeterminismViolationError,
    );
  });

  /** One activity with every first attempt; wrong: a timer before it, which the body never starts. */
  function firstAttemptsHistory(wrong: boolean): HistoryBuilder {
    const deliveries = ['019a0000-0000-7000-8000-0000000000b1', '019a0000-0000-7000-8000-0000000000b2'].map((deliveryId) => ({
      deliveryId,
      run: 1,
    }));
    const h = new HistoryBuilder(WEBHOOK_FIRST_ATTEMPTS_WORKFLOW, TASK_QUEUE, [
      { deliveries, transportRetryBaseSeconds: 30 },
    ]).workflowTask();
    if (wrong) {
      const t = h.startTimer(1_000);
      h.advance(1_000).fireTimer(t).workflowTask();
    }
    const batch = h.scheduleActivity('attemptWebhookBatch', [{ deliveries, retryInMs: 5_000 }]);
    const tally = { succeeded: 1, failed: 0, handedBack: 1, skipped: 0 };
    h.advance(40).completeActivity(batch, tally);
    return h.workflowTask().complete(tally);
  }

  it('replays WebhookFirstAttempts: one batch activity, then done', async () => {
    assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[WEBHOOK_FIRST_ATTEMPTS_WORKFLOW], 'function');
    await Worker.runReplayHistory({ workflowBundle: bundle }, firstAttemptsHistory(false).history(), 'replay-webhook-first');
  });

  it('fails with a determinism error on a WebhookFirstAttempts history with a timer the body never starts', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, firstAttemptsHistory(true).history(), 'wrong-webhook-first'),
      DeterminismViolationError,
    );
  });

  /**
   * Scheduled an hour ahead: the timer (Date.now() in the first workflow task is the start event's
   * time, so the timer runs scheduledAtMs minus that), the audience frozen at 2,500, three pages
   * through the cursor, then finishFanOut. Wrong twins: no timer, a history that completes
   * without finishFanOut, and one with a fourth page the body never asks for. Replay matches
   * commands by kind, type and sequence id only: activity arguments, timer durations and the result
   * are not compared (pages in another order replay fine), so the twins change the command
   * sequence, and the cursor and the result are the body tests' to check.
   */
  function broadcastHistory(kind: 'right' | 'no-timer' | 'no-finish' | 'extra-page'): HistoryBuilder {
    const id = '019a0000-0000-7000-8000-0000000000c1';
    const start = Date.UTC(2026, 10, 22, 12, 0, 0);
    const scheduledAtMs = start + 3_600_000;
    const h = new HistoryBuilder(
      BROADCAST_WORKFLOW,
      TASK_QUEUE,
      [{ broadcastId: id, scheduledAtMs, transportRetryBaseSeconds: 30 }],
      start,
    );
    h.workflowTask();
    if (kind !== 'no-timer') {
      const t = h.startTimer(scheduledAtMs - h.now);
      h.advance(scheduledAtMs - h.now)
        .fireTimer(t)
        .workflowTask();
    }
    const freeze = h.scheduleActivity('freezeAudience', [id]);
    h.advance(300).completeActivity(freeze, { state: 'sending', recipients: 2500, next: 0 }).workflowTask();
    const pages = [
      { from: 0, result: { next: 1000, done: false, stopped: null } },
      { from: 1000, result: { next: 2000, done: false, stopped: null } },
      { from: 2000, result: { next: 2500, done: true, stopped: null } },
    ];
    if (kind === 'extra-page') pages.push({ from: 2500, result: { next: 2500, done: true, stopped: null } });
    for (const p of pages) {
      const a = h.scheduleActivity('enqueuePage', [id, p.from, BROADCAST_PAGE_SIZE]);
      h.advance(800).completeActivity(a, p.result).workflowTask();
    }
    if (kind !== 'no-finish') {
      const finish = h.scheduleActivity('finishFanOut', [id]);
      h.advance(10).completeActivity(finish, null).workflowTask();
    }
    return h.complete({ status: 'sending', recipients: 2500, pages: kind === 'extra-page' ? 4 : 3 });
  }

  /** Canceled before its (immediate) start: freeze answers canceled, and the run ends; wrong: a page after it. */
  function canceledBroadcastHistory(wrong: boolean): HistoryBuilder {
    const id = '019a0000-0000-7000-8000-0000000000c2';
    const h = new HistoryBuilder(BROADCAST_WORKFLOW, TASK_QUEUE, [{ broadcastId: id, scheduledAtMs: null, transportRetryBaseSeconds: 30 }]);
    h.workflowTask();
    const freeze = h.scheduleActivity('freezeAudience', [id]);
    h.advance(20).completeActivity(freeze, { state: 'canceled', recipients: 0, next: 0 }).workflowTask();
    if (wrong) {
      const a = h.scheduleActivity('enqueuePage', [id, 0, BROADCAST_PAGE_SIZE]);
      h.advance(20).completeActivity(a, { next: 0, done: true, stopped: 'canceled' }).workflowTask();
    }
    return h.complete({ status: 'canceled', recipients: 0, pages: wrong ? 1 : 0 });
  }

  it('replays BroadcastFanOut: the timer to scheduled_at, the freeze, three pages through the cursor, then finishFanOut', async () => {
    assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[BROADCAST_WORKFLOW], 'function');
    await Worker.runReplayHistory({ workflowBundle: bundle }, broadcastHistory('right').history(), 'replay-broadcast');
  });

  for (const kind of ['no-timer', 'no-finish', 'extra-page'] as const) {
    const what = {
      'no-timer': 'without the timer to scheduled_at',
      'no-finish': 'that completes without finishFanOut',
      'extra-page': 'with a page after the last',
    }[kind];
    it(`fails with a determinism error on a BroadcastFanOut history ${what}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, broadcastHistory(kind).history(), `wrong-broadcast-${kind}`),
        DeterminismViolationError,
      );
    });
  }

  it('replays a canceled BroadcastFanOut: the freeze answers canceled and the run completes at once', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, canceledBroadcastHistory(false).history(), 'replay-broadcast-canceled');
  });

  it('fails with a determinism error on a canceled BroadcastFanOut history that goes on to a page', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, canceledBroadcastHistory(true).history(), 'wrong-broadcast-canceled'),
      DeterminismViolationError,
    );
  });

  for (const r of automationRunReplays) {
    it(`replays AutomationRun: ${r.name}`, async () => {
      assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[AUTOMATION_RUN_WORKFLOW], 'function');
      const h = r.history();
      // The fixture says what it holds: the activities in order and the result it completes with.
      const events = h.toJSON().events as { eventType: string; [k: string]: unknown }[];
      const scheduled = events
        .filter((e) => e.eventType === 'ActivityTaskScheduled')
        .map((e) => (e.activityTaskScheduledEventAttributes as { activityType: { name: string } }).activityType.name);
      assert.deepEqual(scheduled, r.activities);
      const done = events.at(-1)!.workflowExecutionCompletedEventAttributes as { result: { payloads: { data: string }[] } };
      assert.deepEqual(JSON.parse(Buffer.from(done.result.payloads[0].data, 'base64').toString()), r.result);
      await Worker.runReplayHistory({ workflowBundle: bundle }, h.history(), `replay-automation-${r.name}`);
    });
  }

  for (const w of automationRunWrongTwins) {
    it(`fails with a determinism error on an AutomationRun history: ${w.name}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, w.history().history(), `wrong-automation-${w.name}`),
        DeterminismViolationError,
      );
    });
  }

  /**
   * A scheduled message started ahead of its time by the outbox (ENGINE=temporal, handBack): the
   * timer to scheduled_at, handBack, then (window) the outbox's `admitted` signal, the claim and
   * the delivery. `wrong`: where the history departs from the code.
   */
  const handBackHistory = (window: boolean, wrong: 'none' | 'no-timer' | 'claims-without-admission' | 'claims-without-window') => {
    const HOUR = 3_600_000;
    const input = {
      emailId: EMAIL,
      handBack: true,
      confirmationWindowMs: window ? HOUR : 0,
      transportRetryBaseSeconds: 30,
      deliveryTaskQueue: DELIVERY_TASK_QUEUE,
    };
    const h = new HistoryBuilder(SEND_EMAIL_WORKFLOW, TASK_QUEUE, [input]).workflowTask();
    const load = h.scheduleActivity('loadForSend', [EMAIL]);
    h.advance(5)
      .completeActivity(load, { status: 'queued', scheduledAtMs: h.now + 3 * 24 * HOUR })
      .workflowTask();
    if (wrong !== 'no-timer') {
      const t = h.startTimer(3 * 24 * HOUR);
      h.advance(3 * 24 * HOUR)
        .fireTimer(t)
        .workflowTask();
    }
    const back = h.scheduleActivity('handBack', [EMAIL]);
    h.advance(5).completeActivity(back, { status: 'queued' }).workflowTask();
    if (!window && wrong !== 'claims-without-window') return h.complete({ status: 'queued' });
    // The wait for admission: a timer of the hourly recheck, ended by the outbox's signal.
    const wait = h.startTimer(HOUR);
    if (wrong !== 'claims-without-admission') {
      h.advance(1_000)
        .signal(ADMITTED_SIGNAL, [{ at: h.now }])
        .workflowTask();
      h.cancelTimer(wait);
    }
    const claim = h.scheduleActivity('claimForDelivery', [EMAIL]);
    h.advance(5).completeActivity(claim, { outcome: 'claimed' }).workflowTask();
    const d = h.scheduleActivity('deliver', [EMAIL], DELIVERY_TASK_QUEUE);
    h.advance(200).completeActivity(d, { status: 'sent' }).workflowTask();
    const confirm = h.startTimer(HOUR);
    h.advance(HOUR).fireTimer(confirm).workflowTask();
    return h.complete({ status: 'sent' });
  };
  const EMAIL = '019a0000-0000-7000-8000-0000000000ab';

  it('replays SendEmail handed back: the 3-day timer, handBack, and the run ends (a SendBatch delivers it)', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, handBackHistory(false, 'none').history(), 'hand-back');
  });

  it('replays SendEmail handed back with a window: the timer, handBack, admitted by signal, claim, deliver, the window', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, handBackHistory(true, 'none').history(), 'hand-back-window');
  });

  for (const [window, wrong, what] of [
    [false, 'no-timer', 'without the timer to scheduled_at'],
    [false, 'claims-without-window', 'that claims and delivers though no window makes the run wait for admission'],
    [true, 'claims-without-admission', 'that claims before the outbox admitted it'],
  ] as const) {
    it(`fails with a determinism error on a handed-back SendEmail history ${what}`, async () => {
      await assert.rejects(
        Worker.runReplayHistory({ workflowBundle: bundle }, handBackHistory(window, wrong).history(), `hand-back-${wrong}`),
        nondeterministic,
      );
    });
  }

  /**
   * A scheduled message's run canceled from the Temporal UI while on its timer, as a run recorded
   * before OPERATOR_CANCEL_PATCH ran it: the body unwound and the run ended canceled.
   */
  it('replays SendEmail canceled by an operator on its timer, as recorded before the cancellation was settled in PostgreSQL', async () => {
    const HOUR = 3_600_000;
    const input = {
      emailId: EMAIL,
      handBack: true,
      confirmationWindowMs: 0,
      transportRetryBaseSeconds: 30,
      deliveryTaskQueue: DELIVERY_TASK_QUEUE,
    };
    const h = new HistoryBuilder(SEND_EMAIL_WORKFLOW, TASK_QUEUE, [input]).workflowTask();
    const load = h.scheduleActivity('loadForSend', [EMAIL]);
    h.advance(5)
      .completeActivity(load, { status: 'queued', scheduledAtMs: h.now + 3 * 24 * HOUR })
      .workflowTask();
    const t = h.startTimer(3 * 24 * HOUR);
    h.advance(60_000).cancelRequested().workflowTask().cancelTimer(t).canceled();
    await Worker.runReplayHistory({ workflowBundle: bundle }, h.history(), 'operator-cancel-before-patch');
  });

  // Recorded by the live suite (temporal-live-scheduled.test.ts, "canceled from the Temporal UI"):
  // the patch marker, cancelForOperator, the timer ended, handBack, completed `canceled`.
  const recorded = (name: string) =>
    historyFromJSON(JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'temporal-histories', `${name}.json`), 'utf8')));
  for (const name of ['send-email-operator-cancel', 'send-email-operator-cancel-window']) {
    it(`replays a recorded history: ${name}`, async () => {
      await Worker.runReplayHistory({ workflowBundle: bundle }, recorded(name), name);
    });
  }

  it("fails with a determinism error on the recorded operator cancellation where the run skips the database's cancel", async () => {
    const history = JSON.parse(
      fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'temporal-histories', 'send-email-operator-cancel.json'), 'utf8'),
    );
    const scheduled = history.events.find(
      (e: { activityTaskScheduledEventAttributes?: { activityType: { name: string } } }) =>
        e.activityTaskScheduledEventAttributes?.activityType.name === 'cancelForOperator',
    );
    scheduled.activityTaskScheduledEventAttributes.activityType.name = 'handBack';
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, historyFromJSON(history), 'operator-cancel-wrong'),
      (err: unknown) => {
        assert.ok(err instanceof DeterminismViolationError, `expected a DeterminismViolationError, got ${String(err)}`);
        return true;
      },
    );
  });

  // The corpus (test/support/history-corpus.ts): every history recorded from a release, replayed
  // with today's bundle. One that no longer replays is a body changed without a version patch.
  describe('the history corpus', () => {
    for (const file of corpusFiles()) {
      const name = path.relative(CORPUS_DIR, file);
      it(`replays ${name}`, async () => {
        await Worker.runReplayHistory({ workflowBundle: bundle }, historyFromJSON(JSON.parse(fs.readFileSync(file, 'utf8'))), name);
      });
    }
  });

  it('has a replay case for every workflow in WORKFLOWS, each exported from the bundle entry under its name', () => {
    const replayed = new Set([
      ...scenarios.map((s) => s.history(false).workflowType),
      ...batchScenarios.map((s) => s.history(false).workflowType),
      domainHistory(false).workflowType,
      dkimHistory('rotated').workflowType,
      dmarcHistory('stepped').workflowType,
      webhookHistory('retried').workflowType,
      firstAttemptsHistory(false).workflowType,
      broadcastHistory('right').workflowType,
      ...automationRunReplays.map((r) => r.history().workflowType),
    ]);
    for (const def of WORKFLOWS) {
      assert.equal(
        typeof (temporalWorkflows as Record<string, unknown>)[def.name],
        'function',
        `${def.name} is exported from workflows/temporal`,
      );
      assert.ok(replayed.has(def.name), `${def.name} has a replay case`);
    }
  });

  it('fails with a determinism error on a WebhookDelivery history without the wait between attempts', async () => {
    await assert.rejects(
      Worker.runReplayHistory({ workflowBundle: bundle }, webhookHistory('wrong').history(), 'wrong-webhook'),
      DeterminismViolationError,
    );
  });
});
