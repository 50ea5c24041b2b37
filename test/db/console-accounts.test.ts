import assert from 'node:assert/strict';
import { hashToken } from '../../core/tokens';
import type { Orm } from '../../db/orm';
import { createSecrets } from '../../core/secrets';
import { OperatorError } from '../../core/limits/operator';
import {
  beginTotp,
  changePassword,
  confirmTotp,
  consumePasswordLink,
  createOperator,
  disableTotp,
  ensureFirstOperator,
  issuePasswordLink,
  readPasswordLink,
} from '../../core/console/operators';
import { hashPassword, passwordProblem, verifyPassword } from '../../core/console/passwords';
import { openSession, resolveSession, revokeSession, type SessionPolicy } from '../../core/console/sessions';
import { ACCOUNT_FAILURE_LIMIT, ADDRESS_FAILURE_LIMIT, signIn } from '../../core/console/sign-in';
import { totpCode, verifyTotp } from '../../core/console/totp';
import { insertOrganization, openTestDb, sql, unique } from '../support/db-fixtures';

/**
 * The console's accounts (core/console/, db/sql/operators.ts, operator-sessions.ts,
 * signin-failures.ts) on a real database: links, passwords, TOTP, sessions and the sign-in limits.
 * Time is moved by rewriting rows' timestamps, never by waiting.
 */
