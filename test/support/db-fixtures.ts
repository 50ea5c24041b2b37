import { randomUUID } from 'node:crypto';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { issueToken } from '../../core/tokens';
import { newDatabase } from './pg';

/**
 * Fixtures for the statement tests of test/db/: an ORM on a fresh migrated database, and
 * functions that insert minimal rows with plain SQL (no core/ code, so a failing statement test
 * names db/sql/, not the layer above it).
 *
 * Every `insertX` takes the row's owner ids, then `over`: columns (snake_case, as in the table)
 * that replace the defaults; json/jsonb columns take JS values (serialized here), array columns JS
 * arrays. Each answers the inserted row as PostgreSQL returns it (`returning *`, snake_case).
 * Timestamps in rows read on the ORM's connections come back as strings (MikroORM's type parsers):
 * compare them with `ms`.
 * Stable API: test/db/ files of other engineers import it; add, do not change.
 */

export type Row = Record<string, any>;

/** An ORM on a fresh database of the shared test PostgreSQL, every migration applied. Close it in `after`. */
export async function openTestDb(prefix = 'svc_db', poolSize = 10): Promise<Orm> {
  const orm = await openOrm(await newDatabase(prefix), poolSize);
  await migrate(orm);
  return orm;
}

interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
interface KnexClient {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(connection: PgClient): Promise<void> | void;
}

/** Runs one statement ($1, $2… placeholders, bound by node-postgres) on a connection of the ORM's pool, autocommitted. */
export async function sql<T = Row>(orm: Orm, text: string, values: unknown[] = []): Promise<T[]> {
  const client = (orm.em.getConnection().getKnex() as unknown as { client: KnexClient }).client;
  const connection = await client.acquireConnection();
  try {
    return (await connection.query(text, values)).rows as T[];
  } finally {
    await client.releaseConnection(connection);
  }
}

