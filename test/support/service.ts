import pino from 'pino';
import { readConfig, type Config } from '../../server/config';
import { startService, type Service } from '../../server/service';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import type { Plan, Stream } from '../../db/entities';
import { newDatabase, tempDir } from './pg';
import { SmtpSink } from './sink';
import { TestDns } from './dns';
import { CloudflareApi } from './cloudflare-api';
import { freePort } from './child';
import { request, type RequestOptions } from './http';

export interface TestEnv {
  service: Service;
  sink: SmtpSink;
  /** The DNS server the service resolves domain records with. */
  dns: TestDns;
  /** The Cloudflare-compatible API DNS publishing calls (CLOUDFLARE_API_BASE_URL); its zones are served by `dns`. */
  cloudflare: CloudflareApi;
  url: string;
  /** SMTP_DIRECT_PORT: where direct delivery connects on an MX (peers listen on 127.0.0.x at it). */
  directPort: number;
}

let shared: Promise<TestEnv> | undefined;

export function testConfig(overrides: Partial<Config>): Config {
  return {
    ...readConfig({}),
    port: 0,
    devSmtpPort: 0,
    retryBaseSeconds: 1,
    // Windows of 250 starts: the 3-a-window of the default 12/s split one test's batch of three
    // across runs when another test's message had taken a slot. The rate itself is tested in
    // test/worker/outbox.test.ts and test/cli/caps.test.ts.
    sendRatePerSecond: 1000,
    logLevel: 'silent',
    dataDir: tempDir('svc-data'),
    smtpRelay: { ...readConfig({}).smtpRelay!, port: 0 },
    inboundSmtpPort: 0,
    // DkimRotation in seconds (test/api/dkim-rotation.test.ts, the live case): checks 0.2 s apart over 1 s, 3 s retiring.
    dkimRotation: { checkIntervalSeconds: 0.2, minSpreadSeconds: 1, retiringHours: 3 / 3600, windowHours: 1 },
    ...overrides,
  };
}

/**
 * The in-process service every API test talks to over HTTP: its own database, the embedded
 * engine, and a real SMTP sink as its outbound relay. DBOS is one per process, hence shared.
 */
export function sharedService(): Promise<TestEnv> {
  if (!shared) {
    shared = (async () => {
      const sink = new SmtpSink();
      const smtpUrl = await sink.start();
      const dns = new TestDns();
      const dnsServer = await dns.start();
      const cloudflare = new CloudflareApi(dns);
      const cloudflareApiBaseUrl = await cloudflare.start();
      const databaseUrl = await newDatabase('svc_api');
      const directPort = await freePort();
      const service = await startService(
        testConfig({
          databaseUrl,
          smtpUrl,
          dnsServers: [dnsServer],
          cloudflareApiBaseUrl,
          domainVerifyFirstDelaySeconds: 1,
          domainVerifyWindowHours: 30 / 3600,
          domainVerifySweepSeconds: 1,
          direct: { ...readConfig({}).direct, port: directPort, allowPrivateMx: true, heloName: 'svc.test' },
        }),
        { log: pino({ level: process.env.TEST_LOG_LEVEL || 'silent' }) },
      );
      return { service, sink, dns, cloudflare, url: service.url, directPort };
    })();
  }
  return shared;
}

export async function stopSharedService(): Promise<void> {
  if (!shared) return;
  const env = await shared;
  shared = undefined;
  await env.service.stop();
  await env.sink.stop();
  await env.dns.stop();
  await env.cloudflare.stop();
}

export interface Tenant {
  orgId: string;
  domain: string;
  domainId: string;
  sendKey: string;
  testKey: string;
  adminKey: string;
  call: <T = any>(
    method: string,
    path: string,
    opts?: RequestOptions & { as?: 'send' | 'test' | 'admin' },
  ) => ReturnType<typeof request<T>>;
}

let tenants = 0;

/**
 * A fresh organization with a verified domain and SEND (live), SEND (test) and ADMIN keys. By
 * default on the standard plan with warm-up off (an established sender), so the daily caps stay
 * out of tests about other things; the caps tests ask for the free plan and warm-up.
 */
export async function newTenant(env: TestEnv, opts: { stream?: Stream; plan?: Plan; warmup?: boolean } = {}): Promise<Tenant> {
  const orm = env.service.db.orm;
  const org = await createOrganization(orm, `Tenant ${++tenants}`, opts.plan ?? 'standard');
  const domain = await createDomain(orm, org.id, `t${tenants}-${Date.now()}.example.test`, {
    verified: true,
    stream: opts.stream,
    warmup: opts.warmup ?? false,
  });
  const send = await createKey(orm, org.id, { name: 'send', permission: 'send', mode: 'live', rateLimit: 1000 });
  const test = await createKey(orm, org.id, { name: 'test', permission: 'send', mode: 'test', rateLimit: 1000 });
  const admin = await createKey(orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 });
  const keys = { send: send.token, test: test.token, admin: admin.token };
  return {
    orgId: org.id,
    domain: domain.name,
    domainId: domain.id,
    sendKey: send.token,
    testKey: test.token,
    adminKey: admin.token,
    call: (method, path, o = {}) => request(env.url, method, path, { token: keys[o.as ?? 'send'], ...o }),
  };
}
