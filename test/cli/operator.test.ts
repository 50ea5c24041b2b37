import assert from 'node:assert/strict';
import { newDatabase, tempDir } from '../support/pg';
import { runSvc, svcJson } from '../support/child';

/** `svc operator create`: a one-time set-password link on stdout; usage mistakes exit 2. */
describe('svc operator create', function () {
  this.timeout(120_000);
  let env: Record<string, string>;

  before(async () => {
    env = {
      DATABASE_URL: await newDatabase('svc_operator_cli'),
      DATA_DIR: tempDir('svc-operator'),
      PUBLIC_URL: 'https://svc.example.test',
    };
  });

  it('creates a platform operator and an organization’s admin, each with a link; refuses mistakes', async () => {
    const platform = await svcJson(['operator', 'create', '--email', 'Root@Example.com'], env);
    assert.deepEqual(Object.keys(platform), ['id', 'email', 'set_password_url']);
    assert.equal(platform.email, 'root@example.com');
    assert.match(platform.set_password_url, /^https:\/\/svc\.example\.test\/console\/set-password\/[A-Za-z0-9_-]{43}$/);

    const org = await svcJson(['org', 'create', '--name', 'Acme'], env);
    const admin = await svcJson(['operator', 'create', '--email', 'admin@acme.example', '--org', org.id], env);
    assert.equal(admin.email, 'admin@acme.example');

    for (const [args, message] of [
      [['--email', 'root@example.com'], /already exists/],
      [['--email', 'Root <root@example.com>'], /one plain address/],
      [['--email', 'x@acme.example', '--org', 'acme'], /--org must be an organization id/],
      [[], /--email is required/],
    ] as const) {
      const child = runSvc(['operator', 'create', ...args], env);
      assert.equal(await child.exited, 2, child.output());
      assert.match(child.output(), message);
    }
  });
});
