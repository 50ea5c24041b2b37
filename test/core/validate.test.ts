import assert from 'node:assert/strict';
import * as yup from 'yup';
import { ValidationError, type AnySchema } from 'yup';
import { validate, bodySchema, plainMessage } from '../../core/validate';
import { ServiceError } from '../../core/errors';
import { sendEmailSchema, templatedSendSchema } from '../../core/emails/schema';
import { createTopicSchema } from '../../api/topics/schema';

/** yup's own answer with every declared field checked: the reference narrowing must match. */
function whole(schema: AnySchema, value: unknown): { ok: unknown } | { errors: { field: string; message: string }[] } {
  try {
    return { ok: schema.validateSync(value, { abortEarly: false }) };
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return { errors: (err.inner.length ? err.inner : [err]).map((x) => ({ field: x.path ?? '', message: plainMessage(x.message) })) };
  }
}

function narrowedAnswer(schema: AnySchema, value: unknown): ReturnType<typeof whole> {
  try {
    return { ok: validate(schema, value) };
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return { errors: (err.details ?? []) as { field: string; message: string }[] };
  }
}

describe('Core: validation checks only the fields a body has, with the same answers', () => {
  const send = { from: 'Ann <ann@example.com>', to: 'bob@example.com', subject: 'Hi', html: '<p>hi</p>' };
  const bodies: unknown[] = [
    send,
    { ...send, text: 'hi', tags: [{ name: 'a', value: 'b' }], track: { opens: true } },
    {},
    { to: 'bob@example.com' },
    { ...send, subject: 5, html: ['x'] },
    { ...send, from: 'not an address', cc: ['x@example.com', 'nope'] },
    { ...send, surprise: 1 },
    JSON.parse('{"__proto__": {"x": 1}, "from": "a@example.com"}'),
    { ...send, constructor: 'x' },
    { ...send, tags: [{ name: 'a', value: 'b', extra: 1 }], track: { opens: 'yes' } },
    { ...send, headers: { 'X-A': 'b\r\nBcc: c@example.com' } },
    { ...send, attachments: [{ filename: 'a.txt', content: '###' }] },
    { ...send, track: undefined, kind: undefined },
  ];

  it('gives yup`s whole-schema answer for sends, templated sends and a managed resource, valid or not', () => {
    for (const schema of [sendEmailSchema, templatedSendSchema, createTopicSchema] as AnySchema[]) {
      for (const body of bodies) {
        assert.deepEqual(narrowedAnswer(schema, body), whole(schema, body), JSON.stringify(body));
      }
    }
  });

  it('still refuses a missing required field and names unknown fields', () => {
    const schema = bodySchema({ name: yup.string().strict().required(), note: yup.string().strict().max(3) });
    assert.deepEqual(narrowedAnswer(schema, {}), { errors: [{ field: 'name', message: 'name is a required field' }] });
    assert.deepEqual(narrowedAnswer(schema, { name: 'a', other: 1 }), { errors: [{ field: '', message: 'unknown field(s): other' }] });
    assert.deepEqual(narrowedAnswer(schema, { name: 'a', note: 'long' }), {
      errors: [{ field: 'note', message: 'note must be at most 3 characters' }],
    });
    assert.deepEqual(narrowedAnswer(schema, { name: 'a' }), { ok: { name: 'a' } });
  });

  it('runs no rule of a field the body does not have, unless the field fails when absent', () => {
    let optionalRuns = 0;
    let guardRuns = 0;
    const schema = bodySchema({
      name: yup.string().strict().required(),
      note: yup.string().test('counted', 'never', () => (optionalRuns++, true)),
      // Fails when absent without being `required`: it is found so once and always checked.
      guard: yup.mixed().test('present', 'guard must be given', (v) => (guardRuns++, v !== undefined)),
    });
    assert.deepEqual(narrowedAnswer(schema, { name: 'a' }), { errors: [{ field: 'guard', message: 'guard must be given' }] });
    assert.deepEqual(narrowedAnswer(schema, { name: 'a', guard: 1 }), { ok: { name: 'a', guard: 1 } });
    assert.equal(optionalRuns, 1, 'the absent optional field ran only while its plan was made');
    assert.ok(guardRuns >= 3);
  });

  it('leaves non-strict schemas whole, so their defaults still apply', () => {
    const query = yup.object({ limit: yup.number().default(25), cursor: yup.string() });
    assert.deepEqual(validate(query, {}), { limit: 25 });
  });

  it('words a wrong type as a person would, not as yup does (issue 51)', () => {
    const schema = bodySchema({
      name: yup.string().strict(),
      tags: yup.array().strict(),
      meta: yup.object().strict(),
      n: yup.number().strict(),
    });
    const answer = narrowedAnswer(schema, { name: true, tags: 'x', meta: 1, n: 'one' });
    assert.deepEqual(answer, {
      errors: [
        { field: 'name', message: 'name must be a string' },
        { field: 'tags', message: 'tags must be an array' },
        { field: 'meta', message: 'meta must be an object' },
        { field: 'n', message: 'n must be a number' },
      ],
    });
    assert.equal(plainMessage('subject must be at most 998 characters'), 'subject must be at most 998 characters');
  });
});
