import assert from 'node:assert/strict';
import { activitiesOf, signalsOf, startLiveStack, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';

/**
 * AutomationRun on a real Temporal server: POST /events starts a run per contact (the automation
 * dispatcher in the API process), the worker runs its steps, and a second POST /events resumes
 * the waits through the `wake` signal.
 */
describe('Temporal engine, live: AutomationRun', function () {
  this.timeout(120_000);
  let s: LiveStack;

  before(async function () {
    s = await startLiveStack(this, { name: 'automations' });
  });
  after(async () => s?.stop());

  const runsOf = async (automationId: string) => {
    const res = await s.call('GET', `/api/v1/automations/${automationId}/runs`, { as: 'admin' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data as any[];
  };
  const runOf = (automationId: string, email: string, statuses: string[]) =>
    waitFor(
      async () => (await runsOf(automationId)).find((r) => r.contact.email === email && statuses.includes(r.status)),
      `the run of ${email} to be ${statuses.join('/')}`,
      30_000,
    );
  const mailTo = (address: string) => s.sink.received.filter((m) => m.envelopeTo.includes(address));

  it('a delay, a wait_for_event resumed by POST /events, a condition and a send: the run completes and the mail arrives', async () => {
    const tpl = await s.call('POST', '/api/v1/templates', {
      as: 'admin',
      body: {
        name: 'Welcome',
        slug: `welcome-${Date.now()}`,
        subject: 'Welcome aboard, {{first_name}}',
        html: '<p>Your plan: {{plan}}</p>',
        variables: [
          { key: 'first_name', type: 'string', fallback: 'there' },
          { key: 'plan', type: 'string', fallback: 'none' },
        ],
      },
    });
    assert.equal(tpl.status, 201, JSON.stringify(tpl.body));
    assert.equal((await s.call('POST', `/api/v1/templates/${tpl.body.id}/publish`, { as: 'admin' })).status, 201);
    const created = await s.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: {
        name: 'Activation',
        trigger: { event: 'signed_up' },
        steps: [
          { type: 'delay', duration: 'PT2S' },
          { type: 'wait_for_event', event: 'activated', timeout: 'PT60S' },
          {
            type: 'condition',
            if: { property: 'plan', equals: 'pro' },
            then: [{ type: 'send_email', from: `Team <team@${s.domain}>`, template: { id: tpl.body.id } }],
            else: [{ type: 'update_contact', properties: { nudged: true } }],
          },
        ],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const automationId = created.body.id as string;
    const tag = Date.now();
    const pro = `pro-${tag}@people.example`;
    const free = `free-${tag}@people.example`;
    for (const [email, first_name, plan] of [
      [pro, 'Ann', 'pro'],
      [free, 'Bob', 'free'],
    ]) {
      const ev = await s.call('POST', '/api/v1/events', { body: { name: 'signed_up', email, data: { first_name, plan } } });
      assert.equal(ev.status, 200, JSON.stringify(ev.body));
      assert.equal(ev.body.runs, 1);
    }

    // Both get through the delay and wait for `activated`; nothing is sent meanwhile.
    const waiting = await runOf(automationId, pro, ['waiting']);
    assert.equal(waiting.step, 'steps[1]');
    assert.equal(waiting.waiting_for.event, 'activated');
    assert.deepEqual(
      waiting.history.map((h: any) => [h.step, h.type, h.result?.outcome]),
      [
        ['steps[0]', 'delay', 'elapsed'],
        ['steps[1]', 'wait_for_event', undefined],
      ],
    );
    await runOf(automationId, free, ['waiting']);
    assert.equal(mailTo(pro).length, 0);

    for (const email of [pro, free]) {
      const ev = await s.call('POST', '/api/v1/events', { body: { name: 'activated', email } });
      assert.equal(ev.status, 200, JSON.stringify(ev.body));
    }
    const done = await runOf(automationId, pro, ['completed', 'failed', 'canceled']);
    assert.equal(done.status, 'completed');
    assert.deepEqual(
      done.history.map((h: any) => [h.step, h.type, h.result?.outcome ?? h.result?.branch]),
      [
        ['steps[0]', 'delay', 'elapsed'],
        ['steps[1]', 'wait_for_event', 'event'],
        ['steps[2]', 'condition', 'then'],
        ['steps[2].then[0]', 'send_email', 'accepted'],
      ],
    );
    const mail = await waitFor(async () => mailTo(pro)[0], 'the welcome mail at the sink');
    assert.equal(mail.parsed.subject, 'Welcome aboard, Ann');
    assert.ok(String(mail.parsed.html).includes('Your plan: pro'));

    // The other branch: no mail, the contact updated instead.
    const other = await runOf(automationId, free, ['completed', 'failed', 'canceled']);
    assert.equal(other.status, 'completed');
    assert.deepEqual(
      other.history.slice(2).map((h: any) => [h.step, h.type, h.result?.outcome ?? h.result?.branch]),
      [
        ['steps[2]', 'condition', 'else'],
        ['steps[2].else[0]', 'update_contact', 'updated'],
      ],
    );
    assert.equal((await s.call('GET', `/api/v1/contacts/${encodeURIComponent(free)}`, { as: 'admin' })).body.properties.nudged, true);
    assert.equal(mailTo(free).length, 0);

    // What the server ran: one AutomationRun per contact, the wait ended by the `wake` signal.
    const run = await s.run(`automation-run:${done.id}`);
    assert.equal(run.type, 'AutomationRun');
    assert.equal(run.taskQueue, s.temporal.taskQueue);
    assert.deepEqual(run.result, { status: 'completed', reason: null, steps: 4 });
    assert.deepEqual(activitiesOf(run), [
      'beginRun',
      'enterDelay',
      'finishDelay',
      'beginWait',
      'endWait',
      'conditionStep',
      'sendEmailStep',
      'finishRun',
    ]);
    assert.deepEqual(signalsOf(run), ['wake']);
    const otherRun = await s.run(`automation-run:${other.id}`);
    assert.deepEqual(otherRun.result, { status: 'completed', reason: null, steps: 4 });
    assert.ok(activitiesOf(otherRun).includes('updateContactStep') && !activitiesOf(otherRun).includes('sendEmailStep'));
  });
});
