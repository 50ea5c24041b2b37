/**
 * The organization the automations phase (bench/automations.ts) and the Temporal phase's automation
 * runs (bench/temporal-runs.ts) post events to, their automations, and the counts of their runs.
 */
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';

export interface AutomationsOrg {
  organizationId: string;
  /** SEND keys (live) at the highest cap, used in turn. */
  tokens: string[];
  /** An ADMIN-key request; throws on anything but 2xx. */
  call: (method: 'GET' | 'POST', path: string, body?: unknown) => Promise<any>;
}

/**
 * An organization with both event quotas lifted (the defaults refuse after 1,000 new contacts and
 * 5,000 runs a day), the verified domain bench.test, an ADMIN key and `sendKeys` live SEND keys.
 */
export async function automationsOrg(service: Service, name: string, sendKeys: number): Promise<AutomationsOrg> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, name);
  await orm.em
    .fork()
    .getConnection()
    .execute('update organizations set event_contact_quota = 100000000, event_run_quota = 100000000 where id = ?', [org.id]);
  await createDomain(orm, org.id, 'bench.test', { verified: true, warmup: false });
  const admin = (await createKey(orm, org.id, { name: 'bench-admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const tokens: string[] = [];
  for (let i = 0; i < sendKeys; i++)
    tokens.push((await createKey(orm, org.id, { name: `bench-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token);
  const call = async (method: 'GET' | 'POST', p: string, body?: unknown) => {
    const res = await fetch(`${service.url}/api/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  return { organizationId: org.id, tokens, call };
}

/** An enabled automation triggered by `event`; its id. */
export async function createAutomation(org: AutomationsOrg, name: string, event: string, steps: unknown[]): Promise<string> {
  return (await org.call('POST', '/automations', { name, trigger: { event }, steps })).id;
}

/** Runs of an automation: all, not started yet (the outbox), and started with a delay entry in their history. */
export async function runCounts(service: Service, automationId: string): Promise<{ runs: number; unstarted: number; delaying: number }> {
  const [row] = await service.db.orm.em
    .fork()
    .getConnection()
    .execute<{ runs: number; unstarted: number; delaying: number }[]>(
      `select count(*)::int as runs,
              (count(*) filter (where started_at is null and coalesce(resume_at, created_at) <= now()))::int as unstarted,
              (count(*) filter (where status = 'running' and history @> '[{"type": "delay"}]'))::int as delaying
         from automation_runs where automation_id = ?`,
      [automationId],
    );
  return row;
}
