import type { Orm } from '../../db/orm';
import { Domain, type DnsRecord } from '../../db/entities';
import {
  forgetOtherPublications,
  isInternal,
  listPublications,
  markVerified,
  readConnection,
  savePublication,
  type Publication,
} from '../../db/sql/cloudflare';
import { operatorAudit } from '../limits/operator';
import type { Secrets } from '../secrets';
import { evaluate } from '../domains/identity';
import { lookup, type DnsResolver } from '../domains/dns';
import { client, CloudflareFailure, createRecord, listZones, recordsAt, updateRecord, type CloudflareSettings } from './cloudflare';
import { editableZones } from './connection';
import { decide, wantedRecords, zoneFor, type Action, type ZoneRecord } from './rules';
import { listDkimKeys } from '../../db/sql/dkim-keys';
import { dkimRecordName, dkimRecordValue, revokedRecordValue } from '../domains/dkim-keys';
import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * A DKIM rotation's keys whose records must be in DNS beside the domain's list: the pending key
 * (before the switch, which waits for DNS to answer it), the retiring one (mail signed with it
 * may still be in flight), and the revoked ones as an empty key (RFC 6376 §3.6.1: `p=` empty
 * says revoked, so verifiers fail old signatures rather than treat the selector as unknown; the
 * rules leave a record the service did not write alone). The active RSA key is the list's `dkim`
 * record; an active Ed25519 key signed alongside it (RFC 8463) is `dkim_active`.
 */
async function rotationRecords(em: EntityManager, domain: Domain): Promise<DnsRecord[]> {
  const keys = await listDkimKeys(em, domain.id);
  return keys
    .filter((k) => k.state !== 'active' || k.algorithm !== 'rsa')
    .map((k) => ({
      purpose: `dkim_${k.state}`,
      type: 'TXT' as const,
      name: dkimRecordName(k.selector, domain.name),
      value: k.state === 'revoked' ? revokedRecordValue(k.algorithm) : dkimRecordValue(k.public_key, k.algorithm),
      required: false,
      observed: null,
      status: 'pending' as const,
    }))
    .filter((r) => !domain.records.some((d) => d.name.toLowerCase() === r.name.toLowerCase()));
}

export interface PublishDeps {
  orm: Orm;
  secrets: Secrets;
  dns: DnsResolver;
  cloudflare: CloudflareSettings;
}

/** A domain's DKIM records: the active key (the domain's list) and a rotation's others (rotationRecords). */
export const DKIM_PURPOSES = ['dkim', 'dkim_active', 'dkim_pending', 'dkim_retiring', 'dkim_revoked'];

export interface PublishOptions {
  /**
   * Only the records of these purposes (a DMARC ramp's step publishes `dmarc` alone, a DKIM
   * rotation DKIM_PURPOSES), by the same rules; what earlier publishes did with records of other
   * purposes is kept.
   */
  only?: string[];
}

/** Why nothing was published (no write, no audit row). */
export class PublishRefused extends Error {}

export interface Outcome {
  purpose: string;
  type: string;
  name: string;
  action: Action['kind'] | 'no_zone' | 'failed';
  state: Publication['state'];
  detail: string | null;
}

/**
 * Publishes a domain's records (its `records` list: DKIM, return path, tracking host and whatever
 * else the domain asks for, and a DKIM rotation's pending, retiring and revoked keys) to the Cloudflare zones its organization's token may edit: creates what
 * is missing, updates what the service wrote before, leaves everything else alone (reported as a
 * conflict). One publish of a domain at a time (a transaction-scoped advisory lock, not the row's),
 * with one audit row naming the operator. Then each written record is checked through DNS.
 */
