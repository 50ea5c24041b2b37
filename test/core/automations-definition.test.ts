import assert from 'node:assert/strict';
import {
  MAX_AUTOMATION_DEPTH,
  MAX_AUTOMATION_STEPS,
  parseAutomation,
  stepAt,
  type AutomationStep,
} from '../../core/automations/definition';
import { MAX_DURATION_SECONDS, parseDuration } from '../../core/automations/duration';
import { sendEmailSchema } from '../../core/emails/schema';
import { ServiceError, type ErrorDetail } from '../../core/errors';

const TEMPLATE_ID = '0190b5d4-7c2e-7a61-9f00-3b1c2d4e5f60';
const send = (template: unknown = { slug: 'welcome' }) => ({ type: 'send_email', from: 'Acme <hello@acme.test>', template });
const delay = (duration: unknown = 60) => ({ type: 'delay', duration });
const body = (steps: unknown, extra: Record<string, unknown> = {}) => ({
  name: 'Onboarding',
  trigger: { event: 'signed_up' },
  steps,
  ...extra,
});

/** The details of the validation_error `parseAutomation` throws; fails on anything else. */
function refusal(input: unknown): ErrorDetail[] {
  try {
    parseAutomation(input);
  } catch (err) {
    assert.ok(err instanceof ServiceError, `not a ServiceError: ${String(err)}`);
    assert.equal(err.code, 'validation_error');
    assert.equal(err.status, 422);
    assert.ok(err.details && err.details.length > 0);
    assert.ok(err.details.length <= 51, `${err.details.length} details`);
    assert.ok(err.message.length <= 2000);
    return err.details;
  }
  assert.fail('accepted');
}
const fields = (input: unknown) => refusal(input).map((d) => d.field);

/** A condition nesting `levels` lists of steps: levels 1 is a plain top-level list. */
function nested(levels: number): unknown[] {
  let list: unknown[] = [delay()];
  for (let i = 1; i < levels; i++) list = [{ type: 'condition', if: { status: 'subscribed' }, then: list }];
  return list;
}

