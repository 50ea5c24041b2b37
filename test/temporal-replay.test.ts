import assert from 'node:assert/strict';
import path from 'node:path';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { scenarios } from './support/send-email-scenarios';
import * as temporalWorkflows from '../workflows/temporal';
import pino from 'pino';
import { installTemporalRuntime } from '../worker/temporal-runtime';
import { SEND_EMAIL_WORKFLOW } from '../workflows/send-email';

const silent = { warn() {}, info() {}, debug() {}, trace() {}, error() {}, log() {} };

describe('Temporal engine: bundled workflows replayed through the real worker', function () {
  this.timeout(180_000);
  let bundle: WorkflowBundleWithSourceMap;

  before(async () => {
    installTemporalRuntime(pino({ level: process.env.TEST_LOG_LEVEL || 'silent' }));
    bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows/temporal'), logger: silent });
  });

  it('bundles the workflow code, and each engine names the workflow the same', () => {
    assert.ok(bundle.code.length > 1000);
    assert.equal(typeof (temporalWorkflows as Record<string, unknown>)[SEND_EMAIL_WORKFLOW], 'function');
  });

  it('refuses to bundle workflow code that imports activity implementations or Node modules', async () => {
    const errors: string[] = [];
    const collect = { ...silent, error: (m: string, meta?: unknown) => errors.push(`${m} ${JSON.stringify(meta ?? '')}`) };
    await assert.rejects(bundleWorkflowCode({ workflowsPath: path.join(__dirname, 'fixtures', 'bad-workflow.ts'), logger: collect }), /Webpack finished with errors/);
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
});