export async function publishDomain(
  deps: PublishDeps,
  organizationId: string,
  domainId: string,
  actor: string | null,
  opts: PublishOptions = {},
): Promise<Outcome[]> {
  if (!(await isInternal(deps.orm, organizationId))) throw new PublishRefused('Only an internal organization publishes DNS records.');
  const connection = await readConnection(deps.orm, organizationId);
  if (!connection) throw new PublishRefused('The organization has no Cloudflare token attached.');
  const outcomes = await deps.orm.em.fork().transactional(async (em) => {
    // One publish of a domain at a time, without locking its row: a row lock held through the
    // Cloudflare calls would stall every message accepted for the domain (its foreign key) meanwhile.
    await em
      .getConnection()
      .execute(`select pg_advisory_xact_lock(hashtext(?))`, [`dns-publish:${domainId}`], 'all', em.getTransactionContext());
    const domain = await em.findOne(Domain, { id: domainId, organizationId, deletedAt: null });
    if (!domain) throw new PublishRefused('No such domain.');
    const all = [...domain.records, ...(await rotationRecords(em, domain))];
    const records = opts.only ? all.filter((r) => opts.only!.includes(r.purpose)) : all;
    if (records.length === 0) throw new PublishRefused('The domain has no records to publish.');
    const cf = client(deps.secrets.decrypt(connection.tokenEnc), deps.cloudflare);
    let zones;
    try {
      zones = editableZones(await listZones(cf));
    } catch (err) {
      if (err instanceof CloudflareFailure) throw new PublishRefused(`Cloudflare refused the token (${err.message}).`);
      throw err;
    }
    const held = new Map<string, Promise<ZoneRecord[]>>();
    const out: Outcome[] = [];
    // In order, one at a time: two records at one name (an MX and an SPF) see each other's writes.
    for (const [i, w] of wantedRecords(records).entries()) {
      const source = records[i];
      const base = { purpose: w.purpose, type: w.type, name: w.name };
      const zone = zoneFor(w.name, zones);
      const save = async (o: Outcome, zoneId: string | null, recordId: string | null) => {
        out.push(o);
        await savePublication(em, domainId, {
          ...base,
          content: source.value,
          zoneId,
          recordId,
          state: o.state,
          detail: o.detail,
          publishedBy: actor,
        });
      };
      if (!zone) {
        await save({ ...base, action: 'no_zone', state: 'failed', detail: 'no zone the token may edit covers this name' }, null, null);
        continue;
      }
      const key = `${zone.id} ${w.name}`;
      if (!held.has(key)) held.set(key, recordsAt(cf, zone.id, w.name));
      try {
        const action = decide(w, await held.get(key)!);
        if (action.kind === 'conflict') {
          await save({ ...base, action: action.kind, state: 'conflict', detail: action.reason }, zone.id, null);
          continue;
        }
        const id =
          action.kind === 'create'
            ? await createRecord(cf, zone.id, w)
            : action.kind === 'update'
              ? await updateRecord(cf, zone.id, action.id, w)
              : action.id;
        if (action.kind === 'create' || action.kind === 'update') held.delete(key);
        await save({ ...base, action: action.kind, state: 'pending', detail: null }, zone.id, id);
      } catch (err) {
        if (!(err instanceof CloudflareFailure)) throw err;
        held.delete(key);
        await save({ ...base, action: 'failed', state: 'failed', detail: err.message }, zone.id, null);
      }
    }
    // What earlier publishes did with records no longer wanted, among the purposes this one covers.
    await forgetOtherPublications(em, domainId, out, opts.only);
    em.persist(
      operatorAudit(
        organizationId,
        'domain.dns_published',
        { type: 'domain', id: domainId },
        {
          provider: 'cloudflare',
          token_id: connection.tokenId,
          records: out.map((o) => ({ purpose: o.purpose, type: o.type, name: o.name, action: o.action })),
        },
        actor,
      ),
    );
    return out;
  });
  await checkPublications(deps, domainId);
  return outcomes;
}

/**
 * Resolves each pending publication through DNS (the resolvers domain verification uses) and
 * compares it as verification does; a match marks it verified. Returns the publications after.
 */
export async function checkPublications(deps: Pick<PublishDeps, 'orm' | 'dns'>, domainId: string): Promise<Publication[]> {
  const pending = (await listPublications(deps.orm, domainId)).filter((p) => p.state === 'pending');
  await Promise.all(
    pending.map(async (p) => {
      const record: DnsRecord = {
        purpose: p.purpose,
        type: p.type as DnsRecord['type'],
        name: p.name,
        value: p.content,
        required: false,
        observed: null,
        status: 'pending',
      };
      if (evaluate(record, await lookup(deps.dns, record)).status === 'verified') await markVerified(deps.orm, domainId, p);
    }),
  );
  return listPublications(deps.orm, domainId);
}
