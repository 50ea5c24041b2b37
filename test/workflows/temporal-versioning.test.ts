import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import pino from 'pino';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { HistoryBuilder } from '../support/temporal-history';
import { liveTemporal } from '../support/temporal-server';
import { patchedDemo } from '../fixtures/patched-workflow';
import { patched, splitPatches, withPatches, PATCHES_KEY } from '../../workflows/versioning';
import type { WorkflowContext } from '../../workflows/context';

const silent = { warn() {}, info() {}, debug() {}, trace() {}, error() {}, log() {} };

/**
 * Changing a workflow body while runs are in flight (workflows/versioning.ts): a run of release 1
 * (before, after) finishes on its path; a run of release 2 takes the step added behind the patch.
 */
describe('Workflow versioning: a body changed behind a patch, on both engines', function () {
  this.timeout(180_000);
  let bundle: WorkflowBundleWithSourceMap;

  before(async () => {
    installTemporalRuntime(pino({ level: process.env.TEST_LOG_LEVEL || 'silent' }));
    bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../fixtures/patched-workflow'), logger: silent });
  });

  /** Release 1's history: before, after, no marker. `added`: one that took the new step without the marker. */
  const release1 = (added: boolean) => {
    const h = new HistoryBuilder('PatchedDemo', 'versioning', [{}]).workflowTask();
    const b = h.scheduleActivity('before', []);
    h.advance(5).completeActivity(b, 'before').workflowTask();
    if (added) {
      const x = h.scheduleActivity('added', []);
      h.advance(5).completeActivity(x, 'added').workflowTask();
    }
    const a = h.scheduleActivity('after', []);
    h.advance(5).completeActivity(a, 'after').workflowTask();
    return h.complete({ steps: added ? ['before', 'added', 'after'] : ['before', 'after'] }).history();
  };

  it('Temporal: a run recorded by release 1 replays on release 2, on the old path', async () => {
    await Worker.runReplayHistory({ workflowBundle: bundle }, release1(false), 'release-1');
  });

  it('Temporal: a run that took the new step without the marker does not replay (the patch is what tells them apart)', async () => {
    await assert.rejects(Worker.runReplayHistory({ workflowBundle: bundle }, release1(true), 'no-marker'), (err: unknown) => {
      assert.ok(err instanceof DeterminismViolationError, String(err));
      return true;
    });
  });

  it('Temporal: a new run on a real server takes the new step and records the marker; its history replays', async function () {
    const { address } = await liveTemporal(this);
    const taskQueue = `versioning-${process.pid}-${Date.now()}`;
    const connection = await NativeConnection.connect({ address });
    const activities = { before: async () => 'before', added: async () => 'added', after: async () => 'after' };
    const worker = await Worker.create({ connection, taskQueue, workflowBundle: bundle, activities });
    const client = new Client({ connection: await Connection.connect({ address }) });
    try {
      const workflowId = `versioning-${Date.now()}`;
      const result = await worker.runUntil(client.workflow.execute('PatchedDemo', { taskQueue, workflowId, args: [{}] }));
      assert.deepEqual(result, { steps: ['before', 'added', 'after'] });
      const history = await client.workflow.getHandle(workflowId).fetchHistory();
      assert.ok(
        history.events?.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'),
        'the patch marker is in the history',
      );
      await Worker.runReplayHistory({ workflowBundle: bundle }, history, 'release-2');
    } finally {
      await client.connection.close();
      await connection.close();
    }
  });

  it('embedded binding: a run started knowing the patch takes the new step; one started before it keeps the old path after a restart', async () => {
    const calls: string[] = [];
    const ctxFor = (given: unknown): WorkflowContext<{ before(): Promise<string>; added(): Promise<string>; after(): Promise<string> }> => {
      // What worker/dbos-engine.ts gives a body: the patches from the run's own input.
      const { patches } = splitPatches(given);
      const step = (name: string) => async () => (calls.push(name), name);
      return {
        now: async () => 0,
        sleepUntil: async () => undefined,
        waitForSignal: async () => false,
        patched: (id) => patches.has(id),
        activities: { before: step('before'), added: step('added'), after: step('after') },
      };
    };
    const fresh = withPatches(patchedDemo, { emailId: 'e1' });
    assert.deepEqual(fresh, { emailId: 'e1', [PATCHES_KEY]: ['demo-added-step'] });
    assert.deepEqual(splitPatches(fresh).input, { emailId: 'e1' }, 'the body never sees the key');
    assert.deepEqual(await patchedDemo.body(ctxFor(fresh), {}), { steps: ['before', 'added', 'after'] });
    // Its input written by release 1, which knew no patches: recovered by release 2, it keeps its path.
    assert.deepEqual(await patchedDemo.body(ctxFor({ emailId: 'e1' }), {}), { steps: ['before', 'after'] });
    assert.equal(
      patched({ now: async () => 0, sleepUntil: async () => undefined, waitForSignal: async () => false, activities: {} }, 'x'),
      true,
    );
  });
});
