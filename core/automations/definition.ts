import { ValidationError } from 'yup';
import { CONTACT_STATUSES, MAX_PROPERTY_STRING, MAX_TOPIC_CHANGES, parseProperties, SLUG_RE, SUBSCRIPTION_STATES } from '../contacts/rules';
import { parseMailbox } from '../emails/address';
import { sendEmailSchema } from '../emails/schema';
import { ServiceError, validationError, type ErrorDetail } from '../errors';
import { parseTemplateRequest } from '../templates/request';
import { isPlainObject, NO_LINE_BREAKS } from '../validate';
import { MAX_DURATION_SECONDS, parseDuration } from './duration';

/**
 * The definition of an automation (`POST /api/v1/automations`, `PUT /api/v1/automations/:id`):
 * `{name, enabled?, trigger, steps}`, checked without the database. What only the database can
 * tell (do the templates and topics exist?) is returned as `templates` and `topics`, each with the
 * field path to name in a refusal.
 */

export type AutomationTrigger =
  { type: 'event'; event: string } | { type: 'contact.created' } | { type: 'topic.subscribed'; topic: string };

export type AutomationCondition =
  | { property: string; equals: string | number | boolean | null }
  | { property: string; exists: boolean }
  | { topic: string; state: 'subscribed' | 'unsubscribed' }
  | { status: 'subscribed' | 'unsubscribed' | 'bounced' };

export interface AutomationTemplateRef {
  id: string | null;
  slug: string | null;
  version: number | null;
}

export type AutomationStep =
  | { type: 'delay'; duration: string | number; seconds: number }
  | { type: 'send_email'; from: string; template: AutomationTemplateRef; kind: string | null; tags: { name: string; value: string }[] }
  | { type: 'wait_for_event'; event: string; timeout: string | number; timeout_seconds: number }
  | { type: 'condition'; if: AutomationCondition; then: AutomationStep[]; else: AutomationStep[] }
  | {
      type: 'update_contact';
      /** `set` is a null-prototype object (as parseProperties makes it): `__proto__` is a property name like any other. */
      properties: { set: Record<string, string | number | boolean>; remove: string[] } | null;
      topics: { topic: string; state: 'subscribed' | 'unsubscribed' }[];
    };

export interface AutomationDefinition {
  trigger: AutomationTrigger;
  steps: AutomationStep[];
}

export interface ParsedAutomation {
  name: string;
  /** Undefined when omitted (create defaults to true; PUT keeps the current value). */
  enabled: boolean | undefined;
  definition: AutomationDefinition;
  /** Every template a send step names, with the step path of its `template` field, e.g. `steps[2].then[0].template`. */
  templates: { path: string; ref: AutomationTemplateRef }[];
  /** Every topic slug named (trigger, conditions, update_contact), with its field path (`trigger.topic_subscribed`, `steps[1].if.topic`, `steps[3].topics[0].topic`). */
  topics: { path: string; slug: string }[];
}

/** All steps, nested ones included. */
export const MAX_AUTOMATION_STEPS = 100;
/** Condition nesting: the top-level list is depth 1, a condition's then/else lists one deeper. */
export const MAX_AUTOMATION_DEPTH = 5;
export const MAX_AUTOMATION_NAME = 200;
/** Event names and ids (spec: Limits): 1 to 128 characters. */
export const MAX_EVENT_NAME = 128;
export const MAX_CONDITION_PROPERTY = 128;
/** Details listed at most (a hostile body could otherwise make one per array item). */
const MAX_DETAILS = 50;
const MAX_FROM = 998;

const STEP_FIELDS = {
  delay: ['type', 'duration'],
  send_email: ['type', 'from', 'template', 'kind', 'tags'],
  wait_for_event: ['type', 'event', 'timeout'],
  condition: ['type', 'if', 'then', 'else'],
  update_contact: ['type', 'properties', 'topics'],
} as const;
type StepType = keyof typeof STEP_FIELDS;
const STEP_TYPES = Object.keys(STEP_FIELDS) as StepType[];
const TOP_FIELDS = ['name', 'enabled', 'trigger', 'steps'];
const TRIGGER_SHAPES = 'the trigger must be exactly one of {event: "<name>"}, {contact_created: true}, {topic_subscribed: "<topic slug>"}';
const CONDITION_SHAPES = 'the condition must be exactly one of {property, equals}, {property, exists}, {topic, state}, {status}';
const SLUG_RULE = 'must be a slug: 1–64 of a-z 0-9 - _, starting with a letter or digit';

