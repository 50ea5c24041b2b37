import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createApp } from '../../api/app';
import { GroupStore } from '../../core/emails/group-store';
import { systemClock } from '../../core/clock';
import { DevInbox } from '../../smtp/dev-inbox';
import { tempDir } from './pg';
import type { TestEnv } from './service';
import { randomBytes } from 'node:crypto';
import { createRecipientLinks } from '../../core/recipient-links';

/**
 * The API composed as the service composes it, with a development inbox (the shared service
 * relays to a sink instead, so it has none), on its own loopback port.
 */
export async function inboxApp(
  env: TestEnv,
  opts: { adminOnly: boolean },
): Promise<{ url: string; inbox: DevInbox; stop(): Promise<void> }> {
  const inbox = new DevInbox(tempDir('svc-inbox'), pino({ level: 'silent' }));
  await inbox.start(0);
  const app = createApp({
    orm: env.service.db.orm,
    engine: env.service.engine,
    log: pino({ level: 'silent' }),
    maxBodyBytes: 40 * 1024 * 1024,
    dispatch: () => undefined,
    store: new GroupStore(env.service.db.orm, pino({ level: 'silent' })),
    inbox,
    inboxAdminOnly: opts.adminOnly,
    links: createRecipientLinks(randomBytes(32), 'http://localhost'),
    webhooks: {
      secrets: { encrypt: (s) => s, decrypt: (s) => s },
      policy: { allowHttp: false, allowPrivate: false },
      dispatch: () => undefined,
    },
    domains: {
      secrets: { encrypt: (s) => s, decrypt: (s) => s },
      dns: { resolveTxt: async () => [], resolveMx: async () => [], resolveCname: async () => [] },
      platform: { bounceMx: 'mx.test', spfInclude: 'spf.test', trackingTarget: 'track.test' },
      clock: systemClock,
      verification: { firstDelayMs: 1000, maxDelayMs: 1000, windowMs: 1000 },
      warmup: true,
    },
    caps: { platformDailyCap: 0, clock: systemClock },
  });
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    inbox,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await inbox.stop();
    },
  };
}