describe('console accounts: operators, links, sign-in, sessions', function () {
  this.timeout(120_000);
  let orm: Orm;
  const secrets = createSecrets(Buffer.alloc(32, 3));
  const policy: SessionPolicy = { idleMs: 30 * 60_000, absoluteMs: 12 * 3_600_000 };
  const BASE = 'https://svc.example.test';
  const PASSWORD = 'correct horse battery';

  before(async () => {
    orm = await openTestDb('db_console_accounts');
  });
  after(async () => orm.close());

  const tokenOf = (url: string) => url.slice(`${BASE}/console/set-password/`.length);
  const deps = () => ({ orm, secrets, policy });
  /** A platform operator with PASSWORD set, and a client address of its own. */
  async function operatorWithPassword(): Promise<{ id: string; email: string; address: string }> {
    const op = await createOperator(orm, { email: `${unique('op')}@example.com`, organizationId: null }, BASE);
    assert.ok(await consumePasswordLink(orm, tokenOf(op.set_password_url), PASSWORD));
    return { id: op.id, email: op.email, address: unique('10.0.0.') };
  }

  // First, while the database has no operator: afterwards other tests have set passwords.
  it('ensureFirstOperator: creates a platform operator on an empty table, links it until a password is set, then null', async () => {
    const url = await ensureFirstOperator(orm, 'First@Example.com', BASE);
    assert.ok(url?.startsWith(`${BASE}/console/set-password/`));
    const again = await ensureFirstOperator(orm, 'someone-else@example.com', BASE);
    assert.ok(again && again !== url);
    assert.equal(await readPasswordLink(orm, tokenOf(url!)), null, 'the fresh link replaced the earlier one');
    const link = await readPasswordLink(orm, tokenOf(again!));
    assert.equal(link?.email, 'first@example.com');
    const rows = await sql(orm, `select email, organization_id from operators`);
    assert.deepEqual(rows, [{ email: 'first@example.com', organization_id: null }], 'no second operator when one exists');
    assert.ok(await consumePasswordLink(orm, tokenOf(again!), PASSWORD));
    assert.equal(await ensureFirstOperator(orm, 'first@example.com', BASE), null);
  });

  it('passwords: scrypt with its parameters stored; 12 to 256 characters, no NUL', async () => {
    const stored = await hashPassword(PASSWORD);
    assert.match(stored, /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    assert.equal(await verifyPassword(PASSWORD, stored), true);
    assert.equal(await verifyPassword(PASSWORD + 'x', stored), false);
    assert.equal(await verifyPassword(PASSWORD, null), false);
    assert.equal(await verifyPassword(PASSWORD, 'garbage'), false);
    assert.equal(passwordProblem('x'.repeat(12)), null);
    assert.equal(passwordProblem('é'.repeat(256)), null);
    for (const bad of ['x'.repeat(11), 'x'.repeat(257), `${'x'.repeat(12)}\u0000`]) assert.equal(typeof passwordProblem(bad), 'string');
  });

  it('createOperator: a link that sets the password once; a used, expired or replaced link is refused', async () => {
    const org = await insertOrganization(orm);
    const op = await createOperator(orm, { email: ` ${unique('Admin')}@Example.COM `, organizationId: org.id }, BASE);
    assert.equal(op.email, op.email.toLowerCase());
    const token = tokenOf(op.set_password_url);
    assert.deepEqual(await readPasswordLink(orm, token), { operatorId: op.id, email: op.email });
    assert.ok('problem' in ((await consumePasswordLink(orm, token, 'short')) ?? {}), 'a refused password leaves the link usable');
    assert.deepEqual(await consumePasswordLink(orm, token, PASSWORD), { operatorId: op.id });
    assert.equal(await consumePasswordLink(orm, token, PASSWORD + '2'), null);
    assert.equal(await readPasswordLink(orm, token), null);
    const signedIn = await signIn(deps(), { email: op.email, password: PASSWORD, address: unique('10.1.0.') });
    assert.ok(signedIn.ok && signedIn.operator.role === 'org_admin' && signedIn.operator.organizationId === org.id);

    const first = tokenOf(await issuePasswordLink(orm, op.id, BASE));
    const second = tokenOf(await issuePasswordLink(orm, op.id, BASE));
    assert.equal(await readPasswordLink(orm, first), null, 'a new link ends the unused earlier one');
    await sql(orm, `update operator_links set expires_at = now() - interval '1 second' where operator_id = $1 and used_at is null`, [
      op.id,
    ]);
    assert.equal(await readPasswordLink(orm, second), null);
    assert.equal(await consumePasswordLink(orm, second, PASSWORD + '2'), null);
    assert.equal(await consumePasswordLink(orm, 'not a token', PASSWORD), null);
  });

  it('createOperator: usage mistakes are OperatorErrors', async () => {
    const org = await insertOrganization(orm);
    const email = `${unique('dup')}@example.com`;
    await createOperator(orm, { email, organizationId: null }, BASE);
    const cases: [string, string | null, RegExp][] = [
      ['Name <a@example.com>', null, /one plain address/],
      ['a@example.com, b@example.com', null, /one plain address/],
      ['nobody', null, /one plain address/],
      [email.toUpperCase(), null, /already exists/],
      [`${unique('o')}@example.com`, '0190a3c4-0000-7000-8000-000000000000', /no organization/],
      [`${unique('o')}@example.com`, 'acme', /by id/],
    ];
    for (const [e, orgId, re] of cases) {
      await assert.rejects(createOperator(orm, { email: e, organizationId: orgId }, BASE), (err: Error) => {
        assert.ok(err instanceof OperatorError, String(err));
        assert.match(err.message, re);
        return true;
      });
    }
    const [n] = await sql(orm, `select count(*)::int as n from operators where organization_id = $1`, [org.id]);
    assert.equal(n.n, 0);
  });

  it('two concurrent consumes of one link: exactly one sets the password', async () => {
    for (let i = 0; i < 5; i++) {
      const op = await createOperator(orm, { email: `${unique('race')}@example.com`, organizationId: null }, BASE);
      const token = tokenOf(op.set_password_url);
      const results = await Promise.all([
        consumePasswordLink(orm, token, 'first password!'),
        consumePasswordLink(orm, token, 'second password!'),
      ]);
      assert.equal(results.filter((r) => r !== null).length, 1, JSON.stringify(results));
      const winner = results[0] ? 'first password!' : 'second password!';
      const [row] = await sql(orm, `select password_hash from operators where id = $1`, [op.id]);
      assert.equal(await verifyPassword(winner, row.password_hash), true);
    }
  });

  it('signIn: the right password opens a session; a wrong one, an unknown email or no password yet is invalid', async () => {
    const op = await operatorWithPassword();
    const ok = await signIn(deps(), { email: op.email.toUpperCase(), password: PASSWORD, address: op.address });
    assert.ok(ok.ok);
    assert.deepEqual(ok.operator, { id: op.id, email: op.email, organizationId: null, role: 'platform', totpEnabled: false });
    const session = await resolveSession(orm, ok.token, policy);
    assert.equal(session?.operator.id, op.id);
    assert.equal(session?.csrf, ok.csrf);
    assert.deepEqual(await signIn(deps(), { email: op.email, password: PASSWORD + '!', address: op.address }), {
      ok: false,
      reason: 'invalid',
    });
    assert.deepEqual(await signIn(deps(), { email: `${unique('ghost')}@example.com`, password: PASSWORD, address: op.address }), {
      ok: false,
      reason: 'invalid',
    });
    const fresh = await createOperator(orm, { email: `${unique('new')}@example.com`, organizationId: null }, BASE);
    assert.deepEqual(await signIn(deps(), { email: fresh.email, password: '', address: op.address }), { ok: false, reason: 'invalid' });
  });

  it('signIn: 5 failures lock an account for the window, whether it exists or not (the same answer)', async () => {
    const op = await operatorWithPassword();
    const ghost = `${unique('ghost')}@example.com`;
    for (const email of [op.email, ghost]) {
      for (let i = 0; i < ACCOUNT_FAILURE_LIMIT; i++) {
        const r = await signIn(deps(), { email, password: 'wrong password', address: unique('10.2.0.') });
        assert.deepEqual(r, { ok: false, reason: 'invalid' }, `failure ${i + 1}`);
      }
      // From another address, with the right password: the account is locked all the same.
      const locked = await signIn(deps(), { email, password: PASSWORD, address: unique('10.2.0.') });
      assert.deepEqual(locked, { ok: false, reason: 'locked' }, email);
    }
    // The next window starts afresh.
    await sql(orm, `update console_signin_failures set window_start = window_start - interval '15 minutes' where key = $1`, [
      `account:${op.email}`,
    ]);
    assert.ok((await signIn(deps(), { email: op.email, password: PASSWORD, address: unique('10.2.0.') })).ok);
  });

  it('signIn: concurrent guesses are held to the account limit', async () => {
    const op = await operatorWithPassword();
    const results = await Promise.all(
      Array.from({ length: 12 }, () => signIn(deps(), { email: op.email, password: 'wrong password', address: unique('10.3.0.') })),
    );
    const reasons = results.map((r) => (r.ok ? 'ok' : r.reason));
    assert.equal(reasons.filter((r) => r === 'invalid').length, ACCOUNT_FAILURE_LIMIT, reasons.join());
    assert.equal(reasons.filter((r) => r === 'locked').length, 12 - ACCOUNT_FAILURE_LIMIT);
  });

  it('signIn: 30 failures from one address lock every account tried from it', async () => {
    const op = await operatorWithPassword();
    const address = unique('10.4.0.');
    for (let i = 0; i < ADDRESS_FAILURE_LIMIT; i++) {
      const r = await signIn(deps(), { email: `${unique('spray')}@example.com`, password: 'wrong password', address });
      assert.deepEqual(r, { ok: false, reason: 'invalid' }, `failure ${i + 1}`);
    }
    assert.deepEqual(await signIn(deps(), { email: op.email, password: PASSWORD, address }), { ok: false, reason: 'locked' });
    assert.ok((await signIn(deps(), { email: op.email, password: PASSWORD, address: unique('10.4.0.') })).ok, 'another address');
  });

  it('signIn: a success clears the account’s failures', async () => {
    const op = await operatorWithPassword();
    const attempt = (password: string) => signIn(deps(), { email: op.email, password, address: op.address });
    for (let i = 0; i < ACCOUNT_FAILURE_LIMIT - 1; i++) assert.equal((await attempt('wrong password')).ok, false);
    assert.ok((await attempt(PASSWORD)).ok);
    for (let i = 0; i < ACCOUNT_FAILURE_LIMIT; i++) {
      assert.deepEqual(await attempt('wrong password'), { ok: false, reason: 'invalid' }, `failure ${i + 1} after the success`);
    }
    assert.deepEqual(await attempt(PASSWORD), { ok: false, reason: 'locked' });
  });

  it('TOTP: set up with a confirmed code; then sign-in asks for it, refuses a wrong or replayed one, accepts the right one', async () => {
    const op = await operatorWithPassword();
    const { secret, uri } = await beginTotp(orm, secrets, op.id);
    assert.match(secret, /^[A-Z2-7]{32}$/);
    assert.match(uri, /^otpauth:\/\/totp\/svc:.*secret=/);
    const [stored] = await sql(orm, `select totp_secret, totp_enabled from operators where id = $1`, [op.id]);
    assert.equal(stored.totp_enabled, false);
    assert.notEqual(stored.totp_secret, secret, 'stored sealed');
    assert.equal(secrets.decrypt(stored.totp_secret), secret);
    assert.equal(verifyTotp(secret, 'abcdef'), false);
    assert.equal(verifyTotp(secret, totpCode(secret, Date.now() - 10 * 60_000)), false);
    // A code no step around now has (the first of a few that is not right).
    const wrong = ['000000', '111111', '222222', '333333'].find((c) => !verifyTotp(secret, c))!;
    assert.equal(await confirmTotp(orm, secrets, op.id, wrong), false);
    const confirming = totpCode(secret);
    assert.equal(await confirmTotp(orm, secrets, op.id, confirming), true);
    await assert.rejects(beginTotp(orm, secrets, op.id), /already on/);

    const attempt = (password: string, code?: string) => signIn(deps(), { email: op.email, password, code, address: op.address });
    assert.deepEqual(await attempt(PASSWORD), { ok: false, reason: 'code_required' });
    assert.deepEqual(await attempt('wrong password'), { ok: false, reason: 'invalid' });
    assert.deepEqual(await attempt(PASSWORD, wrong), { ok: false, reason: 'invalid' });
    assert.deepEqual(await attempt(PASSWORD, confirming), { ok: false, reason: 'invalid' }, 'the confirming code is spent');
    // The next step's code (a clock 30 s ahead): within the window of one step either side.
    const code = totpCode(secret, Date.now() + 30_000);
    const ok = await attempt(PASSWORD, code);
    assert.ok(ok.ok && ok.operator.totpEnabled);
    assert.deepEqual(await attempt(PASSWORD, code), { ok: false, reason: 'invalid' }, 'a code is good once');
    // The success cleared the wrong password and the two refused codes; code_required counted nothing.
    const [row] = await sql(orm, `select coalesce(sum(count), 0)::int as n from console_signin_failures where key = $1`, [
      `account:${op.email}`,
    ]);
    assert.equal(row.n, 1, 'the replayed code, since the success');

    await disableTotp(orm, op.id);
    assert.ok((await attempt(PASSWORD)).ok);
  });

  it('sessions: end after the idle time, at the absolute end, and when revoked', async () => {
    const op = await operatorWithPassword();
    const idle = await openSession(orm, op.id, policy);
    const absolute = await openSession(orm, op.id, policy);
    const revoked = await openSession(orm, op.id, policy);
    for (const s of [idle, absolute, revoked]) assert.equal((await resolveSession(orm, s.token, policy))?.operator.id, op.id);

    await sql(orm, `update operator_sessions set last_seen_at = now() - interval '29 minutes' where id_hash = $1`, [hashToken(idle.token)]);
    assert.ok(await resolveSession(orm, idle.token, policy), 'within the idle time (and its clock restarts)');
    const [seen] = await sql(orm, `select now() - last_seen_at < interval '1 minute' as fresh from operator_sessions where id_hash = $1`, [
      hashToken(idle.token),
    ]);
    assert.equal(seen.fresh, true);
    await sql(orm, `update operator_sessions set last_seen_at = now() - interval '31 minutes' where id_hash = $1`, [hashToken(idle.token)]);
    assert.equal(await resolveSession(orm, idle.token, policy), null);

    await sql(orm, `update operator_sessions set expires_at = now() - interval '1 second' where id_hash = $1`, [hashToken(absolute.token)]);
    assert.equal(await resolveSession(orm, absolute.token, policy), null, 'used all along, but past its absolute end');

    await revokeSession(orm, revoked.token);
    assert.equal(await resolveSession(orm, revoked.token, policy), null);
    assert.equal(await resolveSession(orm, undefined, policy), null);
    assert.equal(await resolveSession(orm, 'x'.repeat(43), policy), null);
  });

  it('changePassword: the current password is checked, and every session is revoked with the change', async () => {
    const op = await operatorWithPassword();
    const a = await openSession(orm, op.id, policy);
    const b = await openSession(orm, op.id, policy);
    assert.ok('problem' in (await changePassword(orm, op.id, 'wrong password', 'a new password!')));
    assert.ok('problem' in (await changePassword(orm, op.id, PASSWORD, 'short')));
    assert.ok(await resolveSession(orm, a.token, policy), 'refused changes revoke nothing');
    assert.deepEqual(await changePassword(orm, op.id, PASSWORD, 'a new password!'), { ok: true });
    assert.equal(await resolveSession(orm, a.token, policy), null);
    assert.equal(await resolveSession(orm, b.token, policy), null);
    assert.deepEqual(await signIn(deps(), { email: op.email, password: PASSWORD, address: op.address }), { ok: false, reason: 'invalid' });
    assert.ok((await signIn(deps(), { email: op.email, password: 'a new password!', address: op.address })).ok);
  });
});
