import assert from 'node:assert/strict';
import { startLiveStack, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';

/**
 * Every SendEmail run carries search attributes (worker/temporal-search-attributes.ts) an operator
 * filters by in the Temporal UI or `temporal workflow list --query`: found here by the query an
 * operator would type, against a real Temporal server. Without labels on the start, no query finds it.
 */
describe('Temporal search attributes, live: runs are found by organization, mode, stream and kind', function () {
  this.timeout(120_000);
  let stack: LiveStack;

  before(async function () {
    // A confirmation window: one SendEmail run per message (workflow id = email id), waiting at `sent`.
    stack = await startLiveStack(this, { name: 'labels', confirmationWindowHours: 1 });
  });

  after(async () => stack?.stop());

  const send = async (body: object, as: 'send' | 'test' = 'send') => {
    const res = await stack.call('POST', '/api/v1/emails', {
      as,
      body: { from: `Ops <ops@${stack.domain}>`, subject: 'Labels', text: 'hi', ...body },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (res.body as { id: string }).id;
  };
  const settled = (id: string, status: string) =>
    waitFor(
      async () => ((await stack.call('GET', `/api/v1/emails/${id}`)).body as { last_event: string }).last_event === status,
      `email ${id} to be ${status}`,
      60_000,
    );

  /** Workflow ids the query lists; visibility is eventually consistent, so this polls until `want` are all there. */
  async function listed(query: string, want: string[]): Promise<Set<string>> {
    return waitFor(
      async () => {
        const ids = new Set<string>();
        for await (const wf of stack.client.workflow.list({ query })) ids.add(wf.workflowId);
        return want.every((id) => ids.has(id)) ? ids : undefined;
      },
      `${query} to list ${want.join(', ')}`,
      15_000,
      250,
    );
  }

  it('labels a live send and a test-mode send with their organization, mode, stream and kind', async () => {
    const org = stack.orgId;
    const live = await send({ to: `labels-live-${Date.now()}@example.com`, kind: 'receipt' });
    const test = await send({ to: 'delivered@example.com' }, 'test');
    // Both started (the outbox labels at start); the live one waits at `sent`.
    await settled(live, 'sent');
    await settled(test, 'delivered');

    const liveRuns = await listed(`SvcOrganization = '${org}' AND SvcMode = 'live'`, [live]);
    assert.ok(!liveRuns.has(test), 'the test-mode run is not listed as live');
    const testRuns = await listed(`SvcOrganization = '${org}' AND SvcMode = 'test'`, [test]);
    assert.ok(!testRuns.has(live), 'the live run is not listed as test');
    await listed(`SvcOrganization = '${org}' AND SvcStream = 'transactional' AND SvcKind = 'receipt'`, [live]);

    // The attributes as the UI shows them on the run.
    const described = await stack.client.workflow.getHandle(live).describe();
    const attrs = described.searchAttributes as Record<string, unknown[]>;
    assert.deepEqual(attrs.SvcOrganization, [org]);
    assert.deepEqual(attrs.SvcMode, ['live']);
    assert.deepEqual(attrs.SvcStream, ['transactional']);
    assert.deepEqual(attrs.SvcKind, ['receipt']);
    // The run's summary, the line the UI shows beside its id: what it delivers and for whom.
    const metadata = await stack.client.workflowService.describeWorkflowExecution({
      namespace: stack.temporal.namespace,
      execution: { workflowId: live },
    });
    const summary = metadata.executionConfig?.userMetadata?.summary;
    assert.ok(summary, 'the run carries a summary');
    assert.equal(
      JSON.parse(Buffer.from(summary.data!).toString('utf8')),
      `1 live transactional message (receipt) · organization ${org} · “Labels”`,
    );

    // Another organization's filter finds neither.
    const other = '00000000-0000-7000-8000-000000000000';
    const none = new Set<string>();
    for await (const wf of stack.client.workflow.list({ query: `SvcOrganization = '${other}'` })) none.add(wf.workflowId);
    assert.ok(!none.has(live) && !none.has(test));
  });
});
