import type Koa from 'koa';
import { ApiError, validationError } from '../errors';

/**
 * Reads a JSON body with a byte limit. Wrong content type, malformed JSON and oversized bodies
 * each get their own status and code, and nothing past the limit is buffered.
 */
export function readJsonBody(ctx: Koa.Context, limitBytes: number): Promise<unknown> {
  const type = ctx.request.type;
  if (type !== 'application/json') {
    throw new ApiError(415, 'unsupported_media_type', 'Content-Type must be application/json');
  }
  const declared = Number(ctx.get('content-length') || NaN);
  if (declared > limitBytes) throw tooLarge(limitBytes);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    const req = ctx.req;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limitBytes) {
        failed = true;
        req.resume();
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (failed) return;
      const raw = Buffer.concat(chunks).toString('utf8');
      if (raw.trim() === '') return reject(new ApiError(400, 'invalid_json', 'request body is empty; a JSON body is required'));
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch (e) {
        return reject(new ApiError(400, 'invalid_json', `request body is not valid JSON: ${(e as Error).message}`));
      }
      try {
        resolve(storableStrings(parsed, raw));
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', (e) => {
      if (!failed) reject(new ApiError(400, 'invalid_body', `request body could not be read: ${e.message}`));
    });
  });
}

function tooLarge(limit: number): ApiError {
  return new ApiError(413, 'payload_too_large', `request body exceeds ${limit} bytes`);
}

const toWellFormed = (s: string): string => (s as unknown as { toWellFormed(): string }).toWellFormed();

/**
 * Makes every string of a parsed body storable in PostgreSQL, or refuses the body. Both cases can
 * only come from JSON escapes, so bodies without them (nearly all) are not walked:
 * - NUL (`\u0000`): text and jsonb cannot hold it, so it is a validation error naming the field;
 * - a lone surrogate (`\ud800`): not encodable in UTF-8, so it becomes U+FFFD, as any UTF-8
 *   encoder does (the message is stored; PostgreSQL's JSON parser would otherwise refuse it).
 */
function storableStrings(value: unknown, raw: string): unknown {
  const nul = raw.includes('\\u0000');
  const surrogate = /\\u[dD][89a-fA-F]/.test(raw);
  if (!nul && !surrogate) return value;
  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') {
      if (nul && v.includes('\u0000'))
        throw validationError(`${path || 'body'} must not contain NUL characters`, [{ field: path, message: 'contains a NUL character' }]);
      return surrogate ? toWellFormed(v) : v;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`));
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      // defineProperty, not assignment: a "__proto__" key stays a plain key, as JSON.parse made it.
      for (const [k, x] of Object.entries(v)) {
        Object.defineProperty(out, walk(k, path) as string, {
          value: walk(x, path ? `${path}.${k}` : k),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    return v;
  };
  return walk(value, '');
}
