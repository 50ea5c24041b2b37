import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { activitiesOf, startLiveStack, timersOf, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';
import { FlatConsoleClient, newOperator } from '../support/console';
import type { TestEnv } from '../support/service';

interface RecordView {
  purpose: string;
  type: string;
  name: string;
  value: string;
  status: string;
}

/**
 * DomainVerification on a real Temporal server: POST /domains starts the loop, whose checkDomain
 * runs on the worker and resolves through DNS_SERVERS (a DNS server on loopback the test edits).
 * Nothing here calls "verify now": the loop alone must see the records and verify the domain.
 */
describe('Temporal engine, live: DomainVerification, DkimRotation and DmarcRamp', function () {
  this.timeout(120_000);
  let s: LiveStack;

  before(async function () {
    s = await startLiveStack(this, { name: 'domains' });
  });
  after(async () => s?.stop());

  function publish(records: RecordView[]) {
    for (const r of records) {
      if (r.type === 'MX') {
        const [priority, exchange] = r.value.split(' ');
        s.dns.mx.set(r.name, [{ priority: Number(priority), exchange }]);
      } else if (r.type === 'CNAME') {
        s.dns.cname.set(r.name, r.value);
      } else {
        s.dns.txt.set(r.name, [...(s.dns.txt.get(r.name) ?? []), r.value]);
      }
    }
  }
  const domain = async (id: string) => (await s.call('GET', `/api/v1/domains/${id}`, { as: 'admin' })).body;

  it('verifies a new domain by itself once its records are in DNS; the worker then signs its mail with the key the API made', async () => {
    const name = `verify-${Date.now()}.example.test`;
    const created = await s.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'pending');
    const id = created.body.id as string;

    // The loop's first check ran on the worker and found nothing published yet.
    const first = await waitFor(async () => {
      const d = await domain(id);
      return d.last_checked_at ? d : undefined;
    }, 'the first check');
    assert.equal(first.status, 'pending');
    assert.ok(
      first.records.every((r: RecordView) => r.status === 'missing'),
      JSON.stringify(first.records),
    );

    publish(created.body.records);
    const verified = await waitFor(
      async () => {
        const d = await domain(id);
        return d.status === 'verified' ? d : undefined;
      },
      'the loop to verify the domain',
      30_000,
    );
    assert.ok(verified.verified_at);
    const by = Object.fromEntries(verified.records.map((r: RecordView & { observed: string }) => [r.purpose, r]));
    assert.equal(by.dkim.status, 'verified');
    assert.equal(by.dkim.observed, by.dkim.value);

    // The server's record of it: one DomainVerification run, checks with doubling waits between,
    // ended by the check that found every required record.
    const run = await s.run(`domain-verification:${id}:1`);
    assert.equal(run.type, 'DomainVerification');
    assert.equal(run.taskQueue, s.temporal.taskQueue);
    const { transportRetryBaseSeconds: _binding, ...input } = run.input;
    // outcomeAttribute: the engine registered SvcOutcome, which the run sets as it ends.
    assert.deepEqual(input, { domainId: id, firstDelayMs: 1000, maxDelayMs: 3_600_000, windowMs: 30_000, outcomeAttribute: true });
    assert.equal(run.result.status, 'verified');
    assert.ok(run.result.checks >= 2, `verified at check ${run.result.checks}, after the first found nothing`);
    assert.deepEqual(
      activitiesOf(run),
      Array.from({ length: run.result.checks }, () => 'checkDomain'),
    );
    assert.deepEqual(
      timersOf(run),
      Array.from({ length: run.result.checks - 1 }, (_, i) => 1000 * 2 ** i),
    );

    // Live mail from the new domain, through the worker, carries a DKIM signature that verifies
    // against the published key: the worker decrypts the private key the API sealed.
    const to = `dkim-${Date.now()}@example.com`;
    const sent = await s.call('POST', '/api/v1/emails', {
      body: { from: `Shop <shop@${name}>`, to, subject: 'Signed on Temporal', text: 'signed' },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const msg = await waitFor(async () => s.sink.received.find((m) => m.envelopeTo.includes(to)), 'the signed message');
    assert.match(msg.envelopeFrom, new RegExp(`@bounces\\.${name.replace(/\./g, '\\.')}$`), 'the VERP return path');
    const resolver = new Resolver();
    resolver.setServers([`127.0.0.1:${s.dns.port}`]);
    const result = await dkimVerify(msg.raw, {
      resolver: (n: string, rr: string) => resolver.resolve(n, rr as 'TXT') as Promise<never>,
    });
    const [sig] = result.results;
    assert.equal(sig.signingDomain, name);
    assert.equal(sig.status.result, 'pass', JSON.stringify(sig.status));
  });
  it('DkimRotation from the console: the worker checks DNS, switches once the record is published, then revokes the old key', async () => {
    const name = `rotate-${Date.now()}.example.test`;
    const created = await s.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const old = created.body.dkim_selector as string;
    publish(created.body.records);
    // newOperator needs only the service and its address.
    const op = await newOperator({ service: s.service, url: s.service.url } as TestEnv, s.orgId);
    const c = new FlatConsoleClient(s.service.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
    const base = `/console/o/${s.orgId}/domains/${id}`;
    assert.equal((await c.post(`${base}/dkim/rotate`)).status, 303);
    const page = (await c.get(base)).html;
    const keyId = /name="key_id" value="([^"]+)"/.exec(page)![1];
    const [, record, value] = /([\w.-]+\._domainkey\.[\w.-]+) TXT (v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+)/.exec(page)!;
    const selector = record.split('.')[0];
    const state = async (sel: string) =>
      (await s.sql(`select state from dkim_keys where domain_id = ? and selector = ?`, [id, sel]))[0].state;

    await waitFor(
      async () => (await s.sql(`select last_checked_at from dkim_keys where id = ?`, [keyId]))[0].last_checked_at !== null,
      'a check on the worker',
    );
    assert.equal(await state(selector), 'pending', 'no switch while the record is not published');
    s.dns.txt.set(record, [value]);
    const run = await s.run(`dkim-rotation:${id}:${keyId}`, ['COMPLETED'], 60_000);
    assert.equal(run.type, 'DkimRotation');
    assert.equal(run.result.outcome, 'revoked');
    const steps = activitiesOf(run);
    // Not an internal organization with a token: each publish step runs, and publishes nothing.
    assert.equal(steps[0], 'publishDkimRecords', 'the pending key published first');
    assert.deepEqual(steps.slice(-4), ['switchDkimKey', 'publishDkimRecords', 'revokeDkimKeys', 'publishDkimRecords']);
    assert.deepEqual(await s.sql(`select action from audit_log where target_id = ? and action = 'domain.dns_published'`, [id]), []);
    assert.ok(steps.filter((a) => a === 'checkDkimKey').length >= 4, 'an unmatched check, then at least 3 matching ones');
    assert.deepEqual([await state(selector), await state(old)], ['active', 'revoked']);

    const to = `rotated-${Date.now()}@example.com`;
    const sent = await s.call('POST', '/api/v1/emails', { body: { from: `Shop <shop@${name}>`, to, subject: 'Rotated', text: 'rotated' } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const msg = await waitFor(async () => s.sink.received.find((m) => m.envelopeTo.includes(to)), 'the message after the rotation');
    const resolver = new Resolver();
    resolver.setServers([`127.0.0.1:${s.dns.port}`]);
    const [sig] = (await dkimVerify(msg.raw, { resolver: (n: string, rr: string) => resolver.resolve(n, rr as 'TXT') as Promise<never> }))
      .results;
    assert.deepEqual([sig.selector, sig.status.result], [selector, 'pass']);
  });

  it('DmarcRamp from the console: the worker records the gate, refuses an advance it does not allow, ends on stop, and starts again', async () => {
    const name = `ramp-${Date.now()}.example.test`;
    const created = await s.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const op = await newOperator({ service: s.service, url: s.service.url } as TestEnv, s.orgId);
    const c = new FlatConsoleClient(s.service.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
    const base = `/console/o/${s.orgId}/domains/${id}`;
    const ramp = async () => (await s.sql(`select * from dmarc_ramps where domain_id = ?`, [id]))[0];
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 303);
    await waitFor(async () => (await ramp()).verdict, 'the first gate check on the worker');
    assert.equal((await c.post(`${base}/dmarc-ramp/advance`)).status, 303);
    await waitFor(async () => (await ramp()).refusal, 'the advance refused');
    assert.equal((await ramp()).step, 'none');
    assert.equal((await c.post(`${base}/dmarc-ramp/stop`)).status, 303);
    const first = (await ramp()).run_id as string;
    assert.ok(first.startsWith(`dmarc-ramp:${id}:`));
    const run = await s.run(first, ['COMPLETED'], 60_000);
    assert.equal(run.type, 'DmarcRamp');
    assert.deepEqual(run.result, { outcome: 'stopped', checks: 2, requests: 2 });
    // The start's record published first (a no-op: the organization has no Cloudflare zone).
    assert.deepEqual(activitiesOf(run), [
      'publishDmarcRecord',
      'checkDmarcGate',
      'applyDmarcRequest',
      'checkDmarcGate',
      'applyDmarcRequest',
    ]);
    assert.equal((await ramp()).state, 'stopped');
    assert.match((await c.get(base)).html, /ramp stopped/);
    // Started again: a run of its own, which the next stop ends.
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 303);
    const second = (await ramp()).run_id as string;
    assert.notEqual(second, first);
    await waitFor(async () => (await ramp()).verdict, 'the second run checks the gate');
    assert.equal((await c.post(`${base}/dmarc-ramp/stop`)).status, 303);
    assert.deepEqual((await s.run(second, ['COMPLETED'], 60_000)).result, { outcome: 'stopped', checks: 1, requests: 1 });
  });
});
