import { createHash } from 'node:crypto';
import type { EmailSource } from '../../db/entities';
import { findIdempotencyReplays } from '../../db/sql/idempotency-replays';
import { recipientAddresses } from '../../db/sql/recipient-addresses';
import { invalidKey } from '../auth';
import { ServiceError, validationError } from '../errors';
import { isPlainObject } from '../validate';
import type { ResolveScope, TemplateResolver } from '../templates/resolver';
import type { UndeclaredData } from '../templates/variables';
import { acceptEmails, TEMPLATE_CHANGED, type AcceptDeps, type Accepted, type StoreCredentials } from './accept';
import { prepareEmail, type PreparedEmail } from './prepare';
import { renderTemplatedEmails } from './render-templates';
import { MAX_BATCH } from './schema';

/**
 * The one way mail enters the service. POST /emails, POST /emails/batch, the SMTP relay, a
 * broadcast's fan-out and an automation's send step all hand their messages to `submit`, which
 * runs the same steps for each: prepare (the body's rules), render (its template), replay (an
 * idempotency key already used), store (core/emails/accept.ts: authenticate, charge, check and
 * store in one statement) and refund (what a reservation did not use). A transport only maps its
 * input to a Submission and each outcome to its own answer.
 */

export interface SubmitDeps extends AcceptDeps {
  templates: TemplateResolver;
}

/** What a submission carries. */
export type SendItems =
  /** One send body (POST /emails, the relay, an automation step). */
  | {
      one: unknown;
      /** The Idempotency-Key header (or the key an automation step derives): wins over the body's `idempotency_key`. */
      idempotencyKey?: string;
      /** The SMTP envelope's recipients: only they receive (see PrepareOptions.envelope). */
      envelope?: ReadonlySet<string>;
    }
  /** A batch request's body, refused as a whole unless it is an array of 1 to MAX_BATCH bodies without attachments. */
  | { batch: unknown }
  /** Messages a broadcast built from its frozen audience: already checked, each personalised. */
  | { prepared: PreparedEmail[] };

/** How the request pays its key's rate window. */
export type Payment =
  /** The store statement charges one for the request (single sends). */
  | 'request'
  /**
   * The request reserved MAX_BATCH before its body was read (a batch): it costs one per message, at
   * least one, which `reserved` learns as soon as the body's length is known; the reservation's
   * owner gives back the rest whatever the answer.
   */
  | { reserved: (cost: number) => void }
  /** Paid already: a broadcast's or an automation's key, or the next part of a relayed message. */
  | 'prepaid';

export interface Submission {
  /** Who sends: a request's token (the API, the relay), or the key that created a broadcast or an automation. */
  credentials: StoreCredentials;
  /** The sender's organization, when known before the store statement (the request was authenticated already). */
  organizationId?: string;
  /**
   * For a request authenticated by its store statement: authenticates and charges it, answering its
   * organization. Called when something is refused before that statement would run, so a bad key
   * still answers 401 (or 429) ahead of any complaint about the body.
   */
  authenticate?: () => Promise<string>;
  items: SendItems;
  payment: Payment;
  source: EmailSource;
  /** Template data the template does not declare: refused (an API caller's mistake) or ignored (a contact's fields). */
  undeclared?: UndeclaredData;
  /**
   * A replay whose stored recipients differ is the next part of a split delivery, not a retry (an
   * MTA relays 50 recipients per transaction, or resends those refused with 452): that part is its
   * own message, keyed by its recipients too, so a retry of the part is a replay.
   */
  partsByRecipients?: boolean;
}

/** One outcome per item, in order: stored (or replayed), or the item's own refusal. */
export type Outcome = Accepted | ServiceError;

/**
 * Runs a submission. Throws what refuses the request as a whole (401, 429, a malformed batch);
 * answers one outcome per item otherwise.
 */
export async function submit(deps: SubmitDeps, s: Submission): Promise<Outcome[]> {
  let items: (PreparedEmail | ServiceError)[];
  if ('prepared' in s.items) items = s.items.prepared;
  else if ('batch' in s.items) {
    const bodies = batchBodies(s.items.batch, typeof s.payment === 'object' ? s.payment.reserved : () => undefined);
    items = prepareAll(bodies, { inBatch: true });
  } else items = prepareAll([s.items.one], { inBatch: false, headerIdempotencyKey: s.items.idempotencyKey, envelope: s.items.envelope });
  return renderAndStore(deps, s, items);
}

