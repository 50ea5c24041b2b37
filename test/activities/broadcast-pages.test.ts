import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Broadcast, Contact, Email, Segment } from '../../db/entities';
import { createBroadcastActivities } from '../../activities/broadcast';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { uuidv7 } from '../../db/ids';
import { newDatabase } from '../support/pg';

/**
 * The fan-out reads each next page while it stores the current one (activities/broadcast.ts), so
 * a page's rows can be older than its store. What keeps that safe is the store statement checking
 * every recipient again when it stores: these pages are driven by hand to put a change in between.
 */
describe('Activities: broadcast pages read ahead', function () {
  this.timeout(60_000);
  let orm: Orm;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_broadcast_pages'));
    await migrate(orm);
  });
  after(async () => orm.close());

  it('does not mail a recipient who unsubscribed after the page was read ahead, and mails the rest once', async () => {
    const org = await createOrganization(orm, 'Pages');
    const domain = await createDomain(orm, org.id, 'pages.example.test', { verified: true, stream: 'bulk', warmup: false });
    const { key } = await createKey(orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 });
    const em = orm.em.fork();
    const contacts = [0, 1, 2, 3].map((i) =>
      Object.assign(new Contact(), { id: uuidv7(), organizationId: org.id, email: `p${i}@people.example`, firstName: `P${i}` }),
    );
    const segment = Object.assign(new Segment(), {
      id: uuidv7(),
      organizationId: org.id,
      name: 'All',
      filter: { all: [{ status: 'SUBSCRIBED' }] },
    });
    const now = new Date();
    const broadcast = Object.assign(new Broadcast(), {
      id: uuidv7(),
      organizationId: org.id,
      apiKeyId: key.id,
      segmentId: segment.id,
      from: 'News <news@pages.example.test>',
      domainId: domain.id,
      kind: 'broadcast.default',
      subject: 'News',
      text: 'Hello',
      createdAt: now,
      updatedAt: now,
    });
    await em.persistAndFlush([...contacts, segment, broadcast]);
    const acts = createBroadcastActivities({ orm, clock: { now: () => new Date() }, log: pino({ level: 'silent' }) });

    assert.equal((await acts.freezeAudience(broadcast.id)).recipients, 4);
    // Pages of two: storing the first reads positions 2 and 3 ahead.
    assert.deepEqual(await acts.enqueuePage(broadcast.id, 0, 2), { next: 2, done: false, stopped: null });
    // The freeze numbers the audience by contact id, so position 2 is the third contact.
    await orm.em.fork().nativeUpdate(Contact, { id: contacts[2].id }, { status: 'unsubscribed' });
    assert.deepEqual(await acts.enqueuePage(broadcast.id, 2, 2), { next: 4, done: true, stopped: null });

    const stored = await orm.em.fork().find(Email, { broadcastId: broadcast.id });
    const statusOf = Object.fromEntries(stored.map((e) => [e.to[0], e.status]));
    assert.deepEqual(statusOf, {
      'p0@people.example': 'queued',
      'p1@people.example': 'queued',
      'p2@people.example': 'suppressed',
      'p3@people.example': 'queued',
    });
  });
});
