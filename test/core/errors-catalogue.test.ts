import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../../core/errors';

const ROOT = path.resolve(__dirname, '../..');

/** The rows of docs/api.md's error table: `| status | \`code\` | when |`. */
function documented(): [number, string][] {
  const md = fs.readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');
  const section = md.slice(md.indexOf('## Errors'), md.indexOf('\n## ', md.indexOf('## Errors') + 1));
  return [...section.matchAll(/^\|\s*(\d{3})\s*\|\s*`([a-z_]+)`\s*\|/gm)].map((m) => [Number(m[1]), m[2]]);
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(rel) : e.name.endsWith('.ts') ? [rel] : [];
  });
}

describe('Core: the error catalogue', () => {
  it('docs/api.md lists exactly the catalogue: each code once, with its status', () => {
    const rows = documented();
    assert.equal(new Set(rows.map(([, c]) => c)).size, rows.length, 'a code listed twice');
    const catalogue = Object.entries(ERRORS).map(([code, e]) => [e.status, code] as [number, string]);
    const key = (r: [number, string]) => `${r[0]} ${r[1]}`;
    assert.deepEqual(rows.map(key).sort(), catalogue.map(key).sort());
  });

  it('every code is used by the service (no dead entries)', () => {
    const text = ['api', 'core', 'smtp', 'server', 'worker']
      .filter((d) => fs.existsSync(path.join(ROOT, d)))
      .flatMap(sourceFiles)
      .filter((f) => f !== path.join('core', 'errors.ts'))
      .map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8'))
      .join('\n');
    // Its helpers (notFound, validationError) use codes too; the catalogue itself does not count.
    const errors = fs.readFileSync(path.join(ROOT, 'core/errors.ts'), 'utf8');
    const helpers = errors.slice(errors.indexOf('export type ErrorCode'));
    const unused = Object.keys(ERRORS).filter(
      (code) => ![text, helpers].some((t) => t.includes(`'${code}'`) || t.includes(`ERRORS.${code}`)),
    );
    assert.deepEqual(unused, []);
  });
});
