import fs from 'node:fs';
import path from 'node:path';
import type { Orm } from '../db/orm';
import { Organization } from '../db/entities';
import { createDomain, createKey, createOrganization } from './provisioning';

export const SANDBOX_DOMAIN = 'sandbox.test';

export interface LocalCredentials {
  organization_id: string;
  sender_domain: string;
  admin_key: string;
  send_key: string;
  created_at: string;
}

/**
 * First run: a local organization, a verified sandbox domain in the reserved .test TLD, an ADMIN
 * key and a live SEND key, saved to DATA_DIR/credentials.json (0600) because tokens are shown once.
 */
export async function ensureLocalSetup(orm: Orm, dataDir: string): Promise<{ creds: LocalCredentials; created: boolean }> {
  const file = path.join(dataDir, 'credentials.json');
  if (fs.existsSync(file)) {
    const creds = JSON.parse(fs.readFileSync(file, 'utf8')) as LocalCredentials;
    if (await orm.em.fork().findOne(Organization, { id: creds.organization_id })) return { creds, created: false };
  }
  const org = await createOrganization(orm, 'Local organization', 'standard');
  const domain = await createDomain(orm, org.id, SANDBOX_DOMAIN, { verified: true });
  const admin = await createKey(orm, org.id, { name: 'local admin', permission: 'admin', mode: 'live' });
  const send = await createKey(orm, org.id, { name: 'local send', permission: 'send', mode: 'live' });
  const creds: LocalCredentials = {
    organization_id: org.id,
    sender_domain: domain.name,
    admin_key: admin.token,
    send_key: send.token,
    created_at: new Date().toISOString(),
  };
  fs.writeFileSync(file, JSON.stringify(creds, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  return { creds, created: true };
}
