import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import {
  cancelRuns,
  finishRun,
  mergeContactProperties,
  parkRun,
  readRunForStep,
  topicStateOf,
  writeStep,
  type RunForStep,
  type StepWrite,
} from '../db/sql/automation-run-state';
import type { AutomationRunActivities, StepOutcome } from '../workflows/automation-run';
import type { Clock } from '../core/clock';
import { ServiceError } from '../core/errors';
import { stepAt, type AutomationCondition, type AutomationStep } from '../core/automations/definition';
import { submit } from '../core/emails/submit';
import { GroupStore } from '../core/emails/group-store';
import { TemplateResolver } from '../core/templates/resolver';
import { changeSubscriptions } from '../core/contacts/subscriptions';
import { PermanentFailure } from './errors';

export interface AutomationRunDeps {
  orm: Orm;
  clock: Clock;
  log: Logger;
  /** Wakes the outbox after a send step stored its message (the outbox also polls). */
  afterEnqueue?: () => void;
}

const GO: StepOutcome = { go: true };

/** The run's own end, or what a write that found it ended means for the body. */
function ended(status: string): StepOutcome {
  if (status === 'canceled') return { go: false, status: 'canceled', reason: 'canceled' };
  return { go: false, status: status === 'failed' ? 'failed' : 'completed', reason: null };
}

/** The step a run's path names in its pinned definition (written by the API, so a miss is a bug). */
function stepOf(run: RunForStep, path: string): AutomationStep {
  const step = stepAt(run.definition.steps as AutomationStep[], path);
  if (!step) throw new PermanentFailure(`automation run ${run.id} has no step ${path}`);
  return step;
}

/** A contact the run may no longer act for: deleted, or it left (spec: unsubscribed or bounced). */
function contactGone(run: RunForStep): StepOutcome | null {
  if (!run.contact) return { go: false, status: 'completed', reason: 'contact_deleted' };
  if (run.contact.status !== 'subscribed') return { go: false, status: 'completed', reason: `contact_${run.contact.status}` };
  return null;
}

