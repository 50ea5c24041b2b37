import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startLiveStack, type LiveStack } from '../support/temporal-live';
import { WebhookReceiver } from '../support/webhook-receiver';
import { skipBecause } from '../support/skips';
import { waitFor } from '../support/wait';
import { FlatConsoleClient, newOperator } from '../support/console';
import type { TestEnv } from '../support/service';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The release whose workflow code starts the runs: the one the history corpus was recorded from
 * (test/fixtures/temporal-histories/v0.1.0-2026-12-02). Its `workflows/` tree comes out of git.
 */
const RELEASE = { name: 'v0.1.0', commit: '1d77ed6b93b6fbe508a9ce8447c0a005fb78490b' };

/**
 * An upgrade with workflows in flight, as an operator rolls one out on a cluster: runs started by
 * the previous release's workers (its workflow code, from git), those workers stopped, and this
 * release's started on the same task queue. Every run then finishes on the new code, replaying
 * what the old one recorded: a scheduled SendEmail waiting on its timer, an AutomationRun in its
 * delay and then waiting for an event, a WebhookDelivery in its backoff. This release changed the
 * bodies behind a patch (`outcome-search-attribute`: a run sets SvcOutcome as it ends), which the
 * runs take after the upgrade. (A change that alters what old runs already recorded, made without
 * its patch, would leave their workflow tasks failing on nondeterminism: the waits here would time
 * out, as the replay of the history corpus fails.)
 */