/** A batch body's items; `cost` learns what it costs (one per item, at least one) before it may be refused. */
function batchBodies(body: unknown, cost: (n: number) => void): unknown[] {
  if (!Array.isArray(body)) throw validationError('batch body must be a JSON array of emails');
  cost(Math.max(1, Math.min(body.length, MAX_BATCH)));
  if (body.length < 1 || body.length > MAX_BATCH) throw validationError(`a batch holds 1 to ${MAX_BATCH} emails, got ${body.length}`);
  // Spec: a batch with attachments is refused as a whole, and nothing of it is stored.
  const withAttachments = body.findIndex((item) => isPlainObject(item) && Object.hasOwn(item, 'attachments'));
  if (withAttachments >= 0) {
    throw new ServiceError(
      'attachments_not_in_batch',
      'attachments are not accepted in batch requests; send such messages with POST /emails',
      [{ field: `[${withAttachments}].attachments`, message: 'not accepted in a batch' }],
    );
  }
  return body;
}

function prepareAll(
  bodies: unknown[],
  opts: { inBatch: boolean; headerIdempotencyKey?: string; envelope?: ReadonlySet<string> },
): (PreparedEmail | ServiceError)[] {
  const now = new Date();
  return bodies.map((body) => {
    try {
      return prepareEmail(body, { ...opts, now });
    } catch (err) {
      if (err instanceof ServiceError) return err;
      throw err;
    }
  });
}

/** Renders the templated items, answers replays of those refused by their template, and stores the rest. */
async function renderAndStore(deps: SubmitDeps, s: Submission, items: (PreparedEmail | ServiceError)[]): Promise<Outcome[]> {
  const valid = items.filter((p): p is PreparedEmail => !(p instanceof ServiceError));
  // Rendering needs the organization; a request not yet authenticated names it by its token.
  const scope: ResolveScope = s.organizationId !== undefined ? { organizationId: s.organizationId } : resolveScopeOf(s.credentials);
  const rendered =
    (await renderTemplatedEmails(deps.templates, scope, valid, { undeclared: s.undeclared })) ?? valid.map(() => invalidKey());
  const outcomes: (Outcome | PreparedEmail)[] = new Array(items.length);
  let r = 0;
  items.forEach((item, i) => (outcomes[i] = item instanceof ServiceError ? item : rendered[r++]));

  const refusedEarly = outcomes.some((o) => o instanceof ServiceError);
  if (refusedEarly) {
    // Refused before the store statement, which would have authenticated the request.
    const organizationId = s.organizationId ?? (s.authenticate ? await s.authenticate() : undefined);
    if (organizationId !== undefined) {
      const keys = items.map((item, i) => ({
        idempotencyKey: item instanceof ServiceError ? null : item.idempotencyKey,
        result: outcomes[i],
      }));
      for (const [i, replay] of await replaysOfRefusedRenders(deps, organizationId, keys)) outcomes[i] = replay;
    }
  }

  const ready = outcomes.flatMap((o, i) => (o instanceof ServiceError || 'replayed' in o ? [] : [i]));
  if (ready.length === 0) return outcomes as Outcome[];
  const toStore = ready.map((i) => outcomes[i] as PreparedEmail);
  const stored = await acceptRendered(deps, s.credentials, scope, toStore, {
    cost: s.payment === 'request' ? 1 : 0,
    prepaid: s.payment !== 'request',
    source: s.source,
    undeclared: s.undeclared,
  });
  if (s.partsByRecipients) await storeSplitParts(deps, s, toStore, stored);
  ready.forEach((i, n) => (outcomes[i] = stored[n]));
  return outcomes as Outcome[];
}

const resolveScopeOf = (c: StoreCredentials): ResolveScope => {
  if ('tokenHash' in c) return { tokenHash: c.tokenHash };
  throw new Error('a submission by key id names its organization');
};

