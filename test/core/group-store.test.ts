import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Email, Recipient } from '../../db/entities';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { acceptEmails, type Accepted } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { uuidv7 } from '../../db/ids';
import { newDatabase } from '../support/pg';

describe('GroupStore: concurrent sends share one statement, and each is answered on its own', function () {
  this.timeout(60_000);
  let orm: Orm;
  const tenants: { orgId: string; domain: string; key: string }[] = [];
  let capped: string;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_groups'));
    await migrate(orm);
    for (const name of ['a', 'b']) {
      const org = await createOrganization(orm, name);
      const domain = await createDomain(orm, org.id, `${name}.groups.example.test`, { verified: true });
      const { token } = await createKey(orm, org.id, { name, permission: 'send', mode: 'live', rateLimit: 1000 });
      tenants.push({ orgId: org.id, domain: domain.name, key: hashToken(token) });
    }
    capped = hashToken((await createKey(orm, tenants[0].orgId, { name: 'capped', permission: 'send', mode: 'live', rateLimit: 2 })).token);
  });
  after(async () => orm.close());

  const send = (store: GroupStore, key: string, from: string, to: string) =>
    acceptEmails(
      { orm, dispatch: () => undefined, store },
      { tokenHash: key },
      [prepareEmail({ from, to, subject: 's', text: 't' }, { inBatch: false, now: new Date() })],
      { cost: 1 },
    ).then(
      ([r]) => r,
      (err: unknown) => err,
    );

  it('stores each organization its own messages, refuses unknown keys, foreign domains and a spent rate, all in a few statements', async () => {
    const store = new GroupStore(orm, pino({ level: 'silent' }));
    const [a, b] = tenants;
    // Fired together: the first request runs alone, the rest queue and share the next statements.
    const calls = [
      ...Array.from({ length: 10 }, (_, i) => send(store, a.key, `app@${a.domain}`, `a${i}@example.com`)),
      ...Array.from({ length: 10 }, (_, i) => send(store, b.key, `app@${b.domain}`, `b${i}@example.com`)),
      send(store, hashToken('svc_live_unknownunknownunknown'), `app@${a.domain}`, 'x@example.com'),
      send(store, a.key, `app@${b.domain}`, 'foreign@example.com'),
      ...Array.from({ length: 4 }, (_, i) => send(store, capped, `app@${a.domain}`, `c${i}@example.com`)),
    ];
    const results = await Promise.all(calls);
    assert.ok(store.statements <= 3, `${results.length} requests took ${store.statements} statements`);

    const stored = async (r: unknown) => orm.em.fork().findOneOrFail(Email, { id: (r as Accepted).id });
    for (const [i, r] of results.slice(0, 10).entries()) {
      assert.ok(!(r instanceof Error), String(r));
      const e = await stored(r);
      assert.equal(e.organizationId, a.orgId);
      assert.deepEqual(e.to, [`a${i}@example.com`]);
    }
    for (const [i, r] of results.slice(10, 20).entries()) {
      const e = await stored(r);
      assert.equal(e.organizationId, b.orgId);
      assert.deepEqual(e.to, [`b${i}@example.com`]);
    }
    assert.equal((results[20] as ServiceError).code, 'invalid_api_key');
    assert.equal((results[21] as ServiceError).code, 'domain_not_verified', 'a domain of another organization is not yours');
    const capOutcomes = results.slice(22).map((r) => (r instanceof ServiceError ? r.code : 'stored'));
    assert.equal(capOutcomes.filter((c) => c === 'stored').length, 2, capOutcomes.join(','));
    assert.equal(capOutcomes.filter((c) => c === 'rate_limited').length, 2, capOutcomes.join(','));
  });

  it('when a group statement fails, stores its requests one by one: only the faulty one fails', async () => {
    const store = new GroupStore(orm, pino({ level: 'silent' }));
    const [a] = tenants;
    const good = send(store, a.key, `app@${a.domain}`, 'first@example.com');
    // A row the database refuses (recipients.field is to, cc or bcc): the statement holding it fails.
    const id = uuidv7();
    const bad = store
      .store({
        tokenHash: a.key,
        cost: 1,
        prepaid: false,
        emails: [
          {
            id,
            at: new Date().toISOString(),
            from_domain: a.domain,
            bulk: false,
            from_address: `app@${a.domain}`,
            to_addresses: ['z@example.com'],
            cc_addresses: [],
            bcc_addresses: [],
            subject: 's',
            text: 't',
            headers: {},
            tags: [],
            source: 'api',
          },
        ],
        recipients: [{ id: uuidv7(), email_id: id, address: 'z@example.com', field: 'xx' }],
        attachments: [],
      })
      .then(
        () => 'stored',
        (err: Error) => err.message,
      );
    const others = Array.from({ length: 3 }, (_, i) => send(store, a.key, `app@${a.domain}`, `other${i}@example.com`));
    const [g, b, ...o] = await Promise.all([good, bad, ...others]);
    assert.match(b as string, /recipients_field_check|check constraint/);
    for (const r of [g, ...o]) {
      assert.ok(!(r instanceof Error), String(r));
      assert.equal(await orm.em.fork().count(Recipient, { emailId: (r as Accepted).id }), 1);
    }
    assert.equal(await orm.em.fork().count(Email, { id }), 0, 'nothing of the faulty request is stored');
  });
});
