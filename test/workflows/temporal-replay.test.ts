import assert from 'node:assert/strict';
import path from 'node:path';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { scenarios } from '../support/send-email-scenarios';
import * as temporalWorkflows from '../../workflows/temporal';
import pino from 'pino';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { SEND_EMAIL_WORKFLOW } from '../../workflows/send-email';
import { DOMAIN_VERIFICATION_WORKFLOW } from '../../workflows/domain-verification';
import { HistoryBuilder } from '../support/temporal-history';
import { TASK_QUEUE } from '../support/send-email-scenarios';

const silent = { warn() {}, info() {}, debug() {}, trace() {}, error() {}, log() {} };

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
        (err: unknown) => {
          assert.ok(err instanceof DeterminismViolationError, `expected a DeterminismViolationError, got ${String(err)}`);
          return true;
        },
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
});