describe('Core: automation definitions (POST/PUT /automations bodies)', () => {
  describe('parseDuration', () => {
    it('reads whole seconds and ISO 8601 durations of weeks, days, hours, minutes and seconds', () => {
      assert.equal(parseDuration('PT30M'), 1800);
      assert.equal(parseDuration('P1D'), 86400);
      assert.equal(parseDuration('P2W'), 14 * 86400);
      assert.equal(parseDuration('P1DT2H3M4S'), 86400 + 2 * 3600 + 3 * 60 + 4);
      assert.equal(parseDuration('PT0S'), 0);
      assert.equal(parseDuration('PT90S'), 90);
      assert.equal(parseDuration(90), 90);
      assert.equal(parseDuration(0), 0);
      assert.equal(MAX_DURATION_SECONDS, 365 * 86400);
    });

    it('refuses years, months, empty designators, fractions, signs and other values', () => {
      for (const v of [
        'P1Y',
        'P1M',
        'P1Y2D',
        'P',
        'PT',
        'P1DT',
        'PT1.5S',
        'P1W2D',
        '-P1D',
        'pt30m',
        ' PT30M',
        '90',
        '',
        'PT1H\u0000',
        -1,
        1.5,
        NaN,
        Infinity,
        2 ** 60,
        null,
        undefined,
        true,
        {},
        [],
        'P999999999999999W',
      ]) {
        assert.equal(parseDuration(v), null, String(v));
      }
    });
  });

  describe('parseAutomation: accepted bodies, normalized', () => {
    it('normalizes every step type, keeping only known fields', () => {
      const parsed = parseAutomation({
        name: 'Onboarding',
        enabled: false,
        trigger: { topic_subscribed: 'news' },
        steps: [
          { type: 'delay', duration: 'PT30M' },
          {
            type: 'send_email',
            from: 'Acme <hello@acme.test>',
            template: { id: TEMPLATE_ID.toUpperCase(), version: 3 },
            kind: 'welcome',
            tags: [{ name: 'flow', value: 'onboarding' }],
          },
          { type: 'wait_for_event', event: 'purchased', timeout: 'P2W' },
          {
            type: 'condition',
            if: { property: 'plan', equals: 'pro' },
            then: [{ type: 'send_email', from: 'hello@acme.test', template: { slug: 'pro-tips' } }],
          },
          { type: 'update_contact', properties: { plan: 'trial', old: null }, topics: ['tips', { topic: 'news', state: 'unsubscribed' }] },
        ],
      });
      assert.equal(parsed.name, 'Onboarding');
      assert.equal(parsed.enabled, false);
      assert.deepEqual(parsed.definition.trigger, { type: 'topic.subscribed', topic: 'news' });
      const set = Object.assign(Object.create(null), { plan: 'trial' });
      assert.deepStrictEqual(parsed.definition.steps, [
        { type: 'delay', duration: 'PT30M', seconds: 1800 },
        {
          type: 'send_email',
          from: 'Acme <hello@acme.test>',
          template: { id: TEMPLATE_ID, slug: null, version: 3 },
          kind: 'welcome',
          tags: [{ name: 'flow', value: 'onboarding' }],
        },
        { type: 'wait_for_event', event: 'purchased', timeout: 'P2W', timeout_seconds: 14 * 86400 },
        {
          type: 'condition',
          if: { property: 'plan', equals: 'pro' },
          then: [
            { type: 'send_email', from: 'hello@acme.test', template: { id: null, slug: 'pro-tips', version: null }, kind: null, tags: [] },
          ],
          else: [],
        },
        {
          type: 'update_contact',
          properties: { set, remove: ['old'] },
          topics: [
            { topic: 'tips', state: 'subscribed' },
            { topic: 'news', state: 'unsubscribed' },
          ],
        },
      ]);
    });

    it('reads the three triggers, enabled omitted as undefined', () => {
      assert.deepEqual(parseAutomation(body([delay()])).definition.trigger, { type: 'event', event: 'signed_up' });
      assert.equal(parseAutomation(body([delay()])).enabled, undefined);
      assert.deepEqual(parseAutomation(body([delay()], { trigger: { contact_created: true } })).definition.trigger, {
        type: 'contact.created',
      });
      assert.deepEqual(parseAutomation(body([delay()], { trigger: { topic_subscribed: 'news' } })).definition.trigger, {
        type: 'topic.subscribed',
        topic: 'news',
      });
    });

    it('reads the four condition shapes and an else branch', () => {
      for (const cond of [
        { property: 'plan', equals: 3 },
        { property: 'plan', equals: null },
        { property: 'plan', equals: true },
        { property: 'plan', exists: false },
        { topic: 'news', state: 'unsubscribed' },
        { status: 'bounced' },
      ]) {
        const step = parseAutomation(body([{ type: 'condition', if: cond, then: [], else: [delay(0)] }])).definition.steps[0];
        assert.deepEqual(step, { type: 'condition', if: cond, then: [], else: [{ type: 'delay', duration: 0, seconds: 0 }] });
      }
    });

    it('accepts delays of 0 to 365 days and waits of 1 second to 365 days', () => {
      assert.equal(
        (parseAutomation(body([delay(MAX_DURATION_SECONDS)])).definition.steps[0] as { seconds: number }).seconds,
        MAX_DURATION_SECONDS,
      );
      assert.deepEqual(parseAutomation(body([delay('P1DT2H3M4S')])).definition.steps[0], {
        type: 'delay',
        duration: 'P1DT2H3M4S',
        seconds: 93784,
      });
      assert.deepEqual(parseAutomation(body([{ type: 'wait_for_event', event: 'x', timeout: 1 }])).definition.steps[0], {
        type: 'wait_for_event',
        event: 'x',
        timeout: 1,
        timeout_seconds: 1,
      });
    });

    it('collects every template and topic with its field path', () => {
      const parsed = parseAutomation({
        name: 'n',
        trigger: { topic_subscribed: 'news' },
        steps: [
          send({ slug: 'welcome', version: 2 }),
          { type: 'condition', if: { topic: 'vip', state: 'subscribed' }, then: [delay()] },
          {
            type: 'condition',
            if: { status: 'subscribed' },
            then: [send({ id: TEMPLATE_ID })],
            else: [{ type: 'update_contact', topics: ['tips', { topic: 'promo', state: 'unsubscribed' }] }],
          },
        ],
      });
      assert.deepEqual(parsed.templates, [
        { path: 'steps[0].template', ref: { id: null, slug: 'welcome', version: 2 } },
        { path: 'steps[2].then[0].template', ref: { id: TEMPLATE_ID, slug: null, version: null } },
      ]);
      assert.deepEqual(parsed.topics, [
        { path: 'trigger.topic_subscribed', slug: 'news' },
        { path: 'steps[1].if.topic', slug: 'vip' },
        { path: 'steps[2].else[0].topics[0]', slug: 'tips' },
        { path: 'steps[2].else[0].topics[1].topic', slug: 'promo' },
      ]);
      for (const t of parsed.templates)
        assert.equal((stepAt(parsed.definition.steps, t.path.replace(/\.template$/, '')) as { type: string }).type, 'send_email');
    });

    it('stepAt walks step paths and nothing else', () => {
      const steps = parseAutomation(
        body([
          delay(),
          {
            type: 'condition',
            if: { status: 'subscribed' },
            then: [delay(5)],
            else: [{ type: 'condition', if: { status: 'bounced' }, then: [delay(7)] }],
          },
        ]),
      ).definition.steps;
      assert.deepEqual(stepAt(steps, 'steps[1].then[0]'), { type: 'delay', duration: 5, seconds: 5 });
      assert.deepEqual(stepAt(steps, 'steps[1].else[0].then[0]'), { type: 'delay', duration: 7, seconds: 7 });
      assert.equal(stepAt(steps, 'steps[0]'), steps[0]);
      for (const path of [
        'steps[2]',
        'steps[0].then[0]',
        'steps[1].then[1]',
        'steps[01]',
        'steps[1].then[0].template',
        'steps',
        '',
        'steps[-1]',
      ]) {
        assert.equal(stepAt(steps, path), undefined, path);
      }
    });
  });

  describe('parseAutomation: refusals name each field', () => {
    it('refuses non-objects and names every top-level problem', () => {
      for (const v of [null, undefined, 'x', 1, [], [body([delay()])]]) assert.deepEqual(fields(v), ['']);
      assert.deepEqual(fields({ extra: 1, steps: [] }), ['', 'name', 'trigger', 'steps']);
      const details = refusal({
        name: 'a\nb',
        enabled: 'yes',
        trigger: { event: 'x', contact_created: true },
        steps: [delay()],
        extra: 1,
        more: 2,
      });
      assert.deepEqual(
        details.map((d) => d.field),
        ['', 'name', 'enabled', 'trigger'],
      );
      assert.match(details[0].message, /extra, more/);
      assert.deepEqual(fields(body([delay()], { name: '' })), ['name']);
      assert.deepEqual(fields(body([delay()], { name: 'x'.repeat(201) })), ['name']);
      assert.deepEqual(fields(body([delay()], { trigger: { contact_created: false } })), ['trigger.contact_created']);
      assert.deepEqual(fields(body([delay()], { trigger: { topic_subscribed: 'Not A Slug' } })), ['trigger.topic_subscribed']);
      assert.deepEqual(fields(body([delay()], { trigger: { event: 'x'.repeat(129) } })), ['trigger.event']);
      assert.deepEqual(fields(body([delay()], { trigger: {} })), ['trigger']);
    });

    it('refuses unknown step types and unknown fields, naming the step', () => {
      assert.deepEqual(fields(body([delay(), delay(), delay(), { type: 'webhook' }])), ['steps[3].type']);
      assert.deepEqual(fields(body([{ duration: 5 }])), ['steps[0].type']);
      assert.deepEqual(fields(body(['delay'])), ['steps[0]']);
      const [d] = refusal(body([delay(), delay(), delay(), { type: 'delay', duration: 5, seconds: 5, foo: 1 }]));
      assert.equal(d.field, 'steps[3]');
      assert.match(d.message, /seconds, foo/);
      const long = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`field_number_${i}`, i]));
      const [l] = refusal(body([{ type: 'delay', duration: 5, ...long }]));
      assert.ok(l.message.length <= 220, l.message);
    });

    it('names nested fields by their path', () => {
      assert.deepEqual(
        fields(
          body([
            delay(),
            { type: 'condition', if: { status: 'subscribed' }, then: [delay()] },
            { type: 'condition', if: { status: 'subscribed' }, then: [send({ slug: 'Bad Slug' })] },
          ]),
        ),
        ['steps[2].then[0].template'],
      );
      assert.deepEqual(fields(body([send({ id: 'not-a-uuid' })])), ['steps[0].template']);
      assert.deepEqual(fields(body([send({ slug: 'x', id: TEMPLATE_ID })])), ['steps[0].template']);
      assert.deepEqual(fields(body([send({ slug: 'x', data: { a: 1 } })])), ['steps[0].template.data']);
      assert.deepEqual(fields(body([send({ slug: 'x', version: 0 })])), ['steps[0].template.version']);
      assert.deepEqual(fields(body([send('welcome')])), ['steps[0].template']);
      assert.deepEqual(fields(body([{ ...send(), from: 'a@b.test, c@d.test' }])), ['steps[0].from']);
      assert.deepEqual(fields(body([{ ...send(), from: `${'a'.repeat(990)}@acme.test` }])), ['steps[0].from']);
      assert.deepEqual(fields(body([{ ...send(), kind: 'no spaces' }])), ['steps[0].kind']);
      assert.deepEqual(fields(body([{ ...send(), kind: 5 }])), ['steps[0].kind']);
      assert.deepEqual(fields(body([{ ...send(), tags: [{ name: 'a', value: 'b\nc' }] }])), ['steps[0].tags[0].value']);
      assert.deepEqual(fields(body([{ ...send(), tags: [{ name: 'a', value: 'b', x: 1 }] }])), ['steps[0].tags[0]']);
      assert.deepEqual(fields(body([{ ...send(), tags: Array.from({ length: 21 }, () => ({ name: 'a', value: 'b' })) }])), [
        'steps[0].tags',
      ]);
      assert.deepEqual(fields(body([{ type: 'condition', if: { property: 'plan' }, then: [] }])), ['steps[0].if']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { property: 'plan', equals: 1, exists: true }, then: [] }])), ['steps[0].if']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { property: 'plan', equals: [1] }, then: [] }])), ['steps[0].if.equals']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { status: 'gone' }, then: [] }])), ['steps[0].if.status']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { topic: 'news', state: 'maybe' }, then: [] }])), ['steps[0].if.state']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { status: 'bounced' } }])), ['steps[0].then']);
      assert.deepEqual(fields(body([{ type: 'update_contact' }])), ['steps[0]']);
      assert.deepEqual(fields(body([{ type: 'update_contact', properties: { 'bad key': 1 } }])), ['steps[0].properties.bad key']);
      assert.deepEqual(fields(body([{ type: 'update_contact', topics: ['news', { topic: 'news', state: 'subscribed' }] }])), [
        'steps[0].topics[1].topic',
      ]);
      assert.deepEqual(fields(body([{ type: 'update_contact', topics: Array.from({ length: 51 }, (_, i) => `t${i}`) }])), [
        'steps[0].topics',
      ]);
      assert.deepEqual(fields(body([{ type: 'wait_for_event', timeout: 0 }])), ['steps[0].event', 'steps[0].timeout']);
      assert.deepEqual(fields(body([])), ['steps']);
      assert.deepEqual(fields(body({})), ['steps']);
    });

    it('refuses durations that are not whole seconds or ISO 8601 without years and months, or over 365 days', () => {
      for (const v of ['P1Y', 'PT', -1, 1.5, MAX_DURATION_SECONDS + 1, 'P366D', 'P53W', undefined, null]) {
        assert.deepEqual(fields(body([{ type: 'delay', duration: v }])), ['steps[0].duration'], String(v));
        assert.deepEqual(fields(body([{ type: 'wait_for_event', event: 'e', timeout: v }])), ['steps[0].timeout'], String(v));
      }
    });

    it(`nests conditions at most ${MAX_AUTOMATION_DEPTH} lists deep`, () => {
      assert.equal(parseAutomation(body(nested(MAX_AUTOMATION_DEPTH))).definition.steps.length, 1);
      assert.deepEqual(fields(body(nested(MAX_AUTOMATION_DEPTH + 1))), ['steps[0].then[0].then[0].then[0].then[0].then']);
    });

    it(`holds at most ${MAX_AUTOMATION_STEPS} steps, nested ones included`, () => {
      assert.equal(parseAutomation(body(Array.from({ length: MAX_AUTOMATION_STEPS }, () => delay()))).definition.steps.length, 100);
      assert.deepEqual(fields(body(Array.from({ length: MAX_AUTOMATION_STEPS + 1 }, () => delay()))), ['steps']);
      const half = Array.from({ length: 50 }, () => delay());
      assert.deepEqual(fields(body([...half, { type: 'condition', if: { status: 'subscribed' }, then: half }])), ['steps']);
      // Refused early: a hundred thousand bad steps yield one detail.
      assert.deepEqual(fields(body(Array.from({ length: 100_000 }, () => ({ type: 'nope' })))), ['steps']);
    });
  });

  describe('parseAutomation: hostile bodies are a validation_error and nothing else', () => {
    it('bounds deep nesting', () => {
      let steps: unknown[] = [delay()];
      for (let i = 0; i < 10_000; i++) steps = [{ type: 'condition', if: { status: 'subscribed' }, then: steps, else: steps }];
      const deep = fields(body(steps));
      assert.equal(deep.length, 32); // the lists at depth 6 of a binary tree 5 lists deep, each refused unwalked
      for (const f of deep) assert.match(f, /^steps\[0\](\.(then|else)\[0\]){4}\.(then|else)$/);
      let arr: unknown = 'x';
      for (let i = 0; i < 10_000; i++) arr = [arr];
      let obj: unknown = {};
      for (let i = 0; i < 10_000; i++) obj = { a: obj };
      refusal(body(arr));
      refusal(body([arr]));
      refusal(body([delay(arr)]));
      refusal(body([delay(), { type: 'condition', if: obj, then: arr }]));
      refusal(body([{ type: 'condition', if: { property: 'p', equals: obj }, then: [] }]));
      refusal(body([send(obj)]));
      refusal(body([send({ slug: 'x', version: obj })]));
      refusal(body([{ ...send(), tags: [{ name: arr, value: obj }], kind: obj }]));
      refusal(body([{ type: 'update_contact', properties: obj, topics: arr }]));
      refusal(body([{ type: 'update_contact', properties: { a: obj }, topics: [arr, obj] }]));
      refusal({ name: obj, trigger: obj, steps: [delay()], enabled: arr });
    });

    it('treats __proto__ as a plain key, never as a prototype', () => {
      const step = JSON.parse('{"type":"delay","duration":5,"__proto__":{"polluted":true}}');
      const [d] = refusal(body([step]));
      assert.equal(d.field, 'steps[0]');
      assert.match(d.message, /__proto__/);
      assert.deepEqual(
        fields(JSON.parse('{"name":"n","trigger":{"event":"e"},"steps":[{"type":"delay","duration":1}],"__proto__":{"x":1}}')),
        [''],
      );
      assert.deepEqual(fields(body([JSON.parse('{"type":"condition","if":{"__proto__":{"status":"subscribed"}},"then":[]}')])), [
        'steps[0].if',
      ]);
      assert.deepEqual(fields(body([JSON.parse('{"type":"update_contact","properties":{"__proto__":{"polluted":true}}}')])), [
        'steps[0].properties.__proto__',
      ]);
      // An inherited field is no field: `then` on Object.prototype would otherwise fill in a condition.
      assert.deepEqual(fields(body([Object.assign(Object.create({ duration: 5 }), { type: 'delay' })])), ['steps[0].duration']);

      // A valid property named __proto__ stays an own key of a null-prototype object.
      const parsed = parseAutomation(body([JSON.parse('{"type":"update_contact","properties":{"__proto__":"x"}}')]));
      const props = (parsed.definition.steps[0] as Extract<AutomationStep, { type: 'update_contact' }>).properties!;
      assert.equal(Object.getPrototypeOf(props.set), null);
      assert.deepEqual(Object.keys(props.set), ['__proto__']);
      assert.equal(JSON.stringify(props.set), '{"__proto__":"x"}');
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });

    it('refuses NUL characters', () => {
      assert.deepEqual(fields(body([delay()], { name: 'a\u0000b' })), ['name']);
      assert.deepEqual(fields(body([delay()], { trigger: { event: 'e\u0000' } })), ['trigger.event']);
      assert.deepEqual(fields(body([{ type: 'wait_for_event', event: '\u0000', timeout: 5 }])), ['steps[0].event']);
      assert.deepEqual(fields(body([{ ...send(), from: 'a\u0000@b.test' }])), ['steps[0].from']);
      assert.deepEqual(fields(body([send({ slug: 'a\u0000' })])), ['steps[0].template']);
      assert.deepEqual(fields(body([{ ...send(), tags: [{ name: 'a', value: 'b\u0000' }] }])), ['steps[0].tags[0].value']);
      assert.deepEqual(fields(body([{ type: 'condition', if: { property: 'p', equals: '\u0000' }, then: [] }])), ['steps[0].if.equals']);
      assert.deepEqual(fields(body([{ type: 'update_contact', properties: { p: 'x\u0000' } }])), ['steps[0].properties.p']);
      const [d] = refusal(body([{ type: 'delay', duration: 5, 'a\u0000': 1 }]));
      assert.ok(!d.message.includes('\u0000'));
    });

    it('lists at most about 50 problems', () => {
      const steps = Array.from({ length: 100 }, () => ({ type: 'delay', duration: 'never' }));
      const details = refusal(body(steps));
      assert.equal(details.length, 51);
      assert.equal(details[50].message, 'problems past the first 50 are not listed');
      const props = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`bad key ${i}`, 1]));
      assert.equal(refusal(body([{ type: 'update_contact', properties: props }])).length, 51);
    });
  });

  describe("parseAutomation: the send's rules for kind and tags", () => {
    const tagged = (tags: unknown, kind?: unknown) => body([{ ...send(), tags, ...(kind === undefined ? {} : { kind }) }]);
    const sendRefuses = (fields: Record<string, unknown>) => !sendEmailSchema.pick(['kind', 'tags']).isValidSync(fields);

    it('accepts and refuses what a send does', () => {
      const twenty = Array.from({ length: 20 }, (_, i) => ({ name: `n${i}`, value: 'v' }));
      const longest = [{ name: 'n'.repeat(64), value: 'v'.repeat(256) }];
      for (const tags of [twenty, longest, []]) {
        assert.ok(!sendRefuses({ tags }));
        assert.deepEqual((parseAutomation(tagged(tags)).definition.steps[0] as { tags: unknown }).tags, tags);
      }
      for (const [tags, field] of [
        [[...twenty, { name: 'x', value: 'y' }], 'steps[0].tags'],
        [[{ name: 'n'.repeat(65), value: 'v' }], 'steps[0].tags[0].name'],
        [[{ name: 'n', value: 'v'.repeat(257) }], 'steps[0].tags[0].value'],
        [[{ name: 'n\r', value: 'v' }], 'steps[0].tags[0].name'],
        [[{ name: 'n' }], 'steps[0].tags[0].value'],
      ] as const) {
        assert.ok(sendRefuses({ tags }), field);
        assert.deepEqual(fields(tagged(tags)), [field], JSON.stringify(tags).slice(0, 80));
      }
      assert.equal((parseAutomation(tagged([], 'digest.weekly')).definition.steps[0] as { kind: unknown }).kind, 'digest.weekly');
      assert.ok(sendRefuses({ kind: 'k'.repeat(65) }));
      assert.deepEqual(fields(tagged([], 'k'.repeat(65))), ['steps[0].kind']);
    });

    it('refuses a long list of tags without walking it, and never prints a value', () => {
      assert.deepEqual(fields(tagged(Array.from({ length: 100_000 }, () => ({ name: 5 })))), ['steps[0].tags']);
      const huge = 'x'.repeat(100_000);
      for (const d of refusal(tagged([{ name: { huge }, value: [huge] }], { huge }))) assert.ok(d.message.length < 200, d.message);
    });
  });

  describe('parseAutomation: each problem once, its message naming the field', () => {
    it('gives one detail per refused field, nulls included', () => {
      assert.deepEqual(fields({ name: null, enabled: null, trigger: null, steps: null }), ['name', 'enabled', 'trigger', 'steps']);
      assert.deepEqual(fields(body([{ type: 'condition', if: null, then: null, else: null }])), [
        'steps[0].if',
        'steps[0].then',
        'steps[0].else',
      ]);
      assert.deepEqual(fields(body([{ type: 'send_email', from: null, template: null, kind: null, tags: null }])), [
        'steps[0].from',
        'steps[0].kind',
        'steps[0].template',
        'steps[0].tags',
      ]);
    });

    it('names the whole path in nested messages and in the summary', () => {
      const input = body([
        delay(),
        { type: 'condition', if: { status: 'subscribed' }, then: [{ type: 'wait_for_event', event: '', timeout: 5 }] },
      ]);
      const [d] = refusal(input);
      assert.equal(d.field, 'steps[1].then[0].event');
      assert.match(d.message, /^steps\[1\]\.then\[0\]\.event /);
      assert.throws(() => parseAutomation(body([{ type: 'delay', duration: 5, foo: 1 }])), {
        message: 'invalid automation: steps[0] unknown field(s): foo',
      });
    });
  });
});
