import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { activitiesOf, startLiveStack, timersOf, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';

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
describe('Temporal engine, live: DomainVerification', function () {
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
    assert.deepEqual(input, { domainId: id, firstDelayMs: 1000, maxDelayMs: 3_600_000, windowMs: 30_000 });
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
});
