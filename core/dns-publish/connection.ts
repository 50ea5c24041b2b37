import type { Orm } from '../../db/orm';
import { deleteConnection, isInternal, saveConnection, setInternal } from '../../db/sql/cloudflare';
import { operatorAudit } from '../limits/operator';
import type { Secrets } from '../secrets';
import { client, CloudflareFailure, listZones, recordsAt, verifyToken, type CloudflareSettings, type Zone } from './cloudflare';

/** A refusal in words for the operator (nothing was written). */
export class ConnectionRefused extends Error {}

export const ZONE_READ = '#zone:read';
export const DNS_EDIT = '#dns_records:edit';

/** A platform operator marks an organization internal (or not); audited. False: no such organization. */
export async function markInternal(orm: Orm, organizationId: string, internal: boolean, actor: string | null): Promise<boolean> {
  return orm.em.fork().transactional(async (em) => {
    const before = await setInternal(em, organizationId, internal);
    if (before === null) return false;
    // No longer internal: its token goes with the right to publish.
    if (!internal && (await deleteConnection(em, organizationId)) !== null) {
      em.persist(
        operatorAudit(organizationId, 'organization.cloudflare_detached', { type: 'organization', id: organizationId }, {}, actor),
      );
    }
    if (before !== internal) {
      em.persist(
        operatorAudit(
          organizationId,
          'organization.internal_set',
          { type: 'organization', id: organizationId },
          { from: before, to: internal },
          actor,
        ),
      );
    }
    return true;
  });
}

/** The zones the token may publish in: readable, with DNS edit among the token's permissions there. */
export const editableZones = (zones: Zone[]) => zones.filter((z) => z.permissions.includes(DNS_EDIT) && z.permissions.includes(ZONE_READ));

/**
 * Checks a token as publishing will use it, before it is kept: active (token verify), reads at
 * least one zone (Zone Read) whose permissions include DNS edit (DNS Edit), and lists that zone's
 * records. Returns Cloudflare's id of the token and the zones it may publish in.
 */
export async function checkToken(token: string, settings: CloudflareSettings): Promise<{ tokenId: string; zones: string[] }> {
  if (!/^[\x21-\x7e]{20,200}$/.test(token)) throw new ConnectionRefused('That is not a Cloudflare API token.');
  const cf = client(token, settings);
  try {
    const v = await verifyToken(cf);
    if (v.status !== 'active') throw new ConnectionRefused(`Cloudflare says the token is ${v.status}.`);
    const zones = await listZones(cf);
    if (zones.length === 0) throw new ConnectionRefused('The token reads no zone: it needs Zone Read on the zone of the domains.');
    const editable = editableZones(zones);
    if (editable.length === 0) throw new ConnectionRefused('The token may not edit DNS in any zone it reads: it needs DNS Edit.');
    await recordsAt(cf, editable[0].id, editable[0].name);
    return { tokenId: v.id, zones: editable.map((z) => z.name) };
  } catch (err) {
    if (err instanceof CloudflareFailure) throw new ConnectionRefused(`Cloudflare refused the token (${err.message}).`);
    throw err;
  }
}

/** Attaches a checked token to an internal organization, sealed; audited with its id, never its text. */
export async function attachToken(
  deps: { orm: Orm; secrets: Secrets; cloudflare: CloudflareSettings },
  organizationId: string,
  token: string,
  actor: string | null,
): Promise<{ tokenId: string; zones: string[] }> {
  if (!(await isInternal(deps.orm, organizationId)))
    throw new ConnectionRefused('Only an internal organization may attach a Cloudflare token.');
  const checked = await checkToken(token, deps.cloudflare);
  await deps.orm.em.fork().transactional(async (em) => {
    await saveConnection(em, organizationId, { tokenEnc: deps.secrets.encrypt(token), tokenId: checked.tokenId, attachedBy: actor });
    em.persist(
      operatorAudit(
        organizationId,
        'organization.cloudflare_attached',
        { type: 'organization', id: organizationId },
        { token_id: checked.tokenId, zones: checked.zones },
        actor,
      ),
    );
  });
  return checked;
}

export async function detachToken(orm: Orm, organizationId: string, actor: string | null): Promise<boolean> {
  return orm.em.fork().transactional(async (em) => {
    const tokenId = await deleteConnection(em, organizationId);
    if (tokenId === null) return false;
    em.persist(
      operatorAudit(
        organizationId,
        'organization.cloudflare_detached',
        { type: 'organization', id: organizationId },
        { token_id: tokenId },
        actor,
      ),
    );
    return true;
  });
}