/** See Submission.partsByRecipients: replaces, in `results`, such a replay by the part stored. */
async function storeSplitParts(deps: SubmitDeps, s: Submission, items: PreparedEmail[], results: Outcome[]): Promise<void> {
  const organizationId = s.organizationId;
  if (organizationId === undefined) throw new Error('a submission split by recipients names its organization');
  for (const [n, item] of items.entries()) {
    const result = results[n];
    if (result instanceof ServiceError || !result.replayed || item.idempotencyKey === null) continue;
    const stored = new Set(await recipientAddresses(deps.orm, result.id, organizationId));
    const wanted = item.recipients.map((r) => r.address);
    if (stored.size === wanted.length && wanted.every((a) => stored.has(a))) continue;
    const digest = createHash('sha256')
      .update([...wanted].sort().join('\n'))
      .digest('hex')
      .slice(0, 32);
    const part = { ...item, idempotencyKey: `${item.idempotencyKey}:rcpt:${digest}` };
    [results[n]] = await acceptRendered(deps, s.credentials, { organizationId }, [part], { cost: 0, prepaid: true, source: s.source });
  }
}

const TEMPLATE_CODES = new Set(['template_not_found', 'template_variables']);

/**
 * Idempotency before the template: a retry of a send that was stored is a replay even when its
 * template has since changed or gone (what the first attempt rendered is what is sent). Answers,
 * for each item refused by its template that carries an idempotency key its organization already
 * used, the stored message (and wakes the dispatcher for one never queued).
 */
async function replaysOfRefusedRenders(
  deps: Pick<AcceptDeps, 'orm' | 'dispatch'>,
  organizationId: string,
  items: { idempotencyKey: string | null; result: unknown }[],
): Promise<Map<number, Accepted>> {
  const keys = new Map<string, number[]>();
  items.forEach((item, i) => {
    if (item.idempotencyKey === null || !(item.result instanceof ServiceError) || !TEMPLATE_CODES.has(item.result.code)) return;
    keys.set(item.idempotencyKey, [...(keys.get(item.idempotencyKey) ?? []), i]);
  });
  const out = new Map<number, Accepted>();
  if (keys.size === 0) return out;
  for (const prior of await findIdempotencyReplays(deps.orm, organizationId, [...keys.keys()])) {
    for (const i of keys.get(prior.idempotency_key) ?? []) out.set(i, { id: prior.id, suppressed: [], replayed: true });
    if (prior.enqueued_at === null) deps.dispatch();
  }
  return out;
}

/** Rounds of rendering again before a message whose template keeps changing is refused. */
const RENDER_ROUNDS = 3;

/**
 * Stores rendered sends (acceptEmails). A message whose template was deleted or published anew
 * between its render and the store statement is rendered again from a fresh lookup and stored
 * again, already paid for: what is stored always comes from the version PostgreSQL saw.
 */
async function acceptRendered(
  deps: SubmitDeps,
  credentials: StoreCredentials,
  scope: ResolveScope,
  items: PreparedEmail[],
  opts: { cost: number; prepaid: boolean; source: EmailSource; undeclared?: UndeclaredData },
): Promise<Outcome[]> {
  const results = await acceptEmails(deps, credentials, items, opts);
  const current = [...items];
  for (let round = 1; ; round++) {
    const stale = results.flatMap((r, i) => (r === TEMPLATE_CHANGED ? [i] : []));
    if (stale.length === 0) return results as Outcome[];
    if (round > RENDER_ROUNDS) {
      const err = new ServiceError('template_not_found', 'the template changed repeatedly while this message was accepted; send it again');
      for (const i of stale) results[i] = err;
      continue;
    }
    const again = await renderTemplatedEmails(
      deps.templates,
      scope,
      stale.map((i) => current[i]),
      { fresh: true, undeclared: opts.undeclared },
    );
    const ready: number[] = [];
    stale.forEach((i, n) => {
      const r = again === null ? invalidKey() : again[n]; // null: the key was revoked meanwhile
      if (r instanceof ServiceError) results[i] = r;
      else {
        current[i] = r;
        ready.push(i);
      }
    });
    if (ready.length) {
      // Paid for by the first statement, which admitted the request.
      const accepted = await acceptEmails(
        deps,
        credentials,
        ready.map((i) => current[i]),
        { cost: 0, prepaid: true, source: opts.source },
      );
      ready.forEach((i, n) => (results[i] = accepted[n]));
    }
  }
}