/** The send rules for `kind` and `tags` (core/emails/schema.ts), reused as they are. */
const sendExtrasSchema = sendEmailSchema.pick(['kind', 'tags']);
const TAG_FIELDS = ['name', 'value'];
const MAX_TAGS = 20;

/** Own properties only: an inherited `then` or `constructor` is not a field the client sent. */
const own = (o: Record<string, unknown>, key: string): unknown => (Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined);
const hasNul = (s: string) => s.includes('\u0000');

class Problems {
  readonly details: ErrorDetail[] = [];
  /** Problems found, listed or not: a parser compares it before and after to know whether it added one. */
  count = 0;
  more = false;
  add(field: string, message: string) {
    this.count++;
    if (this.details.length < MAX_DETAILS) this.details.push({ field, message });
    else this.more = true;
  }
  get full() {
    return this.details.length >= MAX_DETAILS;
  }
}

interface Context {
  p: Problems;
  steps: number;
  tooMany: boolean;
  templates: ParsedAutomation['templates'];
  topics: ParsedAutomation['topics'];
}

/** Unknown keys of `o` (a detail on `field` naming them, at most 200 characters of names). */
function checkFields(o: Record<string, unknown>, allowed: readonly string[], field: string, p: Problems): void {
  let names = '';
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    names += (names ? ', ' : '') + k.slice(0, 80).replace(/[\u0000-\u001f\u007f]/g, '?');
    if (names.length >= 200) break;
  }
  if (names) p.add(field, `unknown field(s): ${names.slice(0, 200)}`);
}

/** A string of min..max characters without NUL (and, when asked, without line breaks), or null (a detail added). */
function text(v: unknown, field: string, p: Problems, opts: { min?: number; max: number; oneLine?: boolean }): string | null {
  const min = opts.min ?? 1;
  if (typeof v !== 'string') p.add(field, v === undefined ? 'is required' : 'must be a string');
  else if (v.length < min || v.length > opts.max) p.add(field, `must be ${min}–${opts.max} characters`);
  else if (hasNul(v)) p.add(field, 'contains a NUL character');
  else if (opts.oneLine && !NO_LINE_BREAKS.test(v)) p.add(field, 'must not contain line breaks');
  else return v;
  return null;
}

function slug(v: unknown, field: string, p: Problems): string | null {
  if (typeof v !== 'string') p.add(field, v === undefined ? 'is required' : 'must be a string');
  else if (!SLUG_RE.test(v)) p.add(field, SLUG_RULE);
  else return v;
  return null;
}

function duration(v: unknown, field: string, p: Problems, min: number): number | null {
  if (v === undefined) {
    p.add(field, 'is required');
    return null;
  }
  const seconds = parseDuration(v);
  if (seconds === null) {
    p.add(field, 'must be a whole number of seconds or an ISO 8601 duration such as PT30M, P1D, P2W or P1DT2H (no years or months)');
    return null;
  }
  if (seconds < min || seconds > MAX_DURATION_SECONDS) {
    p.add(field, `must be ${min === 0 ? 'at most' : `${min} second(s) to`} ${MAX_DURATION_SECONDS} seconds (365 days)`);
    return null;
  }
  return seconds;
}

