import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

export const BROADCAST_WORKFLOW = 'BroadcastFanOut';

/** One fan-out per broadcast: starting it again (the dispatcher after a crash) is a no-op. */
export const broadcastWorkflowId = (broadcastId: string) => `broadcast:${broadcastId}`;

/** Sent by the API's cancel: a run waiting for its scheduled time wakes and ends (the freeze sees `canceled`). */
export const BROADCAST_CANCEL_SIGNAL = 'cancel';

/** Recipients accepted per step: each page is one durable step and one pass through the accept path. */
export const BROADCAST_PAGE_SIZE = 1000;

export interface BroadcastInput {
  broadcastId: string;
  /** Not before this (epoch ms); null: at once. */
  scheduledAtMs: number | null;
}

// The activity contract: activities/broadcast.ts implements it.
export interface FreezeResult {
  /** `sending`: the audience is frozen and the fan-out goes on; anything else ends the run. */
  state: 'sending' | 'canceled' | 'failed' | 'sent';
  recipients: number;
  /** The fan-out cursor: the first position not yet accepted (0 unless resuming). */
  next: number;
}

export interface PageResult {
  /** The next page starts here. */
  next: number;
  /** No recipient is left. */
  done: boolean;
  /** The broadcast was canceled or failed (its domain or topic is gone): stop. */
  stopped: 'canceled' | 'failed' | null;
}

export interface BroadcastActivities {
  /**
   * Freezes the audience (eligible segment members, numbered) and moves the broadcast from
   * `queued` to `sending`, once; run again, it answers the frozen state and the cursor.
   */
  freezeAudience(broadcastId: string): Promise<FreezeResult>;
  /**
   * Accepts up to `pageSize` recipients from position `from` through the one send path
   * (idempotency key `broadcast:<id>:<contact>`, so a page run again stores nothing twice) and
   * moves the cursor.
   */
  enqueuePage(broadcastId: string, from: number, pageSize: number): Promise<PageResult>;
  /** Marks the fan-out complete: the broadcast is `sent` once its last message has left. */
  finishFanOut(broadcastId: string): Promise<void>;
  /** An operator canceled the run in the engine's UI: the broadcast is canceled as the API cancels it; answers whether it was. */
  cancelBroadcastForOperator(broadcastId: string): Promise<boolean>;
}

export const broadcastActivityDefs: Record<keyof BroadcastActivities, ActivityDef> = {
  freezeAudience: DATABASE_ACTIVITY,
  enqueuePage: DATABASE_ACTIVITY,
  finishFanOut: DATABASE_ACTIVITY,
  cancelBroadcastForOperator: DATABASE_ACTIVITY,
};

export interface BroadcastResult {
  status: 'sending' | 'canceled' | 'failed' | 'sent';
  recipients: number;
  /** Pages this run accepted (a run resumed after a crash counts its own). */
  pages: number;
}

/**
 * A broadcast's fan-out, as the state table reads:
 *   queued   --scheduled time--> freeze the audience --> sending
 *   sending  --page by page through the accept path--> fanned out (sent when the last message leaves)
 *   canceled or failed at any page --> stop (messages not yet picked up were canceled by the cancel)
 */
export async function broadcastWorkflow(ctx: WorkflowContext<BroadcastActivities>, input: BroadcastInput): Promise<BroadcastResult> {
  // A cancel ends the wait early; the freeze then answers `canceled`.
  if (input.scheduledAtMs !== null && input.scheduledAtMs > (await ctx.now())) {
    await ctx.waitForSignal(BROADCAST_CANCEL_SIGNAL, input.scheduledAtMs);
  }
  const frozen = await ctx.activities.freezeAudience(input.broadcastId);
  if (frozen.state !== 'sending') return { status: frozen.state, recipients: frozen.recipients, pages: 0 };
  let from = frozen.next;
  let pages = 0;
  for (;;) {
    const page = await ctx.activities.enqueuePage(input.broadcastId, from, BROADCAST_PAGE_SIZE);
    pages++;
    if (page.stopped) return { status: page.stopped, recipients: frozen.recipients, pages };
    // A page that moved nothing is the end too: the loop can never spin on one position.
    if (page.done || page.next <= from) break;
    from = page.next;
  }
  await ctx.activities.finishFanOut(input.broadcastId);
  return { status: 'sending', recipients: frozen.recipients, pages };
}

export const broadcastFanOut = defineWorkflow({
  name: BROADCAST_WORKFLOW,
  outcome: (r) => r.status,
  body: broadcastWorkflow,
  // Canceled if the database agrees (queued, or sending and not fully left); the scheduled wait
  // then ends and the freeze, or the next page, reads `canceled`.
  onCancel: async (ctx, input) => ((await ctx.activities.cancelBroadcastForOperator(input.broadcastId)) ? [BROADCAST_CANCEL_SIGNAL] : []),
  activities: broadcastActivityDefs,
  signals: [BROADCAST_CANCEL_SIGNAL],
  // Unqueued: a few runs at a time, each mostly database work; the messages it accepts take the
  // delivery queue like any others.
  queue: null,
});
