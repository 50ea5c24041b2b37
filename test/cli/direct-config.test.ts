import assert from 'node:assert/strict';
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { readConfig } from '../../server/config';
import { directMailer } from '../../server/activities';
import type { Orm } from '../../db/orm';
import { tempDir } from '../support/pg';

/** Direct delivery's settings (README rows): defaults, and what the service refuses to start with. */
describe('config: direct delivery settings', () => {
  it('defaults: port 25, private MX refused, the host name in EHLO, the system’s source address, 96 h, the built-in shaping', () => {
    assert.deepEqual(readConfig({}).direct, {
      port: 25,
      allowPrivateMx: false,
      heloName: os.hostname(),
      sourceIps: [],
      retryMaxAgeHours: 96,
      shapingFile: null,
    });
  });

  it('reads each variable', () => {
    const d = readConfig({
      SMTP_DIRECT_PORT: '2525',
      DIRECT_ALLOW_PRIVATE_MX: '1',
      SMTP_HELO_NAME: 'mta1.example.com',
      SMTP_SOURCE_IPS: '192.0.2.10, 2001:db8::10',
      RETRY_MAX_AGE_HOURS: '48',
      DELIVERY_SHAPING_FILE: '/etc/svc/shaping.json',
    }).direct;
    assert.deepEqual(d, {
      port: 2525,
      allowPrivateMx: true,
      heloName: 'mta1.example.com',
      sourceIps: ['192.0.2.10', '2001:db8::10'],
      retryMaxAgeHours: 48,
      shapingFile: '/etc/svc/shaping.json',
    });
  });

  it('refuses DIRECT_ALLOW_PRIVATE_MX=1 with NODE_ENV=production, and a source address that is not an IP', () => {
    assert.throws(() => readConfig({ DIRECT_ALLOW_PRIVATE_MX: '1', NODE_ENV: 'production' }), /DIRECT_ALLOW_PRIVATE_MX=1 is for tests/);
    assert.throws(() => readConfig({ SMTP_SOURCE_IPS: '192.0.2.10,mta.example.com' }), /SMTP_SOURCE_IPS must list IP addresses/);
    assert.throws(() => readConfig({ DIRECT_ALLOW_PRIVATE_MX: 'yes' }), /DIRECT_ALLOW_PRIVATE_MX must be 0 or 1/);
  });

  it('a DELIVERY_SHAPING_FILE with a bad value stops the start, naming the field', () => {
    const file = path.join(tempDir('svc-shaping'), 'shaping.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        default: { connections: 0, messagesPerConnection: 100, perMinute: 600, suspendMinutes: 15, suspendOn: [] },
        sites: [],
      }),
    );
    const config = readConfig({ DELIVERY_SHAPING_FILE: file });
    // The file is read before anything touches the database.
    assert.throws(() => directMailer(config, null as unknown as Orm, pino({ level: 'silent' })), /default\.connections/);
  });
});
