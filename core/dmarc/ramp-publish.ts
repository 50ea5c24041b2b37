import type { Logger } from 'pino';
import { Domain } from '../../db/entities';
import { isInternal, listPublications, readConnection, savePublication } from '../../db/sql/cloudflare';
import { publishDomain, type PublishDeps } from '../dns-publish/publish';
import type { PublishDmarcRecordResult } from '../../workflows/dmarc-ramp';

export type RampPublishDeps = Omit<PublishDeps, 'secrets'> & { secrets: PublishDeps['secrets'] | undefined; log: Logger };

/**
 * Publishes the domain's `_dmarc` record (the ramp's current step) to its Cloudflare zone when the
 * zone is connected: an internal organization with a token attached. The same rules as the
 * console's publish (core/dns-publish/rules.ts): created or updated only when the record at
 * `_dmarc` is the service's own, never a second `v=DMARC1` record, never over someone else's.
 * Never throws: a failure is logged and kept as the record's publication (shown on the domain's
 * page), and the ramp goes on; the operator can publish by hand.
 */
export async function publishDmarcRecord(deps: RampPublishDeps, domainId: string, actor: string | null): Promise<PublishDmarcRecordResult> {
  const domain = await deps.orm.em.fork().findOne(Domain, { id: domainId, deletedAt: null });
  const record = domain?.records.find((r) => r.purpose === 'dmarc');
  if (!domain || !record) return { state: 'no_record' };
  const org = domain.organizationId;
  if (!deps.secrets || !(await isInternal(deps.orm, org)) || !(await readConnection(deps.orm, org))) return { state: 'not_connected' };
  try {
    await publishDomain({ ...deps, secrets: deps.secrets }, org, domainId, actor, { only: ['dmarc'] });
    const p = (await listPublications(deps.orm, domainId)).find((x) => x.purpose === 'dmarc' && x.content === record.value);
    const state = p?.state ?? 'failed';
    if (state === 'conflict' || state === 'failed') {
      deps.log.warn(
        { errorId: `dmarc_publish_${state}`, domainId, detail: p?.detail },
        'DMARC ramp: the step was not published to Cloudflare',
      );
    }
    return { state };
  } catch (err) {
    deps.log.error(
      { err, errorId: 'dmarc_publish_failed', domainId },
      'DMARC ramp: publishing the step to Cloudflare failed; the ramp goes on',
    );
    const detail = `publishing failed (error id dmarc_publish_failed): ${err instanceof Error ? err.message : String(err)}`.slice(0, 500);
    await deps.orm.em
      .fork()
      .transactional((em) =>
        savePublication(em, domainId, {
          purpose: 'dmarc',
          type: record.type,
          name: record.name.toLowerCase(),
          content: record.value,
          zoneId: null,
          recordId: null,
          state: 'failed',
          detail,
          publishedBy: actor,
        }),
      )
      .catch((e: unknown) => deps.log.error({ err: e, errorId: 'dmarc_publish_failed', domainId }, 'could not record the failure'));
    return { state: 'failed' };
  }
}