function parseTrigger(v: unknown, ctx: Context): AutomationTrigger | null {
  const { p } = ctx;
  if (!isPlainObject(v)) {
    p.add('trigger', v === undefined ? `is required: ${TRIGGER_SHAPES}` : TRIGGER_SHAPES);
    return null;
  }
  const keys = Object.keys(v);
  checkFields(v, ['event', 'contact_created', 'topic_subscribed'], 'trigger', p);
  if (keys.length !== 1) {
    p.add('trigger', TRIGGER_SHAPES);
    return null;
  }
  switch (keys[0]) {
    case 'event': {
      const event = text(v.event, 'trigger.event', p, { max: MAX_EVENT_NAME });
      return event === null ? null : { type: 'event', event };
    }
    case 'contact_created':
      if (v.contact_created !== true) {
        p.add('trigger.contact_created', 'must be true');
        return null;
      }
      return { type: 'contact.created' };
    case 'topic_subscribed': {
      const topic = slug(v.topic_subscribed, 'trigger.topic_subscribed', p);
      if (topic === null) return null;
      ctx.topics.push({ path: 'trigger.topic_subscribed', slug: topic });
      return { type: 'topic.subscribed', topic };
    }
    default:
      return null; // named by checkFields
  }
}

function parseCondition(v: unknown, field: string, ctx: Context): AutomationCondition | null {
  const { p } = ctx;
  if (!isPlainObject(v)) {
    p.add(field, v === undefined ? `is required: ${CONDITION_SHAPES}` : CONDITION_SHAPES);
    return null;
  }
  const keys = Object.keys(v);
  const shape = keys.length <= 2 ? [...keys].sort().join(',') : '';
  switch (shape) {
    case 'equals,property': {
      const property = text(v.property, `${field}.property`, p, { max: MAX_CONDITION_PROPERTY });
      const equals = v.equals;
      let ok = true;
      if (typeof equals === 'string') {
        if (equals.length > MAX_PROPERTY_STRING) {
          p.add(`${field}.equals`, `strings are at most ${MAX_PROPERTY_STRING} characters`);
          ok = false;
        } else if (hasNul(equals)) {
          p.add(`${field}.equals`, 'contains a NUL character');
          ok = false;
        }
      } else if (typeof equals === 'number') {
        if (!Number.isFinite(equals)) {
          p.add(`${field}.equals`, 'numbers must be finite');
          ok = false;
        }
      } else if (typeof equals !== 'boolean' && equals !== null) {
        p.add(`${field}.equals`, 'must be a string, a number, a boolean or null');
        ok = false;
      }
      return property !== null && ok ? { property, equals: equals as string | number | boolean | null } : null;
    }
    case 'exists,property': {
      const property = text(v.property, `${field}.property`, p, { max: MAX_CONDITION_PROPERTY });
      if (typeof v.exists !== 'boolean') {
        p.add(`${field}.exists`, 'must be a boolean');
        return null;
      }
      return property === null ? null : { property, exists: v.exists };
    }
    case 'state,topic': {
      const topic = slug(v.topic, `${field}.topic`, p);
      const state = v.state;
      const stateOk = SUBSCRIPTION_STATES.includes(state as never);
      if (!stateOk) p.add(`${field}.state`, `must be one of ${SUBSCRIPTION_STATES.join(', ')}`);
      if (topic === null || !stateOk) return null;
      ctx.topics.push({ path: `${field}.topic`, slug: topic });
      return { topic, state: state as 'subscribed' | 'unsubscribed' };
    }
    case 'status': {
      if (!CONTACT_STATUSES.includes(v.status as never)) {
        p.add(`${field}.status`, `must be one of ${CONTACT_STATUSES.join(', ')}`);
        return null;
      }
      return { status: v.status as 'subscribed' | 'unsubscribed' | 'bounced' };
    }
    default:
      p.add(field, CONDITION_SHAPES);
      return null;
  }
}

function parseTemplate(v: unknown, field: string, ctx: Context): AutomationTemplateRef | null {
  const { p } = ctx;
  let ok = true;
  // Template data come from the contact and the triggering event, never from the definition.
  if (isPlainObject(v) && own(v, 'data') !== undefined) {
    p.add(`${field}.data`, 'not allowed in an automation: template data come from the contact and the event');
    ok = false;
  }
  let request;
  try {
    request = parseTemplateRequest(v, field);
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    for (const d of err.details ?? []) if (d.field !== `${field}.data`) p.add(d.field, d.message);
    return null;
  }
  if (request.unresolvable) {
    p.add(field, request.ref.id !== null ? 'id must be a template id (a UUID)' : `slug ${SLUG_RULE}`);
    return null;
  }
  if (!ok) return null;
  const ref = { id: request.ref.id, slug: request.ref.slug, version: request.ref.version };
  ctx.templates.push({ path: field, ref: { ...ref } });
  return ref;
}

