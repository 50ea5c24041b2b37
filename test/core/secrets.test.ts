import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createSecrets, loadSecretsKey } from '../../core/secrets';
import { tempDir } from '../support/pg';

describe('Secrets: DKIM private keys at rest', () => {
  it('generates SECRETS_KEY once per data folder (mode 0600) and reuses it, so sealed keys open after a restart', () => {
    const dir = tempDir('svc-secrets');
    const first = loadSecretsKey(undefined, dir);
    const file = path.join(dir, 'secrets.key');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const sealed = createSecrets(first).encrypt('-----BEGIN PRIVATE KEY-----');
    assert.equal(createSecrets(loadSecretsKey(undefined, dir)).decrypt(sealed), '-----BEGIN PRIVATE KEY-----');
  });

  it('prefers a configured key, refuses a wrong-sized one, and fails to open under another key', () => {
    const key = randomBytes(32);
    assert.deepEqual(loadSecretsKey(key.toString('base64'), tempDir('svc-secrets')), key);
    assert.throws(() => createSecrets(randomBytes(16)), /32 bytes/);
    const sealed = createSecrets(key).encrypt('secret');
    assert.ok(!sealed.includes('secret'), 'sealed, not in clear');
    assert.throws(() => createSecrets(randomBytes(32)).decrypt(sealed));
  });
});
