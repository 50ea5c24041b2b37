import type { Automation, AutomationRun } from '../../db/entities';
import type { AutomationDefinition, AutomationTrigger } from '../../core/automations/definition';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The trigger as clients write it: `{event}`, `{contact_created: true}` or `{topic_subscribed}`. */
export function presentTrigger(t: AutomationTrigger): Record<string, unknown> {
  if (t.type === 'event') return { event: t.event };
  if (t.type === 'contact.created') return { contact_created: true };
  return { topic_subscribed: t.topic };
}

/** The automation object: its latest version's definition (delays and timeouts also in seconds). */
export function presentAutomation(a: Automation, definition: AutomationDefinition) {
  return {
    object: 'automation',
    id: a.id,
    name: a.name,
    enabled: a.enabled,
    version: a.version,
    trigger: presentTrigger(definition.trigger),
    steps: definition.steps,
    created_at: iso(a.createdAt),
    updated_at: iso(a.updatedAt),
  };
}

/** The timestamps of a history entry: the API's one format, whoever wrote them (issue 51). */
const HISTORY_TIMES = new Set(['started_at', 'finished_at', 'until']);

/**
 * A history entry as the API shows it. Entries are written by the activities (JavaScript's
 * `…T10:00:00.000Z`) and completed in SQL; `finished_at` written there before issue 51 was
 * PostgreSQL's JSON rendering (`…T10:00:59.49+00:00`), so each time is read and written again.
 */
function presentHistoryEntry(entry: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(entry)) {
    const at = HISTORY_TIMES.has(key) && typeof value === 'string' ? Date.parse(value) : NaN;
    out[key] = Number.isNaN(at) ? value : new Date(at).toISOString();
  }
  return out;
}

/** A run: where it is (`step`, a path such as `steps[2].then[0]`), what it did (`history`), why it ended. */
export function presentRun(r: AutomationRun) {
  return {
    object: 'automation_run',
    id: r.id,
    automation_id: r.automationId,
    version: r.version,
    status: r.status,
    step: r.step,
    ...(r.status === 'waiting' ? { waiting_for: { event: r.waitingEvent, until: iso(r.waitDeadline) } } : {}),
    reason: r.reason,
    trigger: r.trigger,
    contact: { id: r.contactId, email: r.email },
    history: r.history.map(presentHistoryEntry),
    created_at: iso(r.createdAt),
    started_at: iso(r.startedAt),
    finished_at: iso(r.finishedAt),
  };
}
