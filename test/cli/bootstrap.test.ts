import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ensureLocalSetup } from '../../server/bootstrap';
import { createDomain, createOrganization } from '../../core/provisioning';
import { Domain } from '../../db/entities';
import { sharedService } from '../support/service';
import { tempDir } from '../support/pg';

describe('First-run setup (credentials.json)', function () {
  this.timeout(60_000);

  it('removes tokens an older version kept in clear, and keeps the rest', async () => {
    const env = await sharedService();
    const org = await createOrganization(env.service.db.orm, 'Older install', 'standard');
    const dir = tempDir('svc-creds');
    const file = path.join(dir, 'credentials.json');
    const old = {
      organization_id: org.id,
      sender_domain: 'sandbox.test',
      admin_key: 'svc_live_aaaaaaaaaaaaaaaaaaaaaaaa',
      send_key: 'svc_live_bbbbbbbbbbbbbbbbbbbbbbbb',
      created_at: '2026-11-01T00:00:00.000Z',
    };
    fs.writeFileSync(file, JSON.stringify(old), { mode: 0o600 });
    const r = await ensureLocalSetup(env.service.db.orm, dir, { production: false });
    assert.equal(r.created, false);
    assert.equal(r.removedClearTokens, true);
    assert.equal(r.tokens, null);
    const now = fs.readFileSync(file, 'utf8');
    assert.ok(!now.includes('svc_live_'), now);
    assert.equal(JSON.parse(now).organization_id, org.id);
    assert.equal(JSON.parse(now).sender_domain, 'sandbox.test');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal((await ensureLocalSetup(env.service.db.orm, dir, { production: false })).removedClearTokens, false);
  });

  it('makes the development sandbox without warm-up, and turns off the warm-up of a sandbox made before', async () => {
    const env = await sharedService();
    const orm = env.service.db.orm;
    const stageOf = async (organizationId: string) =>
      (await orm.em.fork().findOneOrFail(Domain, { organizationId, name: 'sandbox.test' })).warmupStage;
    const fresh = await ensureLocalSetup(orm, tempDir('svc-creds-new'), { production: false });
    assert.equal(fresh.created, true);
    assert.equal(await stageOf(fresh.setup.organization_id), null, 'no 200-a-day cap on the dev inbox');

    const org = await createOrganization(orm, 'Older sandbox', 'standard');
    await createDomain(orm, org.id, 'sandbox.test', { verified: true, warmup: true });
    assert.equal(await stageOf(org.id), 1);
    const dir = tempDir('svc-creds-old');
    fs.writeFileSync(
      path.join(dir, 'credentials.json'),
      JSON.stringify({ organization_id: org.id, sender_domain: 'sandbox.test', created_at: '2026-11-01T00:00:00.000Z' }),
      { mode: 0o600 },
    );
    assert.equal((await ensureLocalSetup(orm, dir, { production: false })).created, false);
    assert.equal(await stageOf(org.id), null);
  });
});
