import type { Domain } from '../../db/entities';
import type { WarmupView } from '../../core/limits/usage';

export function presentDomain(d: Domain, warmup: WarmupView) {
  return {
    object: 'domain',
    id: d.id,
    name: d.name,
    status: d.status,
    stream: d.stream,
    dns_provider: d.dnsProvider,
    dkim_selector: d.dkimSelector,
    return_path: d.returnPathHost,
    tracking_host: d.trackingHost,
    warmup,
    records: d.records.map((r) => ({
      purpose: r.purpose,
      type: r.type,
      name: r.name,
      value: r.value,
      required: r.required,
      status: r.status,
      observed: r.observed,
    })),
    created_at: d.createdAt.toISOString(),
    last_checked_at: d.lastCheckedAt?.toISOString() ?? null,
    verified_at: d.verifiedAt?.toISOString() ?? null,
  };
}
