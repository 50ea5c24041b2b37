import assert from 'node:assert/strict';
import { plainSendBody } from '../../core/emails/plain-send';
import { MAX_BODY_PART_BYTES, sendEmailSchema, templatedSendSchema } from '../../core/emails/schema';
import { ServiceError } from '../../core/errors';
import { validate } from '../../core/validate';

/** What the schema answers: the body it passes, or the error. */
function bySchema(body: Record<string, unknown>, templated = false): unknown {
  try {
    return validate(templated ? templatedSendSchema : sendEmailSchema, body);
  } catch (err) {
    if (err instanceof ServiceError) return err;
    throw err;
  }
}

const BASE = { from: 'Ann <ann@example.com>', to: 'bob@example.org', subject: 'Hello', text: 'hi' };

/** Values each field is tried with: valid ones first, then ones the schema refuses (or that the fast path leaves to it). */
const VALUES: Record<string, unknown[]> = {
  from: [
    'ann@example.com',
    '"Ann, A." <ann@example.com>',
    ' ann@example.com ',
    '',
    'not an address',
    'a@b.c, d@e.f',
    null,
    7,
    ['ann@example.com'],
  ],
  to: [
    'bob@example.org',
    ['bob@example.org', 'Cy <cy@example.net>'],
    [],
    ['bob@example.org', 'nope'],
    '',
    null,
    [null],
    'a@b.c, d@e.f',
    {},
  ],
  cc: ['cy@example.net', ['cy@example.net'], [], 'bad', null, [3]],
  bcc: ['dee@example.net', ['dee@example.net'], 'bad', null],
  reply_to: ['Ann <ann@example.com>', '', 'bad', null, ['ann@example.com']],
  subject: ['x', 'x'.repeat(998), 'x'.repeat(999), '', 'two\nlines', 'cr\r', null, 3],
  html: ['<p>hi</p>', '', 'é'.repeat(MAX_BODY_PART_BYTES / 2), 'é'.repeat(MAX_BODY_PART_BYTES / 2 + 1), null, 5, ['x']],
  text: ['hi', '', 'x'.repeat(MAX_BODY_PART_BYTES), 'x'.repeat(MAX_BODY_PART_BYTES + 1), null, false],
  idempotency_key: ['k', 'k'.repeat(256), 'k'.repeat(257), '', null, 1],
  kind: ['receipt', 'bulk.news:1_a-b', 'x'.repeat(64), 'x'.repeat(65), '', 'has space', null],
  tags: [
    [],
    [{ name: 'a', value: 'b' }],
    Array.from({ length: 20 }, (_, i) => ({ name: `n${i}`, value: 'v' })),
    Array.from({ length: 21 }, (_, i) => ({ name: `n${i}`, value: 'v' })),
    [{ name: 'a', value: '' }],
    [{ name: '', value: 'b' }],
    [{ name: 'a' }],
    [{ name: 'a', value: 'b', extra: 1 }],
    [{ name: 'a\n', value: 'b' }],
    [{ name: 'x'.repeat(65), value: 'b' }],
    [{ name: 'a', value: 'x'.repeat(257) }],
    [['a', 'b']],
    [null],
    { name: 'a', value: 'b' },
    null,
  ],
  // Fields the fast path leaves to the schema, valid or not.
  headers: [{ 'X-A': 'b' }],
  scheduled_at: ['2030-01-01T00:00:00Z'],
  track: [{ opens: true }],
  topic: ['news'],
  attachments: [[]],
  template: [{ slug: 'x' }],
  unknown_field: [1],
  __proto__: [1],
};

describe('Sends: the common body checked without yup', () => {
  it('answers the body only when the schema passes it unchanged; otherwise leaves it to the schema', () => {
    const bodies: Record<string, unknown>[] = [BASE];
    for (const [field, values] of Object.entries(VALUES))
      // Through JSON, as a request's body arrives (a "__proto__" key stays a plain key).
      for (const v of values)
        bodies.push(JSON.parse(JSON.stringify(BASE).replace(/}$/, `,${JSON.stringify(field)}:${JSON.stringify(v)}}`)));
    // Each required field missing, and every valid value of each field at once.
    for (const field of ['from', 'to', 'subject']) {
      const { [field]: _gone, ...rest } = BASE as Record<string, unknown>;
      bodies.push(rest);
    }
    bodies.push({
      ...BASE,
      cc: 'cy@example.net',
      bcc: ['dee@example.net'],
      reply_to: 'ann@example.com',
      html: '<p>x</p>',
      idempotency_key: 'k',
      kind: 'receipt',
      tags: [{ name: 'a', value: 'b' }],
    });
    // The same bodies with a template instead of the subject and the bodies (templatedSendSchema).
    const templated: Record<string, unknown>[] = bodies.map(({ subject: _s, html: _h, text: _t, ...rest }) => ({
      ...rest,
      template: { slug: 'welcome' },
    }));
    templated.push({ ...templated[0], subject: 'x' }, { ...templated[0], template: null });
    const fast = { plain: 0, templated: 0 };
    for (const [kind, list] of [
      ['plain', bodies],
      ['templated', templated],
    ] as const) {
      for (const body of list) {
        const answer = plainSendBody(body, kind === 'templated');
        const schema = bySchema(body, kind === 'templated');
        if (answer === null) continue;
        fast[kind]++;
        assert.ok(
          !(schema instanceof ServiceError),
          `${kind}: passed here but refused by the schema: ${JSON.stringify(body).slice(0, 200)}: ${(schema as Error)?.message}`,
        );
        assert.equal(answer, body);
        assert.deepEqual(schema, body);
      }
    }
    assert.ok(fast.plain >= 25 && fast.templated >= 20, `${JSON.stringify(fast)} bodies took the fast path`);
  });

  it('takes the fast path for the bodies the benchmark and most clients send', () => {
    assert.notEqual(plainSendBody({ ...BASE, html: '<p>hi</p>' }), null);
    assert.notEqual(plainSendBody({ ...BASE, to: ['a@example.com', 'b@example.com'], tags: [{ name: 'kind', value: 'receipt' }] }), null);
    assert.equal(plainSendBody({ ...BASE, headers: { 'X-A': 'b' } }), null, 'headers: the schema checks them');
    const { subject: _s, text: _t, ...withTemplate } = { ...BASE, template: { slug: 'welcome', data: { a: 1 } } };
    assert.notEqual(plainSendBody(withTemplate, true), null);
    assert.equal(plainSendBody(withTemplate), null, 'a template only where one was parsed');
    assert.equal(plainSendBody(BASE, true), null, 'a subject beside a template: the schema refuses it');
  });
});