export function createAutomationRunActivities(deps: AutomationRunDeps): AutomationRunActivities {
  const { orm, clock, log } = deps;
  const store = new GroupStore(orm, log);
  const templates = new TemplateResolver(orm);

  async function load(runId: string): Promise<RunForStep> {
    const run = await readRunForStep(orm, runId);
    if (!run) throw new PermanentFailure(`automation run ${runId} does not exist`);
    return run;
  }

  async function write(runId: string, w: Omit<StepWrite, 'now'>): Promise<StepOutcome> {
    const r = await writeStep(orm, runId, { ...w, now: clock.now() });
    if (!r) throw new PermanentFailure(`automation run ${runId} does not exist`);
    return r.applied ? GO : ended(r.status);
  }

  /** Records a step done at once, with its result. */
  const record = (runId: string, path: string, type: string, result: Record<string, unknown>) => {
    const at = clock.now().toISOString();
    return write(runId, { path, entry: { step: path, type, started_at: at, finished_at: at, result } });
  };

  async function condition(run: RunForStep, c: AutomationCondition): Promise<boolean> {
    const contact = run.contact!;
    if ('status' in c) return contact.status === c.status;
    if ('topic' in c) return (await topicStateOf(orm, run.organization_id, contact.id, c.topic)) === c.state;
    const has = Object.prototype.hasOwnProperty.call(contact.properties, c.property);
    if ('exists' in c) return has === c.exists;
    return has ? contact.properties[c.property] === c.equals : c.equals === null;
  }

  return {
    async beginRun(runId) {
      const run = await load(runId);
      const steps = run.definition.steps as never;
      if (run.status !== 'running' || run.segment === 0 || run.resume_path === null)
        return { status: run.status, steps, resumeAfter: null };
      // A segment after a park: the delay that parked it is over.
      const done = await write(runId, { path: run.resume_path, finish: { outcome: 'elapsed' } });
      return done.go
        ? { status: 'running', steps, resumeAfter: run.resume_path }
        : { status: done.status === 'canceled' ? 'canceled' : 'completed', steps, resumeAfter: null };
    },

    async parkRun(runId, path, untilMs) {
      const r = await parkRun(orm, runId, {
        path,
        until: new Date(untilMs),
        entry: { step: path, type: 'delay', started_at: clock.now().toISOString(), until: new Date(untilMs).toISOString(), parked: true },
        now: clock.now(),
      });
      if (!r) throw new PermanentFailure(`automation run ${runId} does not exist`);
      return r.parked ? GO : ended(r.status);
    },

    async enterDelay(runId, path, untilMs) {
      return write(runId, {
        path,
        entry: { step: path, type: 'delay', started_at: clock.now().toISOString(), until: new Date(untilMs).toISOString() },
      });
    },

    async checkRun(runId) {
      const run = await load(runId);
      return run.status === 'running' || run.status === 'waiting' ? GO : ended(run.status);
    },

    async finishDelay(runId, path) {
      return write(runId, { path, finish: { outcome: 'elapsed' } });
    },

    async sendEmailStep(runId, path) {
      const run = await load(runId);
      if (run.status !== 'running') return ended(run.status);
      const gone = contactGone(run);
      if (gone) return gone;
      const step = stepOf(run, path);
      if (step.type !== 'send_email') throw new PermanentFailure(`step ${path} of run ${runId} is not a send_email`);
      const contact = run.contact!;
      // The contact's fields and properties, overlaid by the event's data; keys the template does
      // not declare are not used (never an error).
      const data = {
        ...contact.properties,
        email: contact.email,
        first_name: contact.first_name,
        last_name: contact.last_name,
        ...run.data,
      };
      let result: { email_id: string; suppressed: string[] } | ServiceError;
      try {
        const [outcome] = await submit(
          { orm, store, templates, dispatch: () => deps.afterEnqueue?.() },
          {
            credentials: { keyId: run.api_key_id },
            organizationId: run.organization_id,
            items: {
              one: {
                from: step.from,
                to: contact.email,
                template: {
                  ...(step.template.id ? { id: step.template.id } : { slug: step.template.slug }),
                  ...(step.template.version ? { version: step.template.version } : {}),
                  data,
                },
                ...(step.kind ? { kind: step.kind } : {}),
                ...(step.tags.length ? { tags: step.tags } : {}),
              },
              idempotencyKey: `automation:${runId}:${path}`,
            },
            payment: 'prepaid',
            source: 'automation',
            undeclared: 'ignore',
          },
        );
        result = outcome instanceof ServiceError ? outcome : { email_id: outcome.id, suppressed: outcome.suppressed };
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        result = err;
      }
      if (result instanceof ServiceError) {
        // The service refused the message (sender domain, template, a revoked key): no retry changes that.
        await record(runId, path, 'send_email', { outcome: 'refused', code: result.code, message: result.message });
        log.warn({ runId, path, code: result.code }, 'automation send step refused');
        return { go: false, status: 'failed', reason: `${path}: ${result.code}` };
      }
      return record(runId, path, 'send_email', { outcome: result.suppressed.length ? 'suppressed' : 'accepted', ...result });
    },

    async beginWait(runId, path, deadlineMs) {
      const run = await load(runId);
      const step = stepOf(run, path);
      if (step.type !== 'wait_for_event') throw new PermanentFailure(`step ${path} of run ${runId} is not a wait_for_event`);
      return write(runId, {
        path,
        status: 'waiting',
        wait: { event: step.event, deadline: new Date(deadlineMs) },
        entry: {
          step: path,
          type: 'wait_for_event',
          started_at: clock.now().toISOString(),
          event: step.event,
          until: new Date(deadlineMs).toISOString(),
        },
      });
    },

    async endWait(runId, path, deadlinePassed) {
      const run = await load(runId);
      if (run.status !== 'waiting' && run.status !== 'running') return { outcome: ended(run.status), result: 'pending' };
      const result = run.resumed ? 'event' : deadlinePassed ? 'timeout' : 'pending';
      if (result === 'pending') return { outcome: GO, result };
      const outcome = await write(runId, {
        path,
        status: 'running',
        wait: null,
        finish: result === 'event' ? { outcome: 'event', ...run.resumed } : { outcome: 'timeout' },
      });
      return { outcome, result };
    },

    async conditionStep(runId, path) {
      const run = await load(runId);
      if (run.status !== 'running') return { outcome: ended(run.status), branch: 'else' };
      const gone = contactGone(run);
      if (gone) return { outcome: gone, branch: 'else' };
      const step = stepOf(run, path);
      if (step.type !== 'condition') throw new PermanentFailure(`step ${path} of run ${runId} is not a condition`);
      const branch = (await condition(run, step.if)) ? 'then' : 'else';
      return { outcome: await record(runId, path, 'condition', { branch }), branch };
    },

    async updateContactStep(runId, path) {
      const run = await load(runId);
      if (run.status !== 'running') return ended(run.status);
      const gone = contactGone(run);
      if (gone) return gone;
      const step = stepOf(run, path);
      if (step.type !== 'update_contact') throw new PermanentFailure(`step ${path} of run ${runId} is not an update_contact`);
      try {
        if (step.properties) {
          const found = await mergeContactProperties(orm, run.contact!.id, step.properties.set, step.properties.remove, clock.now());
          if (!found) return { go: false, status: 'completed', reason: 'contact_deleted' };
        }
        if (step.topics.length) {
          await changeSubscriptions(
            orm,
            run.organization_id,
            { id: run.contact!.id, email: null },
            step.topics.map((t) => ({ slug: t.topic, state: t.state })),
          );
        }
      } catch (err) {
        const code = err instanceof ServiceError ? err.code : (err as { code?: string }).code === '23514' ? 'too_many_properties' : null;
        if (code === null) throw err;
        // A topic deleted since the definition, a contact gone, 100 properties reached: the step cannot be done.
        await record(runId, path, 'update_contact', { outcome: 'refused', code });
        if (code === 'not_found') return { go: false, status: 'completed', reason: 'contact_deleted' };
        return { go: false, status: 'failed', reason: `${path}: ${code}` };
      }
      return record(runId, path, 'update_contact', { outcome: 'updated' });
    },

    async finishRun(runId, status, reason) {
      await finishRun(orm, runId, status, reason, clock.now());
    },

    async cancelRunForOperator(runId) {
      const canceled = (await cancelRuns(orm, { runId }, clock.now())).length > 0;
      deps.log.info({ runId, canceled }, "operator canceled the automation run's workflow");
      return canceled;
    },
  };
}
