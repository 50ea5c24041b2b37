import assert from 'node:assert/strict';
import { activitiesOf, signalsOf, startLiveStack, type LiveStack } from '../support/temporal-live';
import { sleep, waitFor } from '../support/wait';

/** Live starts per second (SEND_RATE_PER_SECOND, for the outbox and the delivery workers): 1,000 messages in about 5 s. */
const RATE = 200;
const CONTACTS = 1000;

/**
 * BroadcastFanOut on a real Temporal server, live mail through the relay: a broadcast to a segment
 * of 1,000 contacts delivered to each once, one canceled while its messages are going out, and a
 * scheduled one canceled before its time. The send rate is what leaves room for the cancel: the
 * outbox starts 200 a second, so most messages are still `queued` when it lands.
 */
describe('Temporal engine, live: BroadcastFanOut', function () {
  this.timeout(120_000);
  let s: LiveStack;
  let contacts: string[];
  let segmentId: string;

  before(async function () {
    s = await startLiveStack(this, { name: 'broadcasts', stream: 'bulk', sendRatePerSecond: RATE });
    const tag = Date.now();
    assert.equal((await s.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: 'news', name: 'News' } })).status, 201);
    contacts = Array.from({ length: CONTACTS }, (_, i) => `c${i}-${tag}@people.example`);
    // 16 requests at a time: the contacts are the set-up, not the subject.
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < contacts.length) {
          const i = next++;
          const res = await s.call('POST', '/api/v1/contacts', { as: 'admin', body: { email: contacts[i], topics: ['news'] } });
          assert.ok(res.status < 300, JSON.stringify(res.body));
        }
      }),
    );
    const segment = await s.call('POST', '/api/v1/segments', {
      as: 'admin',
      body: { name: 'Everyone', filter: { all: [{ status: 'SUBSCRIBED' }] } },
    });
    assert.equal(segment.status, 201, JSON.stringify(segment.body));
    assert.equal(segment.body.contact_count, CONTACTS);
    segmentId = segment.body.id;
  });
  after(async () => s?.stop());

  const broadcast = async (id: string) => (await s.call('GET', `/api/v1/broadcasts/${id}`, { as: 'admin' })).body;
  const create = async (body: object) => {
    const res = await s.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: { segment_id: segmentId, from: `News <news@${s.domain}>`, text: 'Hello from the broadcast', ...body },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const mailWith = (subject: string) => s.sink.received.filter((m) => m.parsed.subject === subject);
  const statuses = async (broadcastId: string) =>
    Object.fromEntries(
      (
        await s.sql<{ status: string; n: number }>('select status, count(*)::int as n from emails where broadcast_id = ? group by status', [
          broadcastId,
        ])
      ).map((r) => [r.status, r.n]),
    ) as Record<string, number>;

  it('delivers a broadcast to a segment of 1,000 contacts, each once, through one fan-out run', async () => {
    const subject = `Monthly ${Date.now()}`;
    // With a topic: the unsubscribe link leaves the topic, so the contact stays in the next test's audience.
    const id = await create({ subject, topic: 'news' });
    const done = await waitFor(
      async () => {
        const b = await broadcast(id);
        return b.status === 'sent' || b.status === 'failed' ? b : undefined;
      },
      'the broadcast to be sent',
      60_000,
      250,
    );
    assert.equal(done.status, 'sent', JSON.stringify(done));
    assert.equal(done.recipients, CONTACTS);
    assert.equal(done.progress.sent, CONTACTS, JSON.stringify(done.progress));
    assert.equal(done.progress.queued, 0);
    const mail = await waitFor(async () => (mailWith(subject).length >= CONTACTS ? mailWith(subject) : undefined), '1,000 messages');
    const to = mail.map((m) => m.envelopeTo[0]);
    assert.deepEqual([...new Set(to)].sort(), [...contacts].sort(), 'every contact');
    assert.equal(to.length, CONTACTS, 'each once');
    // Bulk mail: the worker signs each recipient's one-click unsubscribe link, which the API honours.
    const header = mail[0].parsed.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '';
    const link = /<(http[^>]+)>/.exec(header)?.[1];
    assert.ok(link, header);
    const unsubscribed = await fetch(s.service.url + new URL(link).pathname, { method: 'POST', body: 'List-Unsubscribe=One-Click' });
    assert.equal(unsubscribed.status, 200);
    assert.equal((await broadcast(id)).progress.unsubscribed, 1);
    await sleep(500);
    assert.equal(mailWith(subject).length, CONTACTS, 'and no more');

    const run = await s.run(`broadcast:${id}`);
    assert.equal(run.type, 'BroadcastFanOut');
    assert.equal(run.taskQueue, s.temporal.taskQueue);
    assert.deepEqual(run.result, { status: 'sending', recipients: CONTACTS, pages: 1 });
    assert.deepEqual(activitiesOf(run), ['freezeAudience', 'enqueuePage', 'finishFanOut']);
    // The messages left as SendBatch runs (no confirmation window), at most RATE / 4 per run.
    assert.ok((await s.list(`WorkflowType = 'SendBatch'`)).length >= CONTACTS / (RATE / 4));
  });

  it('cancels a broadcast while its messages go out: fewer than all get mail, nothing leaves after the cancel', async () => {
    const subject = `Flash sale ${Date.now()}`;
    const id = await create({ subject });
    // Cancel as soon as its first message reached the relay.
    await waitFor(async () => mailWith(subject).length > 0, 'the first message', 30_000, 20);
    const cancel = await s.call('POST', `/api/v1/broadcasts/${id}/cancel`, { as: 'admin' });
    // What runs had claimed when the cancel answered: only those may still leave.
    const atCancel = await statuses(id);
    const picked = (atCancel.sending ?? 0) + (atCancel.sent ?? 0);
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.equal(cancel.body.status, 'canceled');
    assert.ok(cancel.body.canceled > 0, JSON.stringify(cancel.body));

    const run = await s.run(`broadcast:${id}`);
    assert.equal(run.type, 'BroadcastFanOut');
    await waitFor(
      async () => {
        const now = await statuses(id);
        return !now.queued && !now.sending;
      },
      'every message final',
      30_000,
    );
    await sleep(1500); // more than an outbox pass: anything still able to leave would have.
    const b = await broadcast(id);
    assert.equal(b.status, 'canceled');
    assert.equal(b.recipients, CONTACTS);
    const final = await statuses(id);
    assert.deepEqual(Object.keys(final).sort(), ['canceled', 'sent'], JSON.stringify(final));
    assert.equal(final.canceled + final.sent, CONTACTS);
    const got = mailWith(subject).length;
    assert.ok(got > 0 && got < CONTACTS, `${got} of ${CONTACTS} got mail`);
    assert.equal(got, final.sent, 'the relay has exactly what is sent');
    assert.ok(got <= picked, `${got} left, ${picked} were picked up when the cancel answered`);
    assert.equal(b.progress.sent, got);
    assert.equal(b.progress.canceled, final.canceled);
    assert.ok(final.canceled >= cancel.body.canceled);
  });

  it('a scheduled broadcast canceled before its time: the cancel signal ends the wait of its run at once, nothing is sent', async () => {
    const subject = `Later ${Date.now()}`;
    const id = await create({ subject, scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    // Its run is waiting on the server for the scheduled time when the cancel comes.
    await s.run(`broadcast:${id}`, ['RUNNING']);
    const cancel = await s.call('POST', `/api/v1/broadcasts/${id}/cancel`, { as: 'admin' });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    const run = await s.run(`broadcast:${id}`, ['COMPLETED'], 15_000);
    assert.deepEqual(run.result, { status: 'canceled', recipients: 0, pages: 0 });
    assert.deepEqual(signalsOf(run), ['cancel']);
    assert.deepEqual(activitiesOf(run), ['freezeAudience']);
    const b = await broadcast(id);
    assert.equal(b.status, 'canceled');
    assert.equal(b.recipients, null, 'the audience never froze');
    assert.equal(mailWith(subject).length, 0);
  });
});
