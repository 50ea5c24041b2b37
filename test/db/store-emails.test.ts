import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { storeEmails, type StoreParams, type StoreResult } from '../../db/sql/store-emails';
import {
  insertContact,
  insertDomain,
  insertKey,
  insertOrganization,
  insertSubscription,
  insertSuppression,
  insertTemplate,
  insertTopic,
  ms,
  openTestDb,
  sql,
  unique,
  type KeyRow,
  type Row,
} from '../support/db-fixtures';
import { rateWindow, releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/store-emails: send requests authenticated, charged and stored in one statement', function () {
  let orm: Orm;
  let org: Row;
  let domain: Row;
  let bulkDomain: Row;
  let key: KeyRow;
  const at = new Date('2031-04-05T06:07:08.000Z');

  before(async () => {
    orm = await openTestDb('db_store_emails');
    org = await insertOrganization(orm);
    domain = await insertDomain(orm, org.id);
    bulkDomain = await insertDomain(orm, org.id, { stream: 'bulk' });
    key = await insertKey(orm, org.id, { rate_limit: 1000 });
  });
  after(async () => orm.close());

  interface Message {
    id: string;
    row: Record<string, unknown>;
    recipients: Record<string, unknown>[];
  }
  /** A message as the accept path builds it (fields at their default left out). */
  function message(over: Record<string, unknown> = {}, to: string[] = [`${unique('to')}@example.com`], from: Row = domain): Message {
    const id = uuidv7();
    return {
      id,
      row: {
        id,
        at: at.toISOString(),
        from_domain: from.name.toLowerCase(),
        bulk: false,
        from_address: `app@${from.name}`,
        to_addresses: to,
        subject: 'Hello',
        html: null,
        text: 'Hi',
        kind: null,
        idempotency_key: null,
        source: 'api',
        ...over,
      },
      recipients: to.map((address) => ({ id: uuidv7(), email_id: id, address, field: 'to' })),
    };
  }
  /** Requests, each with its messages; numbered and positioned as the group store does. */
  function params(
    requests: { key?: KeyRow | null; keyId?: string; cost?: number; prepaid?: boolean; messages: Message[] }[],
    attachments: StoreParams['attachments'] = [],
  ): StoreParams {
    const p: StoreParams = { requests: [], emails: [], recipients: [], attachments };
    requests.forEach((r, req) => {
      p.requests.push({
        req,
        token_hash: r.key === null ? null : (r.key ?? key).token_hash,
        key_id: r.keyId ?? null,
        cost: r.cost ?? 1,
        prepaid: r.prepaid ?? false,
      });
      for (const m of r.messages) {
        p.emails.push({ ...m.row, id: m.id, req, pos: p.emails.length });
        for (const x of m.recipients) p.recipients.push({ ...x, email_id: m.id, pos: p.recipients.length });
      }
    });
    return p;
  }
  const store = (...messages: Message[]) => storeEmails(orm, params([{ messages }]));
  const emailRow = async (id: string) => (await sql(orm, 'select * from emails where id = $1', [id]))[0];
  const recipientsOf = (id: string) => sql(orm, 'select address, field, state from recipients where email_id = $1 order by address', [id]);
  const eventsOf = (id: string) =>
    sql(orm, 'select type, recipient, detail, organization_id from email_events where email_id = $1 order by id', [id]);

  it('stores an admitted request’s message with its recipients, their `queued` events in order, and its attachments', async () => {
    const msg = message({ cc_addresses: ['cc@example.com'], tags: [{ name: 'k', value: 'v' }] }, ['b@example.com', 'a@example.com']);
    msg.recipients.push({ id: uuidv7(), email_id: msg.id, address: 'cc@example.com', field: 'cc' });
    const r = await storeEmails(
      orm,
      params(
        [{ messages: [msg] }],
        [
          {
            id: uuidv7(),
            email_id: msg.id,
            position: 0,
            filename: 'a.txt',
            content_type: 'text/plain',
            size: 5,
            content: Buffer.from('hello').toString('base64'),
          },
        ],
      ),
    );
    assert.deepEqual(r, {
      requests: [{ req: 0, known: true, admitted: true, rate_limit: 1000, organization_id: org.id }],
      stored: [{ id: msg.id, status: 'queued', suppressed: [] }],
      refused: [],
    } satisfies StoreResult);
    const e = await emailRow(msg.id);
    assert.deepEqual(
      [
        e.organization_id,
        e.api_key_id,
        e.domain_id,
        e.mode,
        e.status,
        e.enqueued_at,
        e.stream,
        e.message_id,
        ms(e.created_at),
        e.cc_addresses,
        e.headers,
        e.track_opens,
      ],
      [
        org.id,
        key.id,
        domain.id,
        'live',
        'queued',
        null,
        'transactional',
        `<${msg.id}@${domain.name}>`,
        at.getTime(),
        ['cc@example.com'],
        {},
        false,
      ],
    );
    assert.deepEqual(await recipientsOf(msg.id), [
      { address: 'a@example.com', field: 'to', state: 'pending' },
      { address: 'b@example.com', field: 'to', state: 'pending' },
      { address: 'cc@example.com', field: 'cc', state: 'pending' },
    ]);
    assert.deepEqual(
      (await eventsOf(msg.id)).map((x) => [x.type, x.recipient, x.organization_id]),
      [
        ['queued', 'b@example.com', org.id],
        ['queued', 'a@example.com', org.id],
        ['queued', 'cc@example.com', org.id],
      ],
      'events follow the recipients’ order',
    );
    const [att] = await sql(orm, `select filename, convert_from(content, 'utf8') as body from attachments where email_id = $1`, [msg.id]);
    assert.deepEqual(att, { filename: 'a.txt', body: 'hello' });
  });

  it('an unknown token: not known, nothing stored', async () => {
    const msg = message();
    const r = await storeEmails(orm, params([{ key: { token_hash: 'a'.repeat(64) } as KeyRow, messages: [msg] }]));
    assert.deepEqual(r.requests, [{ req: 0, known: false, admitted: false, rate_limit: null, organization_id: null }]);
    assert.deepEqual([r.stored, r.refused], [[], []]);
    assert.equal(await emailRow(msg.id), undefined);
  });

  it('charges each key its requests’ costs in request order: a request past the cap stores nothing', async () => {
    const capped = await insertKey(orm, org.id, { rate_limit: 2 });
    const msgs = [message(), message(), message()];
    const r = await storeEmails(orm, params(msgs.map((m) => ({ key: capped, messages: [m] }))));
    assert.deepEqual(
      r.requests.map((q) => [q.req, q.admitted]),
      [
        [0, true],
        [1, true],
        [2, false],
      ],
    );
    assert.deepEqual(r.stored.map((s) => s.id).sort(), [msgs[0].id, msgs[1].id].sort());
    assert.equal(await emailRow(msgs[2].id), undefined);
    assert.equal((await rateWindow(orm, capped.id))?.used, 3);
  });

  it('a prepaid request (a batch that reserved) is admitted and not charged again; a broadcast’s fan-out names its key, revoked or not', async () => {
    const capped = await insertKey(orm, org.id, { rate_limit: 1 });
    // Its callers pass a cost of 0 (accept.ts): the reservation was its charge.
    const r = await storeEmails(orm, params([{ key: capped, cost: 0, prepaid: true, messages: [message(), message(), message()] }]));
    assert.deepEqual([r.requests[0].admitted, r.stored.length], [true, 3]);
    assert.equal(await rateWindow(orm, capped.id), undefined, 'a prepaid request writes no window');
    await sql(orm, 'update api_keys set revoked_at = now() where id = $1', [capped.id]);
    const fan = await storeEmails(
      orm,
      params([{ key: null, keyId: capped.id, cost: 0, prepaid: true, messages: [message({ source: 'broadcast' })] }]),
    );
    assert.deepEqual([fan.requests[0].known, fan.requests[0].admitted, fan.stored.length], [true, true, 1]);
    const viaToken = await storeEmails(orm, params([{ key: capped, messages: [message()] }]));
    assert.equal(viaToken.requests[0].known, false, 'the revoked key’s token no longer sends');
  });

  it('refuses, each on its own, a sender domain the key may not use', async () => {
    const other = await insertOrganization(orm);
    const theirs = await insertDomain(orm, other.id);
    const pending = await insertDomain(orm, org.id, { status: 'pending' });
    const deleted = await insertDomain(orm, org.id, { deleted_at: new Date() });
    const restricted = await insertKey(orm, org.id, { domain_ids: [bulkDomain.id] });
    const [a, b, c, d, ok] = [
      message({}, undefined, theirs),
      message({}, undefined, pending),
      message({}, undefined, deleted),
      message(),
      message(),
    ];
    const r = await storeEmails(orm, params([{ messages: [a, b, c, ok] }, { key: restricted, messages: [d] }]));
    assert.deepEqual(
      r.stored.map((s) => s.id),
      [ok.id],
    );
    assert.deepEqual(new Map(r.refused.map((x) => [x.id, x.code])), new Map([a, b, c, d].map((m) => [m.id, 'domain_not_verified'])));
  });

  it('refuses bulk mail from a transactional domain, an unknown topic, and tracking without a verified tracking host', async () => {
    const topic = await insertTopic(orm, org.id);
    const other = await insertOrganization(orm);
    const theirTopic = await insertTopic(orm, other.id, { slug: unique('their-topic') });
    const tracked = await insertDomain(orm, org.id, {
      tracking_host: 'track.example.test',
      records: [{ purpose: 'tracking', status: 'verified', name: 'track.example.test' }],
    });
    const unverified = await insertDomain(orm, org.id, {
      tracking_host: 'track2.example.test',
      records: [{ purpose: 'tracking', status: 'pending', name: 'track2.example.test' }],
    });
    const msgs = {
      mismatch: message({ bulk: true, kind: 'broadcast' }),
      unknownTopic: message({ bulk: true, kind: 'broadcast', topic: unique('nope') }, undefined, bulkDomain),
      theirTopic: message({ bulk: true, kind: 'broadcast', topic: theirTopic.slug }, undefined, bulkDomain),
      tracking: message({ track_opens: true }, undefined, unverified),
      noHost: message({ track_clicks: true }),
      okBulk: message({ bulk: true, kind: 'broadcast', topic: topic.slug }, undefined, bulkDomain),
      okTracked: message({ track_clicks: true }, undefined, tracked),
    };
    const r = await store(...Object.values(msgs));
    assert.deepEqual(
      new Map(r.refused.map((x) => [x.id, x.code])),
      new Map([
        [msgs.mismatch.id, 'stream_mismatch'],
        [msgs.unknownTopic.id, 'unknown_topic'],
        [msgs.theirTopic.id, 'unknown_topic'],
        [msgs.tracking.id, 'tracking_host'],
        [msgs.noHost.id, 'tracking_host'],
      ]),
    );
    assert.deepEqual(r.stored.map((s) => s.id).sort(), [msgs.okBulk.id, msgs.okTracked.id].sort());
    const bulk = await emailRow(msgs.okBulk.id);
    assert.deepEqual([bulk.stream, bulk.topic_id], ['bulk', topic.id]);
  });

  it('refuses a message rendered from a template that changed or left the organization (template_changed)', async () => {
    const t = await insertTemplate(orm, org.id, { latest_version: 2 });
    const other = await insertOrganization(orm);
    const theirs = await insertTemplate(orm, other.id, { latest_version: 1 });
    const msgs = {
      latest: message({ template_id: t.id, template_version: 2, template_latest: true }),
      stale: message({ template_id: t.id, template_version: 1, template_latest: true }),
      pinned: message({ template_id: t.id, template_version: 1, template_latest: false }),
      gone: message({ template_id: uuidv7(), template_version: 1, template_latest: false }),
      theirs: message({ template_id: theirs.id, template_version: 1, template_latest: true }),
    };
    const r = await store(...Object.values(msgs));
    assert.deepEqual(r.stored.map((s) => s.id).sort(), [msgs.latest.id, msgs.pinned.id].sort());
    assert.deepEqual(
      r.refused.map((x) => x.code),
      ['template_changed', 'template_changed', 'template_changed'],
    );
    assert.equal((await emailRow(msgs.pinned.id)).template_version, 1);
  });

  it('suppresses listed addresses; a message whose every recipient is suppressed is stored `suppressed` and never queued', async () => {
    const listed = `${unique('listed')}@example.com`;
    await insertSuppression(orm, org.id, listed);
    const other = await insertOrganization(orm);
    const listedElsewhere = `${unique('elsewhere')}@example.com`;
    await insertSuppression(orm, other.id, listedElsewhere);
    const part = message({}, [listed, listedElsewhere]);
    const all = message({}, [listed]);
    const r = await store(part, all);
    assert.deepEqual(
      new Map(r.stored.map((s) => [s.id, [s.status, s.suppressed]])),
      new Map([
        [part.id, ['queued', [listed]]],
        [all.id, ['suppressed', [listed]]],
      ]),
    );
    assert.deepEqual(
      (await recipientsOf(part.id)).map((x) => [x.address, x.state]),
      [
        [listed, 'suppressed'],
        [listedElsewhere, 'pending'],
      ].sort(),
    );
    assert.deepEqual(
      (await eventsOf(part.id)).map((x) => [x.type, x.recipient, x.detail]),
      [
        ['suppressed', listed, null],
        ['queued', listedElsewhere, null],
      ],
    );
    const e = await emailRow(all.id);
    assert.deepEqual([e.status, ms(e.enqueued_at)], ['suppressed', at.getTime()]);
  });

  it('bulk mail only: an unsubscribed or bounced contact, or one that left the message’s topic, is suppressed with the reason', async () => {
    const topic = await insertTopic(orm, org.id, { default_opt_in: false });
    const unsub = await insertContact(orm, org.id, { status: 'unsubscribed' });
    const bounced = await insertContact(orm, org.id, { status: 'bounced' });
    const left = await insertContact(orm, org.id);
    await insertSubscription(orm, left.id, topic.id, 'unsubscribed');
    const noRow = await insertContact(orm, org.id); // opt-out topic default, but no explicit row: not suppressed
    const bulk = (c: Row) => message({ bulk: true, kind: 'broadcast', topic: topic.slug }, [c.email], bulkDomain);
    const msgs = [bulk(unsub), bulk(bounced), bulk(left), bulk(noRow)];
    const transactional = message({}, [unsub.email]);
    const r = await store(...msgs, transactional);
    const status = new Map(r.stored.map((s) => [s.id, s.status]));
    assert.deepEqual(
      msgs.map((m) => status.get(m.id)),
      ['suppressed', 'suppressed', 'suppressed', 'queued'],
    );
    assert.equal(status.get(transactional.id), 'queued', 'transactional mail ignores the contact’s status');
    assert.deepEqual(await Promise.all(msgs.slice(0, 3).map(async (m) => (await eventsOf(m.id))[0].detail)), [
      'unsubscribed',
      'bounced',
      'unsubscribed',
    ]);
  });

  it('an idempotency key already used by the organization stores nothing again (a replay); another organization’s use is its own', async () => {
    const ik = unique('idem');
    const first = message({ idempotency_key: ik });
    assert.equal((await store(first)).stored.length, 1);
    const t = await insertTemplate(orm, org.id, { latest_version: 5 });
    const replay = message({ idempotency_key: ik, template_id: t.id, template_version: 1, template_latest: true });
    const r = await store(replay);
    assert.deepEqual([r.stored, r.refused], [[], []], 'a replay is neither stored nor refused, whatever its template');
    assert.equal(await emailRow(replay.id), undefined);
    assert.deepEqual(await recipientsOf(replay.id), []);
    assert.deepEqual(await eventsOf(replay.id), []);
    const other = await insertOrganization(orm);
    const theirDomain = await insertDomain(orm, other.id);
    const theirKey = await insertKey(orm, other.id);
    const theirs = message({ idempotency_key: ik }, undefined, theirDomain);
    assert.equal((await storeEmails(orm, params([{ key: theirKey, messages: [theirs] }]))).stored.length, 1);
  });

  /**
   * The race: the same request sent twice at once (a client retry) with one idempotency key. Both
   * statements meet on the key (behind a transaction holding it, then rolled back): exactly one
   * stores the message; the other stores nothing, no recipient, no event.
   */
  it('race: concurrent stores with one idempotency key store exactly one message', async () => {
    const ik = unique('race');
    const keys: KeyRow[] = [];
    for (let i = 0; i < 4; i++) keys.push(await insertKey(orm, org.id));
    const msgs = keys.map(() => message({ idempotency_key: ik }));
    const held = uuidv7();
    const results = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, mode, status, message_id, idempotency_key, created_at, updated_at)
             values ($1, $2, $3, $4, 'a@b.c', '[]', 's', 'live', 'queued', 'm', $5, now(), now())`,
            [held, org.id, key.id, domain.id, ik],
          ],
        ],
        msgs.map((m, i) => () => storeEmails(orm, params([{ key: keys[i], messages: [m] }]))),
        'rollback',
      ),
    );
    const stored = results.flatMap((r) => r.stored.map((s) => s.id));
    assert.equal(stored.length, 1, JSON.stringify(results));
    const [n] = await sql(orm, 'select count(*)::int as n from emails where organization_id = $1 and idempotency_key = $2', [org.id, ik]);
    assert.equal(n.n, 1);
    const [rc] = await sql(orm, 'select count(*)::int as n from recipients where email_id = any($1)', [msgs.map((m) => m.id)]);
    assert.equal(rc.n, 1, 'only the stored message’s recipient');
    const [ev] = await sql(orm, 'select count(*)::int as n from email_events where email_id = any($1)', [msgs.map((m) => m.id)]);
    assert.equal(ev.n, 1, 'only the stored message’s event');
  });

  /** The race: one key's single sends at once, on several processes. The window admits exactly its cap. */
  it('race: concurrent stores on one key admit exactly its cap and count every request', async () => {
    for (let attempt = 0; ; attempt++) {
      const capped = await insertKey(orm, org.id, { rate_limit: 3 });
      await sql(orm, `insert into key_rate_windows (api_key_id, window_start, used) values ($1, '2031-01-01', 0)`, [capped.id]);
      const msgs = Array.from({ length: 7 }, () => message());
      const results = values(
        await releasedTogether(
          orm,
          [['select 1 from key_rate_windows where api_key_id = $1 for update', [capped.id]]],
          msgs.map((m) => () => storeEmails(orm, params([{ key: capped, messages: [m] }]))),
        ),
      );
      const w = await rateWindow(orm, capped.id);
      // A run straddling a second charges two windows: run it again on a fresh key.
      if (w?.used !== 7 && attempt < 4) continue;
      assert.equal(w?.used, 7, 'every request counted');
      assert.equal(results.filter((r) => r.requests[0].admitted).length, 3, JSON.stringify(results.map((r) => r.requests)));
      assert.equal(results.flatMap((r) => r.stored).length, 3);
      return;
    }
  });
});
