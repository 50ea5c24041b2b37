import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The layers of ../shared/design/layout.md: folders stack one way,
 * `server, cli, bench → api, smtp, console → worker → activities → core → db → workflows`,
 * and an import never runs back up. Besides: only server/ and cli/ (and bench/ and tools/) import api/, and
 * workflows/ imports nothing outside itself but the Temporal workflow SDK in its binding.
 */
const RANK: Record<string, number> = {
  server: 0,
  cli: 0,
  bench: 0,
  tools: 0,
  api: 1,
  smtp: 1,
  console: 1,
  worker: 2,
  activities: 3,
  core: 4,
  db: 5,
  workflows: 6,
};
const MAY_IMPORT_API = new Set(['server', 'cli', 'bench', 'tools', 'api']);
const ROOT = path.resolve(__dirname, '..');

/** Every module specifier a TypeScript file imports (static, dynamic, require, re-export). */
export function importsOf(source: string): string[] {
  const found: string[] = [];
  const re = /(?:\bfrom\s+|\bimport\s*\(\s*|\brequire(?:\.resolve)?\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;
  for (let m = re.exec(source); m; m = re.exec(source)) found.push(m[1]);
  return found;
}

/** The layering rules broken by one file (path relative to the repository) importing `spec`. */
export function violations(file: string, spec: string): string[] {
  const from = file.split('/')[0];
  if (!(from in RANK)) return [];
  if (!spec.startsWith('.')) {
    if (from !== 'workflows') return [];
    const allowed = file.startsWith('workflows/temporal/') && spec === '@temporalio/workflow';
    return allowed ? [] : [`${file}: workflows import nothing outside workflows/ (${spec})`];
  }
  const target = path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec)).split(path.sep)[0];
  if (target === from || !(target in RANK)) {
    return target in RANK || target === 'package.json' ? [] : [`${file}: imports ${spec}, outside the layers`];
  }
  const out: string[] = [];
  if (RANK[target] < RANK[from]) out.push(`${file}: ${from}/ imports ${target}/, a layer above it (${spec})`);
  if (target === 'api' && !MAY_IMPORT_API.has(from)) out.push(`${file}: only server/ and cli/ import api/ (${spec})`);
  return out;
}

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
    return /\.(ts|js|mjs)$/.test(e.name) ? [rel] : [];
  });
}

describe('Architecture: the layers of shared/design/layout.md', () => {
  it('the checker catches each kind of violation (so a clean run means something)', () => {
    assert.equal(violations('workflows/send-email.ts', '../db/orm').length, 1);
    assert.equal(violations('workflows/send-email.ts', 'node:crypto').length, 1);
    assert.equal(violations('workflows/temporal/binding.ts', '@temporalio/workflow').length, 0);
    assert.equal(violations('db/sql/store-emails.ts', '../../core/errors').length, 1);
    assert.equal(violations('core/emails/accept.ts', '../../worker/engine').length, 1);
    assert.equal(violations('worker/outbox.ts', '../api/state').length, 2);
    assert.equal(violations('smtp/relay.ts', '../api/emails/routes').length, 1);
    assert.equal(violations('cli/svc.ts', '../api/app').length, 0);
    assert.equal(violations('api/app.ts', '../worker/engine').length, 0);
    assert.equal(violations('activities/send-email.ts', '../core/emails/address').length, 0);
    assert.deepEqual(
      importsOf(
        `import a from './a';\nimport type { B } from "../b";\nexport { c } from './c';\nconst d = require('./d');\nimport('./e');\nimport './f';`,
      ),
      ['./a', '../b', './c', './d', './e', './f'],
    );
  });

  it('no import runs back up a layer, api/ is imported only by server/ and cli/, workflows/ stands alone', () => {
    const broken = Object.keys(RANK)
      .filter((dir) => fs.existsSync(path.join(ROOT, dir)))
      .flatMap(sources)
      .flatMap((file) =>
        importsOf(fs.readFileSync(path.join(ROOT, file), 'utf8')).flatMap((spec) => violations(file.split(path.sep).join('/'), spec)),
      );
    assert.deepEqual(broken, []);
  });
});

/** Product code: what the service runs and its operator tools (migrations are history, not read as code). */
const PRODUCT = ['api', 'smtp', 'console', 'worker', 'activities', 'core', 'db', 'workflows', 'server', 'cli', 'bench', 'tools'];
const productFiles = () =>
  PRODUCT.filter((dir) => fs.existsSync(path.join(ROOT, dir)))
    .flatMap(sources)
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => !f.startsWith('db/migrations/'));

describe('Architecture: files a newcomer can hold in their head', () => {
  it('one send path: only core/emails/submit.ts runs the steps of accepting mail (prepare, render, store)', () => {
    const STEP_CALL = /\b(prepareEmail|renderTemplatedEmails|acceptEmails)\s*\(/;
    assert.ok(STEP_CALL.test('const [r] = await acceptEmails(deps, credentials, [item], opts);'), 'the checker sees a call');
    const steps = new Set(['core/emails/submit.ts', 'core/emails/prepare.ts', 'core/emails/render-templates.ts', 'core/emails/accept.ts']);
    const callers = productFiles().filter((file) => !steps.has(file) && STEP_CALL.test(fs.readFileSync(path.join(ROOT, file), 'utf8')));
    assert.deepEqual(callers, []);
  });

  it('no product file is over 300 lines unless it says why at its top', () => {
    const REASON = /^(\/\/|\/\*\*?|\s\*|#).*\b(over|longer than) 300 lines\b/im;
    const long = productFiles().filter((file) => {
      const source = fs.readFileSync(path.join(ROOT, file), 'utf8');
      const top = source.split('\n').slice(0, 30).join('\n');
      return source.split('\n').length > 300 && !REASON.test(top);
    });
    assert.deepEqual(long, []);
  });
});
