import { ServiceError, validationError, type ErrorDetail } from '../errors';
import { isPlainObject } from '../validate';

export type VariableType = 'string' | 'number' | 'boolean';
export type VariableValue = string | number | boolean;

/** A variable a template declares: the only names its parts may use and its data may carry. */
export interface VariableDeclaration {
  key: string;
  type: VariableType;
  fallback?: VariableValue;
}

export const MAX_VARIABLES = 50;
export const MAX_FALLBACK_STRING = 1000;
export const VARIABLE_TYPES: readonly VariableType[] = ['string', 'number', 'boolean'];
/**
 * A dotted path of up to 10 names, each starting with a letter (so `__proto__` and Handlebars'
 * `@data` and `this` never name a variable), 1–128 characters in all.
 */
export const VARIABLE_KEY_RE = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*){0,9}$/;
export const MAX_VARIABLE_KEY = 128;

export const isVariableKey = (k: string) => k.length <= MAX_VARIABLE_KEY && VARIABLE_KEY_RE.test(k);

const typeOf = (v: unknown): VariableType | null =>
  typeof v === 'string' ? 'string' : typeof v === 'number' && Number.isFinite(v) ? 'number' : typeof v === 'boolean' ? 'boolean' : null;

/** Checks a `variables` array (create, update): shapes, unique keys, no key inside another, fallbacks of the declared type. */
export function parseVariables(input: unknown, field = 'variables'): VariableDeclaration[] {
  if (!Array.isArray(input)) throw validationError(`${field} must be an array`, [{ field, message: 'must be an array' }]);
  if (input.length > MAX_VARIABLES) {
    throw validationError(`a template declares at most ${MAX_VARIABLES} variables`, [{ field, message: `more than ${MAX_VARIABLES}` }]);
  }
  const details: ErrorDetail[] = [];
  const out: VariableDeclaration[] = [];
  input.forEach((v, i) => {
    const at = `${field}[${i}]`;
    if (!isPlainObject(v)) return details.push({ field: at, message: 'must be an object {key, type, fallback?}' });
    const unknown = Object.keys(v).filter((k) => k !== 'key' && k !== 'type' && k !== 'fallback');
    if (unknown.length) return details.push({ field: at, message: `unknown field(s): ${unknown.join(', ')}` });
    if (typeof v.key !== 'string' || !isVariableKey(v.key)) {
      return details.push({
        field: `${at}.key`,
        message: 'must be a dotted path of names (letters, digits, _), each starting with a letter',
      });
    }
    if (typeof v.type !== 'string' || !VARIABLE_TYPES.includes(v.type as VariableType)) {
      return details.push({ field: `${at}.type`, message: 'must be string, number or boolean' });
    }
    const decl: VariableDeclaration = { key: v.key, type: v.type as VariableType };
    if (v.fallback !== undefined && v.fallback !== null) {
      if (typeOf(v.fallback) !== decl.type) return details.push({ field: `${at}.fallback`, message: `must be a ${decl.type}` });
      if (typeof v.fallback === 'string' && v.fallback.length > MAX_FALLBACK_STRING) {
        return details.push({ field: `${at}.fallback`, message: `at most ${MAX_FALLBACK_STRING} characters` });
      }
      decl.fallback = v.fallback as VariableValue;
    }
    out.push(decl);
  });
  const keys = new Set<string>();
  for (const d of out) {
    if (keys.has(d.key)) details.push({ field, message: `${d.key} is declared twice` });
    keys.add(d.key);
  }
  // `user` and `user.name` cannot both hold a value: one is a scalar, the other needs `user` to be an object.
  for (const d of out) {
    const parts = d.key.split('.');
    for (let n = 1; n < parts.length; n++) {
      const prefix = parts.slice(0, n).join('.');
      if (keys.has(prefix)) details.push({ field, message: `${prefix} is a variable, so ${d.key} cannot be one` });
    }
  }
  if (details.length) throw validationError(`invalid variables: ${details[0].field}: ${details[0].message}`, details);
  return out;
}

