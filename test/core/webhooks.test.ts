import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { isForbiddenAddress, urlProblem } from '../../core/webhooks/ssrf';
import { newWebhookSecret, webhookHeaders } from '../../core/webhooks/sign';

describe('Core: webhook signing and address rules', () => {
  it('signs as Standard Webhooks: the standardwebhooks package verifies, with one or two secrets', () => {
    const a = newWebhookSecret();
    const b = newWebhookSecret();
    assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const body = '{"type":"email.sent","created_at":"2026-11-23T10:00:00.000Z","data":{}}';
    const now = Math.floor(Date.now() / 1000);
    const one = webhookHeaders([a], 'id-1', now, body);
    assert.deepEqual(new Webhook(a).verify(body, one), JSON.parse(body));
    assert.throws(() => new Webhook(b).verify(body, one));
    assert.throws(() => new Webhook(a).verify(body.replace('sent', 'bounced'), one), 'the body is covered');
    const both = webhookHeaders([b, a], 'id-1', now, body);
    assert.ok(new Webhook(a).verify(body, both));
    assert.ok(new Webhook(b).verify(body, both));
    assert.throws(() => new Webhook(a).verify(body, webhookHeaders([a], 'id-1', now - 3600, body)), 'an old timestamp is refused');
  });

  it('forbids loopback, private, link-local, CGNAT, multicast and metadata addresses, in every spelling', () => {
    for (const ip of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '224.0.0.1',
      '0.0.0.0',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd00:ec2::254',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
    ]) {
      assert.equal(isForbiddenAddress(ip), true, ip);
    }
    for (const ip of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8', '172.32.0.1', '100.128.0.1']) {
      assert.equal(isForbiddenAddress(ip), false, ip);
    }
    assert.equal(isForbiddenAddress('not-an-ip'), true);
  });

  it('judges URLs at registration: scheme, credentials, literal addresses (in any notation) and localhost', () => {
    const strict = { allowHttp: false, allowPrivate: false };
    assert.equal(urlProblem('https://hooks.example.com/x', strict), null);
    for (const u of [
      'http://hooks.example.com/x',
      'ftp://x.example/',
      'https://u:p@x.example/',
      'nope',
      'https://2130706433/',
      'https://0177.0.0.1/',
      'https://[::1]/',
      'https://app.localhost/',
    ]) {
      assert.notEqual(urlProblem(u, strict), null, u);
    }
    assert.equal(urlProblem('http://127.0.0.1:9/x', { allowHttp: true, allowPrivate: true }), null);
  });
});