/** `kind` and `tags` by the send rules; shapes yup would print (arrays, objects) are refused before it sees them. */
function parseSendExtras(
  step: Record<string, unknown>,
  path: string,
  p: Problems,
): { kind: string | null; tags: { name: string; value: string }[] } | null {
  const kind = own(step, 'kind');
  const tags = own(step, 'tags');
  let ok = true;
  const input: Record<string, unknown> = {};
  if (kind !== undefined) {
    if (typeof kind !== 'string') {
      p.add(`${path}.kind`, 'must be a string');
      ok = false;
    } else input.kind = kind;
  }
  if (tags !== undefined) {
    if (!Array.isArray(tags)) {
      p.add(`${path}.tags`, 'must be an array of {name, value}');
      ok = false;
    } else if (tags.length > MAX_TAGS) {
      p.add(`${path}.tags`, `at most ${MAX_TAGS} tags`);
      ok = false;
    } else {
      let tagsOk = true;
      tags.forEach((t, i) => {
        const at = `${path}.tags[${i}]`;
        if (!isPlainObject(t)) {
          p.add(at, 'must be an object {name, value}');
          tagsOk = false;
          return;
        }
        const before = p.count;
        checkFields(t, TAG_FIELDS, at, p);
        for (const k of TAG_FIELDS) {
          const x = own(t, k);
          if (x !== undefined && typeof x !== 'string') p.add(`${at}.${k}`, 'must be a string');
          else if (typeof x === 'string' && hasNul(x)) p.add(`${at}.${k}`, 'contains a NUL character');
        }
        if (p.count !== before) tagsOk = false;
      });
      if (tagsOk) input.tags = tags.map((t: Record<string, unknown>) => ({ name: own(t, 'name'), value: own(t, 'value') }));
      else ok = false;
    }
  }
  try {
    sendExtrasSchema.validateSync(input, { abortEarly: false });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    for (const e of err.inner.length ? err.inner : [err]) p.add(`${path}.${e.path ?? ''}`, e.message);
    ok = false;
  }
  if (!ok) return null;
  return {
    kind: typeof input.kind === 'string' ? input.kind : null,
    tags: ((input.tags as { name: string; value: string }[] | undefined) ?? []).map((t) => ({ name: t.name, value: t.value })),
  };
}

function parseTopicChanges(v: unknown, field: string, ctx: Context): { topic: string; state: 'subscribed' | 'unsubscribed' }[] | null {
  const { p } = ctx;
  if (!Array.isArray(v)) {
    p.add(field, 'must be an array of topic slugs or {topic, state}');
    return null;
  }
  if (v.length > MAX_TOPIC_CHANGES) {
    p.add(field, `at most ${MAX_TOPIC_CHANGES} topic changes`);
    return null;
  }
  const out: { topic: string; state: 'subscribed' | 'unsubscribed' }[] = [];
  const found: { path: string; slug: string }[] = [];
  const seen = new Set<string>();
  let ok = true;
  v.forEach((x: unknown, i) => {
    const at = `${field}[${i}]`;
    let topic: string | null;
    let topicPath: string;
    let state: 'subscribed' | 'unsubscribed' = 'subscribed';
    if (typeof x === 'string') {
      topicPath = at;
      topic = slug(x, at, p);
    } else if (isPlainObject(x)) {
      topicPath = `${at}.topic`;
      checkFields(x, ['topic', 'state'], at, p);
      topic = slug(own(x, 'topic'), topicPath, p);
      const s = own(x, 'state');
      if (SUBSCRIPTION_STATES.includes(s as never)) state = s as 'subscribed' | 'unsubscribed';
      else {
        p.add(`${at}.state`, `must be one of ${SUBSCRIPTION_STATES.join(', ')}`);
        ok = false;
      }
    } else {
      p.add(at, 'must be a topic slug or {topic, state}');
      ok = false;
      return;
    }
    if (topic === null) ok = false;
    else if (seen.has(topic)) {
      p.add(topicPath, `topic ${topic} is named twice`);
      ok = false;
    } else {
      seen.add(topic);
      out.push({ topic, state });
      found.push({ path: topicPath, slug: topic });
    }
  });
  if (!ok) return null;
  ctx.topics.push(...found);
  return out;
}