describe('Temporal upgrade: runs started by the previous release finish on this one', function () {
  this.timeout(240_000);
  let s: LiveStack;
  let receiver: WebhookReceiver;
  /** The previous release's workflow code, as the bundler takes it. */
  let previous: string;

  before(async function () {
    try {
      execFileSync('git', ['cat-file', '-e', `${RELEASE.commit}^{commit}`], { cwd: ROOT, stdio: 'ignore' });
    } catch {
      skipBecause(this, `release ${RELEASE.name} (${RELEASE.commit.slice(0, 7)}) is not in this clone's history (a shallow clone?)`);
    }
    // Inside the repository, so the bundler finds node_modules as it does for this release's code.
    const dir = path.join(ROOT, '.data', 'releases', RELEASE.name);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    const tar = execFileSync('git', ['archive', RELEASE.commit, 'workflows'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', dir], { input: tar });
    previous = path.join(dir, 'workflows/temporal/index.ts');
    s = await startLiveStack(this, { name: 'upgrade', workflowsPath: previous });
    receiver = new WebhookReceiver();
    await receiver.start();
  });
  after(async () => {
    await s?.stop();
    await receiver?.stop();
  });

  const email = async (id: string) => (await s.call('GET', `/api/v1/emails/${id}`)).body as { last_event: string };
  const deliveries = async (hookId: string) =>
    (await s.call('GET', `/api/v1/webhooks/${hookId}/deliveries`, { as: 'admin' })).body.data as any[];
  const runOf = async (automationId: string, address: string) =>
    ((await s.call('GET', `/api/v1/automations/${automationId}/runs`, { as: 'admin' })).body.data as any[]).find(
      (r) => r.contact.email === address,
    );
  const outcome = async (workflowId: string) =>
    ((await s.client.workflow.getHandle(workflowId).describe()).searchAttributes as Record<string, unknown[]>).SvcOutcome;

  it('a scheduled message, an automation run in its delay and its wait, a webhook delivery in its backoff: each ends right', async () => {
    const tag = Date.now();
    // A webhook whose receiver refuses twice: its delivery waits in a WebhookDelivery run for the next step.
    const path = '/hook-upgrade';
    const hook = await s.call('POST', '/api/v1/webhooks', { as: 'admin', body: { url: `${receiver.url}${path}`, events: ['email.sent'] } });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const answers = [500, 503];
    receiver.respond = (r) => (r.path === path ? (answers.shift() ?? 200) : 200);
    const hooked = await s.call('POST', '/api/v1/emails', {
      as: 'test',
      body: { from: `App <app@${s.domain}>`, to: `hooked-${tag}@example.com`, subject: 'Hook', text: 'hi' },
    });
    assert.equal(hooked.status, 200, JSON.stringify(hooked.body));

    // A message scheduled 30 s ahead: its SendEmail run waits on a timer.
    const to = `later-${tag}@example.com`;
    const scheduled = await s.call('POST', '/api/v1/emails', {
      body: { from: `App <app@${s.domain}>`, to, subject: 'Later', text: 'hi', scheduled_at: new Date(Date.now() + 30_000).toISOString() },
    });
    assert.equal(scheduled.status, 200, JSON.stringify(scheduled.body));
    const mailId = scheduled.body.id as string;

    // An automation run: a delay, then a wait for an event, then a contact update.
    const created = await s.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: {
        name: 'Upgrade',
        trigger: { event: 'signed_up' },
        steps: [
          { type: 'delay', duration: 'PT15S' },
          { type: 'wait_for_event', event: 'activated', timeout: 'PT120S' },
          { type: 'update_contact', properties: { upgraded: true } },
        ],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const automationId = created.body.id as string;
    const person = `person-${tag}@people.example`;
    assert.equal((await s.call('POST', '/api/v1/events', { body: { name: 'signed_up', email: person } })).body.runs, 1);

    // In flight on the previous release: the timer, the delay, the backoff after attempt 2.
    const delivery = await waitFor(
      async () => (await deliveries(hook.body.id)).find((d) => d.attempts === 2 && d.status === 'pending'),
      'the webhook delivery to wait after its second attempt',
      30_000,
    );
    assert.ok((await runOf(automationId, person))?.status, 'the automation run started');
    assert.equal((await email(mailId)).last_event, 'queued');
    assert.notEqual((await runOf(automationId, person)).waiting_for?.event, 'activated', 'the automation run is still in its delay');

    // The upgrade: the old workers stop, this release's take the task queue.
    await s.replaceWorker();

    // The automation run gets through its delay on the new code and waits for `activated`.
    await waitFor(
      async () => (await runOf(automationId, person))?.waiting_for?.event === 'activated',
      'the automation run to wait for its event',
      60_000,
    );
    assert.equal((await s.call('POST', '/api/v1/events', { body: { name: 'activated', email: person } })).status, 200);
    const done = await waitFor(
      async () => {
        const r = await runOf(automationId, person);
        return r?.status === 'completed' ? r : undefined;
      },
      'the automation run to complete',
      60_000,
    );
    const contact = (await s.sql('select properties from contacts where email = ?', [person]))[0];
    assert.equal(contact.properties.upgraded, true, 'its last step ran');

    // The scheduled message goes out once at its time.
    await waitFor(async () => (await email(mailId)).last_event === 'sent', 'the scheduled message to be sent', 60_000);
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);

    // The operator's retry ends the waiting delivery run and delivers.
    assert.equal((await s.call('POST', `/api/v1/webhooks/${hook.body.id}/deliveries/${delivery.id}/retry`, { as: 'admin' })).status, 202);
    await waitFor(
      async () => (await deliveries(hook.body.id)).find((d) => d.id === delivery.id && d.status === 'succeeded'),
      'the webhook delivery to succeed',
      30_000,
    );

    // The runs ended on this release's code: they took its patched path (SvcOutcome) with no
    // nondeterminism on the way (a stuck workflow task would have held everything above).
    const sendRun = await s.run(mailId, ['COMPLETED']);
    assert.equal(sendRun.type, 'SendEmail');
    // Its timer fired on the new code, which handed the message back to the outbox (a batch sent it).
    assert.deepEqual(await outcome(mailId), ['handed-back'], 'the SendEmail run set SvcOutcome as it ended');
    assert.deepEqual(await outcome(`automation-run:${done.id}`), ['completed']);
  });

  it('a DkimRotation waiting for its record and a DmarcRamp between its checks: each ends right', async () => {
    await s.replaceWorker(previous);
    const op = await newOperator({ service: s.service, url: s.service.url } as TestEnv, s.orgId);
    const c = new FlatConsoleClient(s.service.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
    const newDomain = async (prefix: string) => {
      const created = await s.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `${prefix}-${Date.now()}.example.test` } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return created.body.id as string;
    };

    // On the previous release: a rotation whose new key's record is not in DNS yet, and a ramp.
    const rotating = await newDomain('upgrade-rotate');
    const rotateBase = `/console/o/${s.orgId}/domains/${rotating}`;
    assert.equal((await c.post(`${rotateBase}/dkim/rotate`)).status, 303);
    const page = (await c.get(rotateBase)).html;
    const keyId = /name="key_id" value="([^"]+)"/.exec(page)![1];
    const [, record, value] = /([\w.-]+\._domainkey\.[\w.-]+) TXT (v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+)/.exec(page)!;
    await waitFor(
      async () => (await s.sql(`select last_checked_at from dkim_keys where id = ?`, [keyId]))[0].last_checked_at !== null,
      'a check on the previous release',
    );
    const ramping = await newDomain('upgrade-ramp');
    const rampBase = `/console/o/${s.orgId}/domains/${ramping}`;
    const ramp = async () => (await s.sql(`select * from dmarc_ramps where domain_id = ?`, [ramping]))[0];
    assert.equal((await c.post(`${rampBase}/dmarc-ramp/start`)).status, 303);
    await waitFor(async () => (await ramp()).verdict, 'the first gate check on the previous release');

    await s.replaceWorker();

    // The record appears: this release's worker switches to the new key and revokes the old one.
    s.dns.txt.set(record, [value]);
    const rotation = await s.run(`dkim-rotation:${rotating}:${keyId}`, ['COMPLETED'], 60_000);
    assert.equal(rotation.result.outcome, 'revoked');
    const selector = record.split('.')[0];
    assert.equal(
      (await s.sql(`select state from dkim_keys where domain_id = ? and selector = ?`, [rotating, selector]))[0].state,
      'active',
    );
    // The ramp's stop reaches the run the previous release started, and it ends.
    assert.equal((await c.post(`${rampBase}/dmarc-ramp/stop`)).status, 303);
    const rampRun = await s.run((await ramp()).run_id as string, ['COMPLETED'], 60_000);
    assert.equal(rampRun.result.outcome, 'stopped');
    assert.equal((await ramp()).state, 'stopped');
  });
});
