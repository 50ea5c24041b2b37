import assert from 'node:assert/strict';
import { parseServer, queryTxtTtl, txtQuery, txtTtlOf } from '../../core/domains/dns-ttl';
import { TestDns } from '../support/dns';

/** The TXT TTL lookup a DKIM rotation's switch waits on: one query over TCP, against a real DNS server on loopback. */
describe('DNS: the TTL of a TXT record', () => {
  let dns: TestDns;
  let server: string;

  before(async () => {
    dns = new TestDns();
    server = await dns.start();
  });
  after(() => dns.stop());

  it('reads servers as Resolver.getServers() writes them', () => {
    assert.deepEqual(parseServer('192.0.2.1'), { host: '192.0.2.1', port: 53 });
    assert.deepEqual(parseServer('127.0.0.1:5353'), { host: '127.0.0.1', port: 5353 });
    assert.deepEqual(parseServer('2001:db8::1'), { host: '2001:db8::1', port: 53 });
    assert.deepEqual(parseServer('[::1]:5353'), { host: '::1', port: 5353 });
  });

  it('answers the TTL a long record (a DKIM key in several strings) is served with, null for a name without TXT', async () => {
    dns.txt.set('sel._domainkey.ttl.example.test', [`v=DKIM1; k=rsa; p=${'A'.repeat(600)}`]);
    dns.txtTtl.set('sel._domainkey.ttl.example.test', 600);
    assert.equal(await queryTxtTtl([server], 'sel._domainkey.ttl.example.test'), 600);
    assert.equal(await queryTxtTtl([server], 'nothing.ttl.example.test'), null);
    dns.nxdomain.add('gone.ttl.example.test');
    assert.equal(await queryTxtTtl([server], 'gone.ttl.example.test'), null);
  });

  it('tries the next server when one does not answer, and fails when none does', async () => {
    dns.txt.set('next.ttl.example.test', ['x']);
    assert.equal(await queryTxtTtl(['127.0.0.1:1', server], 'next.ttl.example.test'), 1);
    await assert.rejects(queryTxtTtl(['127.0.0.1:1'], 'next.ttl.example.test'));
    await assert.rejects(queryTxtTtl([], 'next.ttl.example.test'));
  });

  it('ignores an answer to another query id, and refuses names that are not DNS names', () => {
    const q = txtQuery(7, 'a.example.test');
    assert.equal(txtTtlOf(q, 8), null);
    assert.throws(() => txtQuery(1, 'a..example.test'));
  });
});
