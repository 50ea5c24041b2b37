import assert from 'node:assert/strict';
import { ServiceError } from '../../core/errors';
import { bindData, parseVariables } from '../../core/templates/variables';
import { analyzePart } from '../../core/templates/language';
import { checkPublishable, compileTemplate, renderTemplate, type TemplateContent } from '../../core/templates/render';
import { parseTemplateRequest } from '../../core/templates/request';

const fieldsOf = (fn: () => unknown, code: string) => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ServiceError, String(err));
    assert.equal(err.code, code, err.message);
    return (err.details ?? []).map((d) => d.field).sort();
  }
  assert.fail(`expected ${code}`);
};

describe('core: templates', () => {
  const vars = parseVariables([
    { key: 'user.first_name', type: 'string', fallback: 'there' },
    { key: 'user.age', type: 'number' },
    { key: 'vip', type: 'boolean' },
  ]);

  it('binds dotted and nested data into a prototype-less context, with fallbacks', () => {
    const ctx = bindData(vars, { 'user.age': 3, vip: false }, 'refuse') as { user: Record<string, unknown>; vip: boolean };
    assert.equal(Object.getPrototypeOf(ctx), null);
    assert.deepEqual({ ...ctx.user }, { first_name: 'there', age: 3 });
    const nested = bindData(vars, { user: { first_name: 'Ann', age: 0 }, vip: true }, 'refuse') as { user: Record<string, unknown> };
    assert.equal(nested.user.first_name, 'Ann');
    assert.equal(nested.user.age, 0, 'zero is a value, not a missing one');
    const nullFallsBack = bindData(vars, { user: { first_name: null, age: 1 }, vip: true }, 'refuse') as { user: Record<string, unknown> };
    assert.equal(nullFallsBack.user.first_name, 'there', 'null counts as no value');
  });

  it('names every missing, mistyped and undeclared key, and ignores undeclared ones when told to', () => {
    assert.deepEqual(
      // As JSON parses it: `__proto__` is an own key like any other.
      fieldsOf(
        () => bindData(vars, JSON.parse('{"user": {"age": "old", "x": 1}, "__proto__": {"vip": true}, "other": [1]}'), 'refuse'),
        'template_variables',
      ),
      ['data.__proto__', 'data.other', 'data.user.age', 'data.user.x', 'data.vip'],
    );
    assert.deepEqual(
      fieldsOf(() => bindData(vars, { 'user.age': 1, user: { age: 2 }, vip: true }, 'refuse'), 'template_variables'),
      ['data.user.age'],
    );
    assert.deepEqual(
      fieldsOf(() => bindData(vars, { 'user.age': Infinity, vip: true }, 'refuse'), 'template_variables'),
      ['data.user.age'],
    );
    const lenient = bindData(vars, { 'user.age': 1, vip: true, first_name: 'x', nested: { a: 1 } }, 'ignore') as Record<string, unknown>;
    assert.deepEqual(Object.keys(lenient).sort(), ['user', 'vip'], 'undeclared keys are not used');
  });

  it('collects the variables a part uses and refuses what the language does not have', () => {
    const { used, faults } = analyzePart(
      'html',
      '{{a.b}} {{#if c}}{{d}}{{else if e}}{{f}}{{else}}{{g}}{{/if}} {{#unless h}}x{{/unless}} {{! note }} {{this.i}}',
    );
    assert.deepEqual(faults, []);
    assert.deepEqual([...used].sort(), ['a.b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    for (const source of [
      '{{{raw}}}',
      '{{& raw}}',
      '{{#each x}}{{/each}}',
      '{{#x}}{{/x}}',
      '{{> p}}',
      '{{x y}}',
      '{{x a=1}}',
      '{{@index}}',
      '{{../x}}',
      '{{"lit"}}',
      '{{#if (x y)}}{{/if}}',
      '{{#if a b}}{{/if}}',
      '{{x',
    ]) {
      assert.ok(analyzePart('html', source).faults.length > 0, source);
    }
    assert.deepEqual(analyzePart('text', '{{{raw}}}').faults, [], 'unescaped output is the same as escaped outside html');
  });

  it('renders: escaped in html only, strict types, the subject rules, text from html', () => {
    const content: TemplateContent = {
      subject: '{{user.first_name}} & you',
      html: '<p>{{user.first_name}}</p>{{#if vip}}<b>VIP</b>{{/if}}',
      text: null,
      variables: vars,
    };
    checkPublishable(content);
    const compiled = compileTemplate(content);
    const r = renderTemplate(compiled, { user: { first_name: '<i>', age: 1 }, vip: true }, 'refuse');
    assert.equal(r.subject, '<i> & you');
    assert.equal(r.html, '<p>&lt;i&gt;</p><b>VIP</b>');
    assert.equal(r.text, '<i>\n\nVIP');
    assert.deepEqual(
      fieldsOf(() => renderTemplate(compiled, { user: { first_name: 'a\nb', age: 1 }, vip: true }, 'refuse'), 'template_variables'),
      ['subject'],
    );
    assert.deepEqual(
      fieldsOf(() => checkPublishable({ ...content, html: '{{nope}}', subject: '{{also}}' }), 'validation_error'),
      ['variables', 'variables'],
    );
    assert.deepEqual(
      fieldsOf(() => checkPublishable({ ...content, html: null }), 'validation_error'),
      ['html'],
    );
  });

  it('reads the send template object: one of id and slug, a version number or latest, data an object', () => {
    assert.deepEqual(parseTemplateRequest({ slug: 'welcome', version: 'latest' }).ref, { id: null, slug: 'welcome', version: null });
    assert.equal(parseTemplateRequest({ id: 'nope' }).unresolvable, true);
    assert.equal(parseTemplateRequest({ slug: 'Nope' }).unresolvable, true);
    for (const bad of [
      {},
      { id: 'a', slug: 'b' },
      { id: 1 },
      { slug: 'a', version: 1.5 },
      { slug: 'a', version: '2' },
      { slug: 'a', data: 'x' },
      { slug: 'a', x: 1 },
      null,
      [],
    ]) {
      fieldsOf(() => parseTemplateRequest(bad), 'validation_error');
    }
  });
});