/** A transaction held open on a connection of its own, for a test to interleave with a statement under test. */
export interface OpenTransaction {
  query<T = Row>(text: string, values?: unknown[]): Promise<T[]>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** Begins a transaction on a connection taken from the ORM's pool (given back at commit or rollback). */
export async function openTransaction(orm: Orm): Promise<OpenTransaction> {
  const client = (orm.em.getConnection().getKnex() as unknown as { client: KnexClient }).client;
  const connection = await client.acquireConnection();
  await connection.query('begin');
  let open = true;
  const end = async (verb: string) => {
    if (!open) return;
    open = false;
    try {
      await connection.query(verb);
    } finally {
      await client.releaseConnection(connection);
    }
  };
  return {
    query: async <T = Row>(text: string, values: unknown[] = []) => (await connection.query(text, values)).rows as T[],
    commit: () => end('commit'),
    rollback: () => end('rollback'),
  };
}

/**
 * Resolves once `n` sessions of this database wait for a lock (a statement under test blocked
 * behind an OpenTransaction): the moment to commit and let it go on. Polls pg_stat_activity.
 */
export async function lockWaiters(orm: Orm, n: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await sql<{ n: number }>(
      orm,
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
    );
    if (row.n >= n) return;
    if (Date.now() > deadline) throw new Error(`db-fixtures: ${row.n} of ${n} sessions waiting for a lock after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const columnTypes = new WeakMap<Orm, Promise<Map<string, string>>>();

/** `table.column` → data_type, read once per ORM. */
function typesOf(orm: Orm): Promise<Map<string, string>> {
  let types = columnTypes.get(orm);
  if (!types) {
    types = sql<{ k: string; t: string }>(
      orm,
      `select table_name || '.' || column_name as k, data_type as t from information_schema.columns where table_schema = 'public'`,
    ).then((rows) => new Map(rows.map((r) => [r.k, r.t])));
    columnTypes.set(orm, types);
  }
  return types;
}

/** Inserts one row (columns as given; json/jsonb values serialized) and answers it. */
export async function insertRow<T = Row>(orm: Orm, table: string, values: Record<string, unknown>): Promise<T> {
  const types = await typesOf(orm);
  const columns = Object.keys(values).filter((c) => values[c] !== undefined);
  const params = columns.map((c) => {
    const type = types.get(`${table}.${c}`);
    if (type === undefined) throw new Error(`db-fixtures: no column ${table}.${c}`);
    const v = values[c];
    return (type === 'jsonb' || type === 'json') && v !== null ? JSON.stringify(v) : v;
  });
  const [row] = await sql<T>(
    orm,
    `insert into ${table} (${columns.join(', ')}) values (${columns.map((_, i) => `$${i + 1}`).join(', ')}) returning *`,
    params,
  );
  return row;
}

/** A timestamp as read from a row (string or Date) in epoch milliseconds; null stays null. */
export function ms(v: Date | string | null | undefined): number | null {
  return v === null || v === undefined ? null : new Date(v).getTime();
}

let serial = 0;
/** A short unique suffix for names, slugs and addresses. */
export function unique(prefix = 'x'): string {
  return `${prefix}${process.pid}n${++serial}`;
}

export async function insertOrganization(orm: Orm, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'organizations', { id: uuidv7(), name: unique('Org '), plan: 'free', ...over });
}

/** A key with its current token: the row, plus `token` (clear) and `token_hash`. */
/** A key row with its token (shown once) and the token's hash. */
export type KeyRow = Row & { token: string; token_hash: string };

export async function insertKey(orm: Orm, organizationId: string, over: Row = {}): Promise<KeyRow> {
  const mode = (over.mode as 'live' | 'test' | undefined) ?? 'live';
  const key = await insertRow(orm, 'api_keys', {
    id: uuidv7(),
    organization_id: organizationId,
    name: unique('key'),
    permission: 'full',
    mode,
    created_at: new Date(),
    ...over,
  });
  const { token, tokenHash, tokenPrefix } = issueToken(mode);
  await insertToken(orm, key.id, { token_hash: tokenHash, token_prefix: tokenPrefix });
  return { ...key, token, token_hash: tokenHash };
}

/** A token row of a key (default: a current one, `expires_at` null); answers it with `token` (clear). */
export async function insertToken(orm: Orm, apiKeyId: string, over: Row = {}): Promise<Row & { token: string }> {
  const { token, tokenHash, tokenPrefix } = issueToken('live');
  const row = await insertRow(orm, 'api_key_tokens', {
    token_hash: tokenHash,
    api_key_id: apiKeyId,
    token_prefix: tokenPrefix,
    created_at: new Date(),
    expires_at: null,
    ...over,
  });
  return { ...row, token };
}

/** A verified transactional domain, without DKIM identity, no warm-up. */
export async function insertDomain(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'domains', {
    id: uuidv7(),
    organization_id: organizationId,
    name: `${unique('d')}.example.test`,
    stream: 'transactional',
    status: 'verified',
    ...over,
  });
}

/** A `subscribed` contact with a unique lower-case address. */
export async function insertContact(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'contacts', {
    id: uuidv7(),
    organization_id: organizationId,
    email: `${unique('c')}@example.com`,
    status: 'subscribed',
    properties: {},
    created_at: now,
    updated_at: now,
    ...over,
  });
}

/** A topic, opt-out by default (`default_opt_in` false). */
export async function insertTopic(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  const slug = (over.slug as string | undefined) ?? unique('topic');
  return insertRow(orm, 'topics', {
    id: uuidv7(),
    organization_id: organizationId,
    slug,
    name: slug,
    default_opt_in: false,
    created_at: new Date(),
    ...over,
  });
}

export async function insertSubscription(
  orm: Orm,
  contactId: string,
  topicId: string,
  state: 'subscribed' | 'unsubscribed',
  over: Row = {},
): Promise<Row> {
  return insertRow(orm, 'subscriptions', {
    contact_id: contactId,
    topic_id: topicId,
    state,
    source: 'api',
    changed_at: new Date(),
    ...over,
  });
}

export async function insertSuppression(orm: Orm, organizationId: string, email: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'suppressions', { id: uuidv7(), organization_id: organizationId, email, reason: 'manual', ...over });
}

export interface EmailOwner {
  organizationId: string;
  apiKeyId: string;
  domainId: string;
}

/** An organization with a live `full` key and a verified transactional domain: what a message needs. */
export async function insertSender(
  orm: Orm,
  over: { organization?: Row; key?: Row; domain?: Row } = {},
): Promise<{
  organization: Row;
  key: Row & { token: string; token_hash: string };
  domain: Row;
  owner: EmailOwner;
}> {
  const organization = await insertOrganization(orm, over.organization);
  const key = await insertKey(orm, organization.id, over.key);
  const domain = await insertDomain(orm, organization.id, over.domain);
  return { organization, key, domain, owner: { organizationId: organization.id, apiKeyId: key.id, domainId: domain.id } };
}

/**
 * A `queued` live transactional message in the outbox (`enqueued_at` null), to one address; no
 * recipient rows (insertRecipient adds them).
 */
export async function insertEmail(orm: Orm, owner: EmailOwner, over: Row = {}): Promise<Row> {
  const now = new Date();
  const id = (over.id as string | undefined) ?? uuidv7();
  return insertRow(orm, 'emails', {
    id,
    organization_id: owner.organizationId,
    api_key_id: owner.apiKeyId,
    domain_id: owner.domainId,
    from_address: 'app@example.test',
    to_addresses: ['to@example.com'],
    subject: 'Subject',
    text: 'Body',
    mode: 'live',
    stream: 'transactional',
    status: 'queued',
    message_id: `<${id}@example.test>`,
    created_at: now,
    updated_at: now,
    ...over,
  });
}

export async function insertRecipient(orm: Orm, emailId: string, address: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'recipients', { id: uuidv7(), email_id: emailId, address, field: 'to', state: 'pending', ...over });
}

export async function insertEmailEvent(
  orm: Orm,
  /** A message row (`id`, `organization_id`). */
  email: Row,
  type: string,
  recipient: string,
  over: Row = {},
): Promise<Row> {
  return insertRow(orm, 'email_events', { email_id: email.id, organization_id: email.organization_id, type, recipient, ...over });
}

export async function insertSegment(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'segments', {
    id: uuidv7(),
    organization_id: organizationId,
    name: unique('segment'),
    filter: {},
    created_at: new Date(),
    ...over,
  });
}

/** A `queued` broadcast not yet started (`enqueued_at` null); its segment id is made up unless given. */
export async function insertBroadcast(orm: Orm, owner: EmailOwner, over: Row = {}): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'broadcasts', {
    id: uuidv7(),
    organization_id: owner.organizationId,
    api_key_id: owner.apiKeyId,
    segment_id: randomUUID(),
    from_address: 'news@example.test',
    domain_id: owner.domainId,
    kind: 'broadcast',
    subject: 'News',
    text: 'Hello',
    status: 'queued',
    created_at: now,
    updated_at: now,
    ...over,
  });
}

export async function insertBroadcastRecipient(
  orm: Orm,
  broadcastId: string,
  position: number,
  /** A contact row (`id`, `email`). */
  contact: Row,
): Promise<Row> {
  return insertRow(orm, 'broadcast_recipients', { broadcast_id: broadcastId, position, contact_id: contact.id, email: contact.email });
}

/** A template with a draft (revision 0) and no published version. */
export async function insertTemplate(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'templates', {
    id: uuidv7(),
    organization_id: organizationId,
    name: unique('template'),
    subject: 'Hello {{name}}',
    html: '<p>Hi {{name}}</p>',
    text: 'Hi {{name}}',
    variables: [{ key: 'name', type: 'string' }],
    created_at: now,
    updated_at: now,
    ...over,
  });
}

/**
 * An enabled automation (since an hour ago) at version 1, with that version's row (`definition`
 * from `over.definition`, default one `send` step). Trigger: `event` unless `over.trigger_type`.
 */
export async function insertAutomation(orm: Orm, organizationId: string, apiKeyId: string, over: Row = {}): Promise<Row> {
  const now = new Date();
  const { definition, ...columns } = over;
  const automation = await insertRow(orm, 'automations', {
    id: uuidv7(),
    organization_id: organizationId,
    name: unique('automation'),
    enabled: true,
    version: 1,
    trigger_type: 'event',
    trigger_event: columns.trigger_type === undefined || columns.trigger_type === 'event' ? 'signed_up' : null,
    api_key_id: apiKeyId,
    enabled_since: new Date(now.getTime() - 3_600_000),
    created_at: now,
    updated_at: now,
    ...columns,
  });
  await insertRow(orm, 'automation_versions', {
    automation_id: automation.id,
    version: automation.version,
    definition: definition ?? { steps: [{ type: 'send', template: 'welcome' }] },
    api_key_id: apiKeyId,
    created_at: now,
  });
  return automation;
}

/** A `running` run of the automation's current version for a contact, started (`started_at` set). */
export async function insertAutomationRun(
  orm: Orm,
  /** An automation row (`id`, `organization_id`, `version`). */
  automation: Row,
  /** A contact row (`id`, `email`). */
  contact: Row,
  over: Row = {},
): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'automation_runs', {
    id: uuidv7(),
    organization_id: automation.organization_id,
    automation_id: automation.id,
    version: automation.version,
    contact_id: contact.id,
    email: contact.email,
    dedupe_key: unique('run'),
    trigger: { type: 'event', event: 'signed_up' },
    data: {},
    status: 'running',
    history: [],
    started_at: now,
    created_at: now,
    updated_at: now,
    ...over,
  });
}

export async function insertAutomationTrigger(orm: Orm, organizationId: string, contactId: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'automation_triggers', {
    organization_id: organizationId,
    type: 'contact.created',
    contact_id: contactId,
    ...over,
  });
}

/** An enabled endpoint for every event type. Note: with one, message and contact writes of its organization fan out webhook deliveries (triggers). */
export async function insertWebhookEndpoint(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'webhook_endpoints', {
    id: uuidv7(),
    organization_id: organizationId,
    url: `https://${unique('hook')}.example.test/hook`,
    secret_enc: 'not-a-real-secret',
    created_at: now,
    updated_at: now,
    ...over,
  });
}