function parseStep(v: unknown, path: string, depth: number, ctx: Context): AutomationStep | null {
  const { p } = ctx;
  if (!isPlainObject(v)) {
    p.add(path, 'must be an object with a type');
    return null;
  }
  const type = own(v, 'type');
  if (typeof type !== 'string' || !STEP_TYPES.includes(type as StepType)) {
    p.add(`${path}.type`, `must be one of ${STEP_TYPES.join(', ')}`);
    return null;
  }
  const before = p.count;
  checkFields(v, STEP_FIELDS[type as StepType], path, p);
  const clean = () => p.count === before;
  switch (type as StepType) {
    case 'delay': {
      const d = own(v, 'duration');
      const seconds = duration(d, `${path}.duration`, p, 0);
      return seconds !== null && clean() ? { type: 'delay', duration: d as string | number, seconds } : null;
    }
    case 'wait_for_event': {
      const event = text(own(v, 'event'), `${path}.event`, p, { max: MAX_EVENT_NAME });
      const t = own(v, 'timeout');
      const seconds = duration(t, `${path}.timeout`, p, 1);
      return event !== null && seconds !== null && clean()
        ? { type: 'wait_for_event', event, timeout: t as string | number, timeout_seconds: seconds }
        : null;
    }
    case 'send_email': {
      const from = own(v, 'from');
      let fromOk = false;
      if (typeof from !== 'string') p.add(`${path}.from`, from === undefined ? 'is required' : 'must be a string');
      else if (from.length > MAX_FROM || parseMailbox(from) === null) p.add(`${path}.from`, 'must be one email address or "Name <email>"');
      else fromOk = true;
      const template = parseTemplate(own(v, 'template'), `${path}.template`, ctx);
      const extras = parseSendExtras(v, path, p);
      if (!fromOk || template === null || extras === null || !clean()) return null;
      return { type: 'send_email', from: from as string, template, kind: extras.kind, tags: extras.tags };
    }
    case 'condition': {
      const cond = parseCondition(own(v, 'if'), `${path}.if`, ctx);
      const thenList = parseList(own(v, 'then'), `${path}.then`, depth + 1, ctx, true);
      const elseValue = own(v, 'else');
      const elseList = elseValue === undefined ? [] : parseList(elseValue, `${path}.else`, depth + 1, ctx, true);
      if (cond === null || thenList === null || elseList === null || !clean()) return null;
      return { type: 'condition', if: cond, then: thenList, else: elseList };
    }
    case 'update_contact': {
      const props = own(v, 'properties');
      const topics = own(v, 'topics');
      if (props === undefined && topics === undefined) {
        p.add(path, 'name properties, topics or both');
        return null;
      }
      let properties: { set: Record<string, string | number | boolean>; remove: string[] } | null = null;
      if (props !== undefined) {
        const field = `${path}.properties`;
        const { patch, details } = parseProperties(props, field);
        for (const d of details) p.add(d.field, d.message);
        for (const key of Object.keys(patch.set)) {
          const x = patch.set[key];
          if (typeof x === 'string' && hasNul(x)) p.add(`${field}.${key}`, 'contains a NUL character');
        }
        properties = { set: patch.set, remove: [...patch.remove] };
      }
      const changes = topics === undefined ? [] : parseTopicChanges(topics, `${path}.topics`, ctx);
      if (changes === null || !clean()) return null;
      return { type: 'update_contact', properties, topics: changes };
    }
  }
}

