import assert from 'node:assert/strict';
import { readConfig } from '../../server/config';
import { assertReadyForProduction, productionGaps } from '../../server/production-gaps';

/** Issue 51: NODE_ENV=production refuses the development defaults that break real mail, all named at once. */
describe('config: what NODE_ENV=production needs before it starts', () => {
  const ready = {
    NODE_ENV: 'production',
    SMTP_URL: 'smtp://relay.example.com:587',
    PUBLIC_URL: 'https://mail.example.com',
    PLATFORM_MAIL_DOMAIN: 'mail.example.com',
    SMTP_RELAY_TLS_CERT: '/etc/svc/cert.pem',
    SMTP_RELAY_TLS_KEY: '/etc/svc/key.pem',
  };
  const gaps = (env: Record<string, string>, p = { needsRelay: true, servesRelay: true }) =>
    productionGaps(readConfig(env), p).map((g) => g.slice(0, g.indexOf(':')));

  it('names every missing variable, and nothing once each is set', () => {
    assert.deepEqual(gaps({ NODE_ENV: 'production' }), [
      'SMTP_URL',
      'PUBLIC_URL',
      'PLATFORM_MAIL_DOMAIN',
      'SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY',
    ]);
    assert.deepEqual(gaps(ready), []);
    assert.doesNotThrow(() => assertReadyForProduction(readConfig(ready), { needsRelay: true, servesRelay: true }));
    assert.throws(() => assertReadyForProduction(readConfig({ ...ready, PUBLIC_URL: '' }), { needsRelay: true, servesRelay: true }), {
      name: 'ConfigurationError',
      message: /^NODE_ENV=production needs what real mail needs; set:\n {2}PUBLIC_URL: /,
    });
  });

  it('wants PUBLIC_URL on https and a platform mail domain that can receive mail', () => {
    assert.deepEqual(gaps({ ...ready, PUBLIC_URL: 'http://mail.example.com' }), ['PUBLIC_URL']);
    assert.deepEqual(gaps({ ...ready, PUBLIC_URL: 'not a url' }), ['PUBLIC_URL']);
    for (const name of ['mail.svc.test', 'example', 'mail.example', 'x.invalid', 'mail.localhost']) {
      assert.deepEqual(gaps({ ...ready, PLATFORM_MAIL_DOMAIN: name }), ['PLATFORM_MAIL_DOMAIN'], name);
    }
    assert.deepEqual(gaps({ ...ready, PLATFORM_MAIL_DOMAIN: 'mail.testing.com' }), []);
  });

  it('asks svc worker for what it uses (no relay certificate), test services with their own mailer for no SMTP_URL, development for nothing', () => {
    const { SMTP_RELAY_TLS_CERT: _c, SMTP_RELAY_TLS_KEY: _k, ...noCert } = ready;
    assert.deepEqual(gaps(noCert, { needsRelay: true, servesRelay: false }), []);
    assert.deepEqual(gaps({ ...ready, SMTP_RELAY_PORT: 'off', SMTP_RELAY_TLS_CERT: '', SMTP_RELAY_TLS_KEY: '' }), []);
    assert.deepEqual(gaps({ ...ready, SMTP_URL: '' }, { needsRelay: false, servesRelay: true }), []);
    assert.deepEqual(gaps({}), []);
  });
});
