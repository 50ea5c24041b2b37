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
    history: r.history,
    created_at: iso(r.createdAt),
    started_at: iso(r.startedAt),
    finished_at: iso(r.finishedAt),
  };
}