/** A list of steps at `path`, `depth` lists deep; null when refused (details added). */
function parseList(v: unknown, path: string, depth: number, ctx: Context, allowEmpty: boolean): AutomationStep[] | null {
  const { p } = ctx;
  if (!Array.isArray(v)) {
    p.add(path, v === undefined ? 'is required: an array of steps' : 'must be an array of steps');
    return null;
  }
  if (depth > MAX_AUTOMATION_DEPTH) {
    p.add(path, `conditions nest at most ${MAX_AUTOMATION_DEPTH} lists of steps deep`);
    return null;
  }
  if (!allowEmpty && v.length === 0) {
    p.add(path, 'must hold at least one step');
    return null;
  }
  // Counted before walking: a list that would exceed the limit is refused without visiting its steps.
  ctx.steps += v.length;
  if (ctx.steps > MAX_AUTOMATION_STEPS) {
    if (!ctx.tooMany) p.add('steps', `an automation has at most ${MAX_AUTOMATION_STEPS} steps, nested ones included`);
    ctx.tooMany = true;
    return null;
  }
  const out: AutomationStep[] = [];
  let ok = true;
  for (let i = 0; i < v.length; i++) {
    if (ctx.tooMany) return null;
    if (p.full) {
      p.more = true; // the rest is not walked
      return null;
    }
    const step = parseStep(v[i], `${path}[${i}]`, depth, ctx);
    if (step === null) ok = false;
    else out.push(step);
  }
  return ok ? out : null;
}

/**
 * Checks an automation body and returns it normalized: fresh objects holding only the known
 * fields, durations in seconds beside what was given, topic changes as objects. Every problem is a
 * detail of one 422 `validation_error` (at most 50 listed).
 */
export function parseAutomation(body: unknown): ParsedAutomation {
  if (!isPlainObject(body)) {
    throw validationError('the body must be an object {name, enabled?, trigger, steps}', [{ field: '', message: 'must be an object' }]);
  }
  const p = new Problems();
  const ctx: Context = { p, steps: 0, tooMany: false, templates: [], topics: [] };
  checkFields(body, TOP_FIELDS, '', p);
  const name = text(own(body, 'name'), 'name', p, { max: MAX_AUTOMATION_NAME, oneLine: true });
  const enabled = own(body, 'enabled');
  if (enabled !== undefined && typeof enabled !== 'boolean') p.add('enabled', 'must be a boolean');
  const trigger = parseTrigger(own(body, 'trigger'), ctx);
  const steps = parseList(own(body, 'steps'), 'steps', 1, ctx, false);

  if (p.count || name === null || trigger === null || steps === null) {
    const details = p.more ? [...p.details, { field: '', message: `problems past the first ${MAX_DETAILS} are not listed` }] : p.details;
    const message = `invalid automation: ${details.map((d) => (d.field ? `${d.field} ${d.message}` : d.message)).join('; ')}`;
    throw validationError(message.length > 2000 ? `${message.slice(0, 1997)}...` : message, details);
  }
  return {
    name,
    enabled: enabled as boolean | undefined,
    definition: { trigger, steps },
    templates: ctx.templates,
    topics: ctx.topics,
  };
}

const STEP_PATH = /^steps\[(0|[1-9]\d{0,8})\]((?:\.(?:then|else)\[(?:0|[1-9]\d{0,8})\])*)$/;
const SEGMENT = /\.(then|else)\[(\d+)\]/g;

/** The step at a step path (`steps[2]`, `steps[2].then[0]`), the inverse of the paths above; undefined when there is none. */
export function stepAt(steps: AutomationStep[], path: string): AutomationStep | undefined {
  const m = typeof path === 'string' ? STEP_PATH.exec(path) : null;
  if (!m) return undefined;
  let step: AutomationStep | undefined = steps[Number(m[1])];
  for (const [, branch, index] of m[2].matchAll(SEGMENT)) {
    if (step?.type !== 'condition') return undefined;
    step = (branch === 'then' ? step.then : step.else)[Number(index)];
  }
  return step;
}
