import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { newDatabase, tempDir } from '../support/pg';
import { SmtpSink, type Received } from '../support/sink';
import { runSvc, freePort, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';
import { buildDsn, deliverRaw, originalHeaders } from '../support/returns';
import { openOrm } from '../../db/orm';
import { createDomain } from '../../core/provisioning';

interface PrintedRecord {
  purpose: string;
  type: string;
  name: string;
  value: string;
}

/**
 * Issue 37: `svc domain create --verified` skips only the DNS wait. The domain gets its DKIM key,
 * return-path host and records (printed), its mail is signed and leaves with the VERP return path,
 * and its bounces reach the inbound listener and suppress. A domain an earlier `--verified` made
 * (unsigned, no return path) gets its identity on the service's next start; the development sandbox
 * domain stays as it is. Against `svc start` processes, as an operator runs them.
 */
describe('svc domain create --verified: a verified domain that signs and takes its bounces', function () {
  this.timeout(240_000);
  let sink: SmtpSink;
  let env: Record<string, string>;
  let base: string;
  let inboundPort: number;
  let child: Child | undefined;
  let org: { id: string };
  let admin: string;
  let send: string;

  const start = async () => {
    child = runSvc(['start'], env);
    await waitHealthy(base, child, 120_000);
  };
  const stop = async () => {
    if (!child || child.proc.exitCode !== null) return;
    child.proc.kill('SIGTERM');
    await child.exited;
  };

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
    const port = await freePort();
    inboundPort = await freePort();
    env = {
      DATABASE_URL: await newDatabase('svc_domain_verified'),
      DATA_DIR: tempDir('svc-domain-verified'),
      SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
      PORT: String(port),
      DEV_SMTP_PORT: '0',
      INBOUND_SMTP_PORT: String(inboundPort),
      RETRY_BASE_SECONDS: '1',
    };
    base = `http://127.0.0.1:${port}`;
    await start();
    org = await svcJson(['org', 'create', '--name', 'Operator verified'], env);
    const key = (permission: string) =>
      svcJson(
        ['key', 'create', '--org', org.id, '--name', permission, '--permission', permission, '--mode', 'live', '--rate', '1000'],
        env,
      );
    admin = (await key('admin')).token;
    send = (await key('send')).token;
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await sink.stop();
  });

  const call = (token: string, method: string, p: string, body?: unknown) => request(base, method, p, { token, body });

  /** A live message from `from` to a fresh address, as the sink received it, with its id once `sent`. */
  async function sendOne(token: string, from: string, label: string): Promise<{ id: string; to: string; msg: Received }> {
    const to = `${label}-${Date.now()}@example.org`;
    const res = await call(token, 'POST', '/api/v1/emails', { from, to, subject: 'Receipt', text: 'thanks' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const msg = await waitFor(async () => sink.received.find((m) => m.envelopeTo.includes(to)), `the message to ${to} at the sink`);
    await waitFor(async () => (await call(token, 'GET', `/api/v1/emails/${res.body.id}`)).body.last_event === 'sent', 'status sent');
    return { id: res.body.id, to, msg };
  }

  /** DKIM of a received message, checked against the records the operator was given to publish. */
  const dkimOf = async (msg: Received, records: PrintedRecord[]) => {
    const resolver = async (name: string, rr: string) => {
      const found = records.filter((r) => r.type === rr && r.name === name.replace(/\.$/, ''));
      if (!found.length) throw Object.assign(new Error(`no ${rr} at ${name}`), { code: 'ENOTFOUND' });
      return found.map((r) => [r.value]) as never;
    };
    return (await dkimVerify(msg.raw, { resolver })).results[0];
  };

  const verp = (host: string) => new RegExp(`^bounces\\+[a-z2-7]{42}@${host.replace(/\./g, '\\.')}$`);

  it('gets a DKIM key, a return-path host and its records (printed); its mail is signed, carries VERP, and its bounces suppress', async () => {
    const name = 'mail.operator.example.test';
    const made = await svcJson(['domain', 'create', '--org', org.id, '--name', name, '--verified'], env);
    assert.equal(made.status, 'verified', 'no DNS wait');
    const records: PrintedRecord[] = made.records;
    assert.deepEqual(
      records.map((r) => r.purpose),
      ['dkim', 'return_path_mx', 'return_path_spf', 'dmarc'],
      'the records are printed, as without --verified',
    );
    assert.match(records[0].value, /^v=DKIM1; k=rsa; p=/);
    assert.equal(records[1].name, `bounces.${name}`);

    const domain = (await call(admin, 'GET', `/api/v1/domains/${made.id}`)).body;
    assert.equal(domain.status, 'verified');
    assert.equal(domain.return_path, `bounces.${name}`);
    assert.match(domain.dkim_selector, /^svc\d{6}$/);
    assert.equal(records[0].name, `${domain.dkim_selector}._domainkey.${name}`);

    const s = await sendOne(send, `Shop <shop@${name}>`, 'signed');
    assert.match(s.msg.envelopeFrom, verp(`bounces.${name}`), 'the VERP return path, not the From address');
    const sig = await dkimOf(s.msg, records);
    assert.equal(sig.signingDomain, name);
    assert.equal(sig.selector, domain.dkim_selector);
    assert.equal(sig.status.result, 'pass', JSON.stringify(sig.status));

    // A bounce sent back to the return path reaches the inbound listener: bounced, suppressed.
    const dsn = await buildDsn({
      to: s.msg.envelopeFrom,
      finalRecipient: s.to,
      status: '5.1.1',
      action: 'failed',
      diagnostic: '550 5.1.1 <user> User unknown',
      original: originalHeaders({
        returnPath: s.msg.envelopeFrom,
        from: `shop@${name}`,
        to: s.to,
        messageId: s.msg.parsed.messageId as string,
        subject: 'Receipt',
      }),
    });
    assert.match((await deliverRaw(inboundPort, [s.msg.envelopeFrom], dsn)).response, /^250 /);
    await waitFor(async () => (await call(send, 'GET', `/api/v1/emails/${s.id}`)).body.last_event === 'bounced', 'status bounced');
    const again = await call(send, 'POST', '/api/v1/emails', { from: `shop@${name}`, to: s.to, subject: 'Again', text: 'x' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body.suppressed, [s.to], 'the bounced address is suppressed');
  });

  it('on the next start, a domain an earlier --verified made gets its key and return path; the sandbox domain stays unsigned', async () => {
    // What `svc domain create --verified` made before: verified, no DKIM key, no return-path host.
    const name = 'legacy.operator.example.test';
    const orm = await openOrm(env.DATABASE_URL, 2);
    let legacy;
    try {
      legacy = await createDomain(orm, org.id, name, { verified: true, warmup: false });
    } finally {
      await orm.close();
    }
    assert.equal(legacy.returnPathHost, null);
    // Its tracking host's record is kept beside the records it gets.
    const patched = await call(admin, 'PATCH', `/api/v1/domains/${legacy.id}`, { tracking_host: `links.${name}` });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));

    await stop();
    await start();

    const domain = (await call(admin, 'GET', `/api/v1/domains/${legacy.id}`)).body;
    assert.equal(domain.status, 'verified');
    assert.equal(domain.return_path, `bounces.${name}`);
    assert.match(domain.dkim_selector ?? '', /^svc\d{6}$/);
    assert.deepEqual(
      domain.records.map((r: PrintedRecord) => r.purpose),
      ['dkim', 'return_path_mx', 'return_path_spf', 'dmarc', 'tracking'],
    );
    assert.match(child!.output(), new RegExp(`${name.replace(/\./g, '\\.')}.*publish these records|publish these records.*${name}`));

    const s = await sendOne(send, `shop@${name}`, 'legacy');
    assert.match(s.msg.envelopeFrom, verp(`bounces.${name}`));
    const sig = await dkimOf(s.msg, domain.records);
    assert.equal(sig.signingDomain, name);
    assert.equal(sig.status.result, 'pass', JSON.stringify(sig.status));

    // The development sandbox domain the first start made is left as it is.
    const local = JSON.parse(fs.readFileSync(path.join(env.DATA_DIR, 'credentials.json'), 'utf8')).organization_id;
    const localKey = (permission: string) =>
      svcJson(['key', 'create', '--org', local, '--name', permission, '--permission', permission, '--mode', 'live'], env);
    const localAdmin = (await localKey('admin')).token;
    const localSend = (await localKey('send')).token;
    const sandbox = (await call(localAdmin, 'GET', '/api/v1/domains')).body.data.find((d: { name: string }) => d.name === 'sandbox.test');
    assert.ok(sandbox, 'the sandbox domain');
    assert.deepEqual([sandbox.status, sandbox.dkim_selector, sandbox.return_path], ['verified', null, null]);
    const plain = await sendOne(localSend, 'hello@sandbox.test', 'sandbox');
    assert.equal(plain.msg.envelopeFrom, 'hello@sandbox.test');
    assert.equal(plain.msg.parsed.headers.has('dkim-signature'), false);
    await stop();
  });
});
