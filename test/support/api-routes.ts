import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The routes the API declares, read from its sources: `router.<method>('<path>'` under each
 * router's prefix, as `METHOD /path` with every parameter written `:x`. The fuzz covers each of
 * them (test/api/fuzz.test.ts) and the OpenAPI document describes each one under /api/v1
 * (test/api/openapi.test.ts).
 */
export function declaredRoutes(): string[] {
  const files = (dir: string): string[] =>
    fs
      .readdirSync(path.join(ROOT, dir), { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  return files('api')
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => {
      const src = fs.readFileSync(path.join(ROOT, f), 'utf8');
      // `root` is the app's own router (no prefix); a `router` lives under its file's prefix, else /api/v1.
      const prefix = /apiRouter\('([^']+)'\)/.exec(src)?.[1] ?? (f.startsWith(path.join('api', 'public')) ? '' : '/api/v1');
      return [...src.matchAll(/\b(router|root)\.(get|post|put|patch|delete)\(\s*'([^']*)'/g)].map(
        (m) => `${m[2].toUpperCase()} ${((m[1] === 'root' ? '' : prefix) + (m[3] === '/' ? '' : m[3])).replace(/:[a-z_]+/g, ':x')}`,
      );
    });
}