export const templateVariablesError = (details: ErrorDetail[]) =>
  new ServiceError(
    'template_variables',
    `template data does not fit the template: ${details
      .slice(0, 5)
      .map((d) => `${d.field} ${d.message}`)
      .join('; ')}${details.length > 5 ? ` (and ${details.length - 5} more)` : ''}`,
    // A caller's data may hold thousands of keys; the answer names the first 50.
    details.slice(0, 50),
  );

interface Shape {
  byKey: Map<string, VariableDeclaration>;
  /** Every proper prefix of a declared key (`user` for `user.first_name`). */
  prefixes: Set<string>;
  paths: { parents: string[]; leaf: string }[];
}

/** Worked out once per declaration list: a compiled version renders with the same list every time. */
const shapes = new WeakMap<readonly VariableDeclaration[], Shape>();
function shapeOf(declared: readonly VariableDeclaration[]): Shape {
  let shape = shapes.get(declared);
  if (!shape) {
    const paths = declared.map((d) => {
      const parts = d.key.split('.');
      return { parents: parts.slice(0, -1), leaf: parts[parts.length - 1] };
    });
    shape = {
      byKey: new Map(declared.map((d) => [d.key, d])),
      prefixes: new Set(paths.flatMap((p) => p.parents.map((_, i) => p.parents.slice(0, i + 1).join('.')))),
      paths,
    };
    shapes.set(declared, shape);
  }
  return shape;
}

/** What a render may do with data keys the template does not declare. */
export type UndeclaredData = 'refuse' | 'ignore';

/**
 * The context a template renders with: every declared variable, from `data` (nested objects or
 * dotted keys, `{"user.first_name": "Ann"}` and `{user: {first_name: "Ann"}}` alike) or its
 * fallback. A missing value (absent or null) without a fallback, a value of the wrong type and,
 * when `undeclared` is `refuse` (a caller's own data), a key the template does not declare are
 * each named in one 422 `template_variables`. The context is built of prototype-less objects.
 */
export function bindData(declared: readonly VariableDeclaration[], data: unknown, undeclared: UndeclaredData): Record<string, unknown> {
  const details: ErrorDetail[] = [];
  const given = new Map<string, unknown>();
  const { byKey, prefixes, paths } = shapeOf(declared);
  if (data !== undefined && data !== null && !isPlainObject(data)) {
    throw templateVariablesError([{ field: 'data', message: 'must be an object' }]);
  }

  // Leaves of `data` by their dotted path. A value is a leaf unless it is a plain object that a
  // declared key reaches into, so `{"user": {...}}` matches `user.first_name` and an object where a
  // scalar is declared is a wrong type, not an undeclared key.
  const walk = (obj: Record<string, unknown>, prefix: string, depth: number) => {
    for (const [k, v] of Object.entries(obj)) {
      const path = prefix ? `${prefix}.${k}` : k;
      if (isPlainObject(v) && !byKey.has(path) && depth < 10 && prefixes.has(path)) walk(v, path, depth + 1);
      else if (given.has(path)) details.push({ field: `data.${path}`, message: 'is given twice (nested and dotted)' });
      else given.set(path, v);
    }
  };
  if (isPlainObject(data)) walk(data, '', 0);

  const context: Record<string, unknown> = Object.create(null);
  declared.forEach((d, n) => {
    let value = given.get(d.key);
    if (value === undefined || value === null) value = d.fallback;
    if (value === undefined) {
      details.push({ field: `data.${d.key}`, message: 'has no value and the template declares no fallback' });
      return;
    }
    if (typeOf(value) !== d.type) {
      details.push({ field: `data.${d.key}`, message: `must be a ${d.type}` });
      return;
    }
    const { parents, leaf } = paths[n];
    let node = context;
    for (const p of parents) {
      if (!Object.hasOwn(node, p)) node[p] = Object.create(null);
      node = node[p] as Record<string, unknown>;
    }
    node[leaf] = value;
  });
  if (undeclared === 'refuse') {
    for (const path of given.keys()) {
      if (!byKey.has(path)) details.push({ field: `data.${path.slice(0, 200)}`, message: 'is not a variable of this template' });
    }
  }
  if (details.length) throw templateVariablesError(details);
  return context;
}
