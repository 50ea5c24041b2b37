import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { markInFlight, readPassAttachments, readPassEmails, type PassAttachment, type PassEmail } from '../db/sql/delivery-pass';
import type { Clock } from '../core/clock';
import type { Secrets } from '../core/secrets';
import { isNonRetryable, PermanentFailure } from './errors';
import { recordRelayRefusals } from '../db/sql/relay-refusals';
import { retryPolicy, describeFailure } from '../workflows/context';
import { RelayOutage } from './relay-outage';
import { testModeOutcome } from './outcomes';
import { DEFAULT_MAX_AGE_MS, isDue, messageOf, Outcomes, type Message, type PassRecipient, type RetryRule } from './pass-outcomes';
import { OutcomeCommit } from './outcome-commit';
import { createLiveSender, type LiveSenderDeps } from './send-live';
import { loadSenderIdentities } from './sender-identity';

export interface DeliveryDeps extends LiveSenderDeps {
  orm: Orm;
  clock: Clock;
  log: Logger;
  /** Opens DKIM private keys; domains created without keys (operator overrides) are sent unsigned. */
  secrets?: Secrets;
  /** RETRY_MAX_AGE_HOURS: how long mail an MX refuses for now is tried again (default 96 h). */
  retryMaxAgeMs?: number;
  /** How long a settled outcome waits for others to share its statement (activities/outcome-commit.ts). */
  outcomeWindowMs?: number;
  /** RETRY_BASE_SECONDS: the transport backoff's first delay, to say on a refused message when it goes again (default 30). */
  retryBaseSeconds?: number;
}

const FINAL_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained', 'failed', 'suppressed', 'canceled', 'unconfirmed']);

/** One message's end of a delivery pass: its status, and the error that kept it from finishing. */
export interface Delivered {
  id: string;
  status: string;
  error?: unknown;
}

/** The delivery code SendEmail (one id) and SendBatch (a chunk) share; built once per worker. */
export interface DeliveryPass {
  /**
   * One delivery pass over claimed messages: rows read in a few statements for all of them, the
   * live ones' recipients committed `in_flight` together before any SMTP transaction, every live
   * message handed to the relay at once (the send gate and the mailer's pool bound the
   * connections). Each outcome (recipient states, events, message status) commits as the relay
   * answers, after its hard bounces' suppressions (db/sql/suppress-address.ts), group-committed
   * with every other pass's of the process (activities/outcome-commit.ts), before its send slot is
   * free; test-mode outcomes commit together. A pass run again after a crash reads what committed
   * and hands over only the rest. A message whose pass was interrupted keeps its status (`sending`)
   * and comes back with the error to retry on. `owner`: the run whose claim this pass serves; a
   * message claimed by another run since is answered `queued` and left alone.
   */
  deliverMany(emailIds: string[], owner?: string): Promise<Delivered[]>;
  /**
   * Records messages failed for good: each one's recipients still due become `failed` with the
   * reason, in one statement for all of them. A message already final keeps its status.
   */
  failMany(items: { id: string; detail: string }[]): Promise<Delivered[]>;
}

