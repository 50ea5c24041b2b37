import fs from 'node:fs';
import path from 'node:path';
import type { Orm } from '../db/orm';
import { Domain, Organization } from '../db/entities';
import { createDomain, createKey, createOrganization } from '../core/provisioning';

export const SANDBOX_DOMAIN = 'sandbox.test';

/** What first-run setup made, kept in DATA_DIR/credentials.json. Tokens are not kept: they are shown once. */
export interface LocalSetup {
  organization_id: string;
  /** The verified sandbox domain (development only). */
  sender_domain: string | null;
  admin_key_id: string | null;
  send_key_id: string | null;
  created_at: string;
}

export interface LocalSetupResult {
  setup: LocalSetup;
  /** True on the run that made it. */
  created: boolean;
  /** The keys' tokens, only on the run that made them (never in production, which makes no keys). */
  tokens: { admin: string; send: string } | null;
  /** An older credentials.json held tokens in clear; they were removed from it (the keys still work). */
  removedClearTokens: boolean;
}

/**
 * First run: the operator's own organization (standard plan). In development also a verified
 * sandbox domain in the reserved .test TLD (never warming up), an ADMIN key and a live SEND key, whose tokens the
 * caller prints this once; in production nothing more (keys come from `svc key create`).
 */
export async function ensureLocalSetup(orm: Orm, dataDir: string, opts: { production: boolean }): Promise<LocalSetupResult> {
  const file = path.join(dataDir, 'credentials.json');
  if (fs.existsSync(file)) {
    const { admin_key, send_key, ...kept } = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<LocalSetup> & {
      organization_id: string;
      admin_key?: string;
      send_key?: string;
    };
    const setup: LocalSetup = {
      sender_domain: null,
      admin_key_id: null,
      send_key_id: null,
      created_at: new Date(0).toISOString(),
      ...kept,
    };
    // Versions before this one kept the tokens here in clear; tokens are shown once and stored hashed.
    const removedClearTokens = admin_key !== undefined || send_key !== undefined;
    if (removedClearTokens) write(file, setup);
    if (await orm.em.fork().findOne(Organization, { id: setup.organization_id })) {
      // A sandbox made before issue 51 warmed up like a real domain: off, as it is made now.
      if (setup.sender_domain === SANDBOX_DOMAIN) {
        await orm.em.fork().nativeUpdate(Domain, { organizationId: setup.organization_id, name: SANDBOX_DOMAIN }, { warmupStage: null });
      }
      return { setup, created: false, tokens: null, removedClearTokens };
    }
  }
  const org = await createOrganization(orm, 'Local organization', 'standard');
  let setup: LocalSetup = {
    organization_id: org.id,
    sender_domain: null,
    admin_key_id: null,
    send_key_id: null,
    created_at: new Date().toISOString(),
  };
  let tokens: LocalSetupResult['tokens'] = null;
  if (!opts.production) {
    // No warm-up: its mail goes to the development inbox, and a cap of 200 a day (stage 1) would
    // have held the 201st message of a day without a word (issue 51).
    const domain = await createDomain(orm, org.id, SANDBOX_DOMAIN, { verified: true, warmup: false });
    const admin = await createKey(orm, org.id, { name: 'local admin', permission: 'admin', mode: 'live' });
    const send = await createKey(orm, org.id, { name: 'local send', permission: 'send', mode: 'live' });
    setup = { ...setup, sender_domain: domain.name, admin_key_id: admin.key.id, send_key_id: send.key.id };
    tokens = { admin: admin.token, send: send.token };
  }
  write(file, setup);
  return { setup, created: true, tokens, removedClearTokens: false };
}

function write(file: string, setup: LocalSetup): void {
  fs.writeFileSync(file, JSON.stringify(setup, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
}
