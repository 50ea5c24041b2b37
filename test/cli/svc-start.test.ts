import nodemailer from 'nodemailer';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../support/pg';
import { runSvc, freePort, waitHealthy, svcJson } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';
import { SmtpSink } from '../support/sink';

describe('svc start (what npm start runs) and the svc commands, on embedded defaults', function () {
  this.timeout(240_000);

  it('boots an embedded PostgreSQL, prints keys and a working curl, delivers to the dev inbox, and shares the database with svc', async () => {
    const dataDir = tempDir('svc-start');
    const port = await freePort();
    // No SECRETS_KEY: the service generates its key into the data folder, and the commands read it there.
    const env = { DATA_DIR: dataDir, PORT: String(port), DEV_SMTP_PORT: '0', SECRETS_KEY: '' };
    const child = runSvc(['start'], env);
    const base = `http://127.0.0.1:${port}`;
    // While PostgreSQL is being initialised the port already answers, with 503.
    const starting = await waitFor(
      async () => {
        try {
          const r = await fetch(`${base}/health`);
          return r.status;
        } catch {
          return undefined;
        }
      },
      'the port to answer',
      60_000,
      20,
    );
    assert.equal(starting, 503, 'health is 503 before the database and engine are ready');
    await waitHealthy(base, child, 120_000);
    await waitFor(async () => child.output().includes('Ctrl-C'), 'banner');
    const out = child.output();

    const credsFile = path.join(dataDir, 'credentials.json');
    const setup = JSON.parse(fs.readFileSync(credsFile, 'utf8'));
    assert.equal(fs.statSync(credsFile).mode & 0o777, 0o600);
    // Tokens are shown once, on the run that made them, and kept nowhere in clear.
    const tokens = out.match(/svc_live_[A-Za-z0-9_-]{20,}/g) ?? [];
    const creds = { admin_key: /ADMIN key\s+(svc_live_\S+)/.exec(out)?.[1], send_key: /SEND key\s+(svc_live_\S+)/.exec(out)?.[1] ?? '' };
    assert.ok(creds.admin_key && creds.send_key, 'keys printed on the first run');
    assert.deepEqual([...new Set(tokens)].sort(), [creds.admin_key, creds.send_key].sort());
    assert.ok(!fs.readFileSync(credsFile, 'utf8').includes('svc_live_'), 'credentials.json keeps ids, not tokens');
    assert.ok(setup.admin_key_id && setup.send_key_id);
    assert.ok(out.includes(`${base}/api/v1`) && out.includes(`${base}/inbox`), 'addresses printed');
    assert.equal(setup.sender_domain, 'sandbox.test');

    // The console's address, and on this first development start a one-time link for its first operator.
    assert.ok(out.includes(`  Console        ${base}/console\n`), 'console address printed');
    const firstOperator =
      /First operator admin@example\.com: set the password at (http:\/\/\S+\/console\/set-password\/[A-Za-z0-9_-]{43}) \(valid 24 h\)/.exec(
        out,
      );
    assert.ok(firstOperator, 'set-password link printed');
    const setPassword = await fetch(firstOperator[1]);
    const form = await setPassword.text();
    assert.equal(setPassword.status, 200);
    assert.match(form, /<form method="post"/);
    assert.match(form, /For <strong>admin@example\.com<\/strong>/);
    assert.match(form, /<input type="password" name="password"/);
    const set = await fetch(firstOperator[1], {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ password: 'first-operator-password' }).toString(),
    });
    assert.equal(set.status, 200, 'the password is set through the link');
    assert.equal((await fetch(firstOperator[1])).status, 404, 'the link is spent');

    // The printed curl, as a user would run it.
    const curl = /-d '(\{.*\})'/.exec(out);
    assert.ok(curl, 'curl printed');
    const sent = await request(base, 'POST', '/api/v1/emails', { token: creds.send_key, raw: curl[1] });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await waitFor(
      async () => (await request(base, 'GET', `/api/v1/emails/${sent.body.id}`, { token: creds.send_key })).body.last_event === 'delivered',
      'delivered to the dev inbox',
    );
    // The relay printed in the banner takes the printed SEND key and delivers to the same inbox.
    const relayPort = Number(/SMTP relay\s+127\.0\.0\.1:(\d+) /.exec(out)?.[1]);
    assert.ok(relayPort > 0, 'relay address printed');
    const relayed = await nodemailer
      .createTransport({
        host: '127.0.0.1',
        port: relayPort,
        auth: { user: 'svc', pass: creds.send_key },
        tls: { rejectUnauthorized: false },
      })
      .sendMail({ from: 'hello@sandbox.test', to: 'you@example.com', subject: 'Over the relay', text: 'hi' });
    const relayedId = /queued as (\S+)/.exec(relayed.response)![1];
    await waitFor(
      async () => (await request(base, 'GET', `/api/v1/emails/${relayedId}`, { token: creds.send_key })).body.last_event === 'delivered',
      'relayed mail delivered to the dev inbox',
    );
    const inbox = await request(base, 'GET', '/inbox/messages.json');
    const entry = inbox.body.data.find((m: { messageId: string }) => m.messageId === `<${sent.body.id}@sandbox.test>`);
    assert.ok(entry, 'in the dev inbox');
    const page = await request(base, 'GET', '/inbox');
    assert.ok(String(page.body).includes('First email'));
    const detail = await request(base, 'GET', `/inbox/${entry.id}`);
    assert.ok(String(detail.body).includes('It works.'));
    const raw = await request(base, 'GET', `/inbox/${entry.id}/raw`);
    assert.ok(String(raw.body).includes(`Message-ID: <${sent.body.id}@sandbox.test>`));

    // svc while the service runs: reuses the running PostgreSQL.
    const org = await svcJson(['org', 'create', '--name', 'Second', '--plan', 'standard'], env);
    assert.equal(org.name, 'Second');
    const dom = await svcJson(['domain', 'create', '--org', org.id, '--name', 'second.test', '--stream', 'bulk', '--verified'], env);
    assert.deepEqual([dom.name, dom.status, dom.stream], ['second.test', 'verified', 'bulk']);
    assert.ok(fs.existsSync(path.join(dataDir, 'secrets.key')), 'the generated secrets key is kept in the data folder');
    // Without --verified: a DKIM key and the records to publish, pending until verified.
    const pending = await svcJson(['domain', 'create', '--org', org.id, '--name', 'Pending.Test'], env);
    assert.deepEqual([pending.name, pending.status], ['pending.test', 'pending']);
    assert.deepEqual(
      pending.records.map((r: { purpose: string }) => r.purpose),
      ['dkim', 'return_path_mx', 'return_path_spf', 'dmarc'],
    );
    assert.match(pending.records[0].value, /^v=DKIM1; k=rsa; p=/);
    const key = await svcJson(
      ['key', 'create', '--org', org.id, '--name', 'ci', '--permission', 'send', '--mode', 'test', '--domain', dom.id, '--rate', '50'],
      env,
    );
    assert.match(key.token, /^svc_test_/);
    const viaNewKey = await request(base, 'POST', '/api/v1/emails', {
      token: key.token,
      body: { from: 'n@second.test', to: 'x@example.com', subject: 'k', text: 't', kind: 'bulk.promo' },
    });
    assert.equal(viaNewKey.status, 200, JSON.stringify(viaNewKey.body));

    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0, 'Ctrl-C shuts down cleanly');

    // svc with the service stopped: starts the embedded PostgreSQL itself, and the data is still there.
    const third = await svcJson(['org', 'create', '--name', 'Third'], env);
    assert.equal(third.name, 'Third');
    const bad = runSvc(['key', 'create', '--org', third.id, '--name', 'x', '--permission', 'root', '--mode', 'live'], env);
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /--permission must be one of send\|full\|admin/);

    // A second start reuses the same organization and keys, and prints no token, only where to get one.
    const again = runSvc(['start'], env);
    await waitHealthy(base, again, 120_000);
    await waitFor(async () => again.output().includes('Ctrl-C'), 'banner');
    assert.ok(!/svc_(live|test)_[A-Za-z0-9_-]{20,}/.test(again.output()), 'no token printed after the first run');
    assert.match(again.output(), new RegExp(`svc key create --org ${setup.organization_id}`));
    assert.ok(
      again.output().includes(`${base}/console`) && !again.output().includes('set-password'),
      'no link once an operator has a password',
    );
    const still = await request(base, 'GET', `/api/v1/emails/${sent.body.id}`, { token: creds.send_key });
    assert.equal(still.body.last_event, 'delivered');
    again.proc.kill('SIGINT');
    assert.equal(await again.exited, 0);
  });

  it('with NODE_ENV=production needs SMTP_URL, PUBLIC_URL and PLATFORM_MAIL_DOMAIN, prints no token, even on the first run, and says how to make a key', async () => {
    const dataDir = tempDir('svc-prod');
    const port = await freePort();
    // Issue 51: one refusal naming every variable real mail needs, not the first one alone.
    const bare = runSvc(['start'], { DATA_DIR: tempDir('svc-prod-norelay'), PORT: String(port), NODE_ENV: 'production' });
    assert.equal(await bare.exited, 1);
    const refusal = bare.output();
    assert.match(refusal, /NODE_ENV=production needs what real mail needs; set:/);
    for (const variable of ['SMTP_URL', 'PUBLIC_URL', 'PLATFORM_MAIL_DOMAIN', 'SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY']) {
      assert.match(refusal, new RegExp(`\\n\\s+${variable}: `), `${variable} named`);
    }
    assert.match(refusal, /mail\.svc\.test is a development name/);
    const sink = new SmtpSink();
    const smtpUrl = await sink.start();
    const real = { PUBLIC_URL: 'https://mail.example.com', PLATFORM_MAIL_DOMAIN: 'mail.example.com' };
    const noCert = runSvc(['start'], {
      DATA_DIR: tempDir('svc-prod-nocert'),
      PORT: String(port),
      SMTP_URL: smtpUrl,
      NODE_ENV: 'production',
      ...real,
    });
    assert.equal(await noCert.exited, 1);
    assert.match(
      noCert.output(),
      /SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY: the SMTP relay needs a real certificate/,
      'no self-signed certificate in production',
    );
    assert.doesNotMatch(noCert.output(), /\s(SMTP_URL|PUBLIC_URL|PLATFORM_MAIL_DOMAIN): /, 'only what is missing is named');
    const child = runSvc(['start'], {
      DATA_DIR: dataDir,
      PORT: String(port),
      SMTP_URL: smtpUrl,
      NODE_ENV: 'production',
      ...real,
      SMTP_RELAY_PORT: 'off',
      LOG_LEVEL: 'info',
    });
    const base = `http://127.0.0.1:${port}`;
    try {
      await waitHealthy(base, child, 120_000);
      await waitFor(async () => child.output().includes('Ctrl-C'), 'banner');
      const out = child.output();
      assert.ok(!/svc_(live|test)_[A-Za-z0-9_-]{20,}/.test(out), 'no token in the banner or the logs');
      const setup = JSON.parse(fs.readFileSync(path.join(dataDir, 'credentials.json'), 'utf8'));
      assert.match(out, new RegExp(`svc key create --org ${setup.organization_id}`));
      assert.ok(out.includes(`  Console        ${real.PUBLIC_URL}/console\n`), 'the console at PUBLIC_URL');
      assert.ok(!out.includes('set-password/'), 'no set-password link in production');
      assert.match(out, /svc operator create --email you@example\.com/, 'how to make an operator instead');
      assert.equal(setup.admin_key_id, null, 'production makes no keys nobody could see');
      // The key the banner points to works.
      const key = await svcJson(
        ['key', 'create', '--org', setup.organization_id, '--name', 'ops', '--permission', 'admin', '--mode', 'live'],
        {
          DATA_DIR: dataDir,
        },
      );
      assert.equal((await request(base, 'GET', '/api/v1/organization', { token: key.token })).body.plan, 'standard');
      assert.equal((await request(base, 'GET', '/inbox')).status, 404, 'no development inbox in production');
    } finally {
      child.proc.kill('SIGINT');
      await child.exited;
      await sink.stop();
    }
  });
});