export function createDeliveryPass(deps: DeliveryDeps): DeliveryPass {
  const { orm, clock, log, secrets } = deps;
  const retryRule: RetryRule = { maxAgeMs: deps.retryMaxAgeMs ?? DEFAULT_MAX_AGE_MS };
  const sendLive = createLiveSender(deps);
  // A group holding as many messages as the pool has connections (half the send slots) starts at
  // once: past that, a connection would wait for a slot held only by an outcome not yet written.
  const outcomes = new OutcomeCommit(orm, { windowMs: deps.outcomeWindowMs, fullAt: Math.max(1, Math.floor((deps.sendSlots ?? 16) / 2)) });
  const commit = outcomes.record.bind(outcomes);
  const outage = new RelayOutage(log, clock);
  const transport = retryPolicy('transport', deps.retryBaseSeconds ?? 30);

  /**
   * What the relay refused for now goes on each message (waiting `relay_retry`, the reply, when it
   * goes again) before the run waits out its backoff; the outage is logged once per process.
   */
  async function noteRelay(live: Delivered[]): Promise<void> {
    const refused = live.filter((r) => r.error !== undefined && !isNonRetryable(r.error));
    if (live.some((r) => r.error === undefined)) outage.accepted();
    if (refused.length === 0) return;
    const items = refused.map((r) => ({ id: r.id, reply: describeFailure(r.error) }));
    outage.refused(items.length, items[0].reply);
    const q = { at: clock.now(), baseSeconds: transport.initialIntervalSeconds, maxAttempts: transport.maxAttempts };
    await recordRelayRefusals(orm, items, q);
  }

  /** Test mode: the outcome table instead of SMTP. */
  function simulate(out: Outcomes, email: PassEmail, recipients: PassRecipient[]): void {
    for (const r of recipients) {
      const outcome = testModeOutcome(r.address);
      for (const e of outcome.events) out.event(email, e.type, r.address, { bounceType: e.bounceType ?? null });
      r.tried += 1;
      out.set(r, outcome.state);
    }
  }

  /**
   * Reads messages for a pass: each one missing or already final is answered at once; the others
   * come back open, in the order asked.
   */
  async function readOpen(emailIds: string[]): Promise<{ open: PassEmail[]; done: Delivered[] }> {
    const byId = new Map((await readPassEmails(orm, emailIds)).map((e) => [e.id, e]));
    const done: Delivered[] = [];
    const open: PassEmail[] = [];
    for (const id of emailIds) {
      const email = byId.get(id);
      if (!email) done.push({ id, status: 'failed', error: new PermanentFailure(`email ${id} does not exist`) });
      else if (FINAL_STATUSES.has(email.status)) done.push({ id, status: email.status });
      else open.push(email);
    }
    return { open, done };
  }

  /** The open messages of a pass that are `sending` (claimed); any other is answered at once. */
  async function readClaimed(emailIds: string[], owner?: string): Promise<{ active: Message[]; done: Delivered[] }> {
    const { open, done } = await readOpen(emailIds);
    const active: Message[] = [];
    for (const email of open) {
      // Claimed by another run: this pass deferred it before a crash, the outbox released it when
      // its time came and a new run holds it now. For this pass it was deferred; the new run sends.
      const taken = owner !== undefined && email.claimed_by !== null && email.claimed_by !== owner;
      if (email.status === 'sending' && taken) done.push({ id: email.id, status: 'queued' });
      else if (email.status === 'sending') active.push(messageOf(email));
      // Deferred by an earlier try of this same pass (an engine retry after the outcome committed):
      // it waits in its row for its next attempt, which is that pass's answer.
      else if (email.status === 'queued' && email.retry_reason !== null) done.push({ id: email.id, status: 'queued' });
      else
        done.push({
          id: email.id,
          status: email.status,
          error: new PermanentFailure(`email ${email.id} is ${email.status}, not claimed for delivery`),
        });
    }
    return { active, done };
  }

  /**
   * Hands the live messages of a pass to the relay, their rows' extras read in one query per kind
   * for all of them: attachments (only of messages that have some) and the sender identities. Each
   * message's outcome commits as its transactions are answered. Answers each message's end; throws
   * when an outcome could not be written (the database), after every message has ended.
   */
  async function sendAllLive(live: Message[], inFlight: Map<string, PassRecipient[]>): Promise<Delivered[]> {
    const [attachments, identities] = await Promise.all([
      readPassAttachments(
        orm,
        live.filter((m) => m.email.has_attachments).map((m) => m.email.id),
      ),
      loadSenderIdentities(orm, secrets, [...new Set(live.map((m) => m.email.domain_id))]),
    ]);
    const attachmentsOf = new Map<string, PassAttachment[]>();
    for (const a of attachments) attachmentsOf.set(a.email_id, [...(attachmentsOf.get(a.email_id) ?? []), a]);
    const unwritten: unknown[] = [];
    const results = await Promise.all(
      live.map(async (m): Promise<Delivered> => {
        const dropped = new Set(m.recipients.filter((r) => r.state === 'suppressed').map((r) => r.address));
        const extras = { attachments: attachmentsOf.get(m.email.id) ?? [], identity: identities.get(m.email.domain_id) ?? {} };
        const out = new Outcomes(retryRule);
        let status = m.email.status;
        const record = async (last: boolean, failure: Error | null) => {
          if (last && failure === null) status = out.finish(m, clock.now());
          try {
            await out.write(orm, clock.now(), commit);
          } catch (err) {
            unwritten.push(err);
            throw err;
          }
        };
        try {
          await sendLive(out, m.email, inFlight.get(m.email.id) ?? [], dropped, extras, record);
          return { id: m.email.id, status };
        } catch (error) {
          return { id: m.email.id, status: m.email.status, error };
        }
      }),
    );
    // The relay may have taken a message whose outcome did not commit: the whole pass is tried
    // again (the engine's retry), and only what is not recorded goes again.
    if (unwritten.length > 0) throw unwritten[0];
    return results;
  }

  return {
    async deliverMany(emailIds, owner) {
      const { active, done } = await readClaimed(emailIds, owner);
      if (active.length === 0) return done;
      const due = (m: Message) => m.recipients.filter(isDue);
      const isLive = (m: Message) => m.email.mode === 'live' && due(m).length > 0;
      // Test mode (and live messages with no one left to send to): settled here, written together.
      const settled = new Outcomes(retryRule);
      const others = active.filter((m) => !isLive(m));
      for (const m of others) if (m.email.mode === 'test') simulate(settled, m.email, due(m));
      const results: Delivered[] = others.map((m) => ({ id: m.email.id, status: settled.finish(m, clock.now()) }));
      const written = settled.write(orm, clock.now(), commit);
      written.catch(() => undefined); // awaited below, after the live messages
      const live = active.filter(isLive);
      if (live.length > 0) {
        // Commit "in flight" before talking SMTP: a retry then knows these may have been handed over.
        const inFlight = new Map(live.map((m) => [m.email.id, due(m)]));
        await markInFlight(
          orm,
          [...inFlight.values()].flat().map((r) => r.id),
          clock.now(),
        );
        for (const rs of inFlight.values()) for (const r of rs) r.state = 'in_flight';
        const sent = await sendAllLive(live, inFlight);
        await noteRelay(sent);
        results.push(...sent);
      }
      await written;
      const modeOf = new Map(active.map((m) => [m.email.id, m.email.mode]));
      for (const r of results) {
        if (r.error === undefined && r.status === 'queued') log.info({ emailId: r.id, mode: modeOf.get(r.id) }, 'delivery deferred');
        else if (r.error === undefined) log.info({ emailId: r.id, status: r.status, mode: modeOf.get(r.id) }, 'delivery finished');
      }
      return [...done, ...results];
    },

    async failMany(items) {
      const detailOf = new Map(items.map((i) => [i.id, i.detail]));
      const read = await readOpen(items.map((i) => i.id));
      // Only a claimed message is failed: one back in `queued` (waiting for a retry, or never
      // claimed) is no run's to fail.
      const open = read.open.filter((e) => e.status === 'sending');
      const done = [...read.done, ...read.open.filter((e) => e.status !== 'sending').map((e) => ({ id: e.id, status: e.status }))];
      const out = new Outcomes();
      const failed = open.map((email): Delivered => {
        const m = messageOf(email);
        for (const r of m.recipients.filter(isDue)) {
          out.set(r, 'failed');
          out.event(email, 'failed', r.address, { detail: detailOf.get(email.id) });
        }
        return { id: email.id, status: out.finish(m, clock.now()) };
      });
      await out.write(orm, clock.now());
      for (const r of failed) log.warn({ emailId: r.id, detail: detailOf.get(r.id), status: r.status }, 'delivery failed');
      return [...done, ...failed];
    },
  };
}