export async function insertWebhookEvent(orm: Orm, organizationId: string, over: Row = {}): Promise<Row> {
  return insertRow(orm, 'webhook_events', {
    organization_id: organizationId,
    type: 'email.sent',
    payload: { type: 'email.sent' },
    created_at: new Date(),
    ...over,
  });
}

/** A pending delivery of a fresh event to the endpoint, not yet claimed (`enqueued_at` null). */
/** `endpoint`: an endpoint row (`id`, `organization_id`). */
export async function insertWebhookDelivery(orm: Orm, endpoint: Row, over: Row = {}): Promise<Row> {
  const eventId = over.event_id ?? (await insertWebhookEvent(orm, endpoint.organization_id)).id;
  return insertRow(orm, 'webhook_deliveries', {
    organization_id: endpoint.organization_id,
    endpoint_id: endpoint.id,
    event_id: eventId,
    event_type: 'email.sent',
    ...over,
  });
}

export async function insertWorker(orm: Orm, id: string, over: Row = {}): Promise<Row> {
  const now = new Date();
  return insertRow(orm, 'workers', { id, host: 'host-a', pid: 1000, started_at: now, heartbeat_at: now, ...over });
}

/** Calls `fn` n times at once (each call takes its own pooled connection) and answers every result. */
export function concurrently<T>(n: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => fn(i)));
}
