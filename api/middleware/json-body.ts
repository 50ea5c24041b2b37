import type Koa from 'koa';
import { ServiceError, validationError } from '../../core/errors';
import { storable } from '../../core/validate';

/** Deepest nesting a body may have. Real bodies stay under 5; validators and walkers recurse, so deeper input is refused outright. */
export const MAX_JSON_DEPTH = 64;

/**
 * Reads a JSON body with a byte limit. Wrong content type, malformed or too deeply nested JSON and
 * oversized bodies each get their own status and code, and nothing past the limit is buffered.
 */
export function readJsonBody(ctx: Koa.Context, limitBytes: number): Promise<unknown> {
  if (!isJsonMediaType(ctx.get('content-type'))) {
    throw new ServiceError('unsupported_media_type', 'Content-Type must be application/json (UTF-8)');
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
      try {
        resolve(parseJson(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', () => {
      if (!failed) reject(new ServiceError('invalid_body', 'request body could not be read'));
    });
  });
}

/** Media types are case-insensitive; a charset, when given, must be UTF-8 (JSON's only encoding, RFC 8259). */
export function isJsonMediaType(header: string): boolean {
  const [type, ...params] = header.split(';');
  if (type.trim().toLowerCase() !== 'application/json') return false;
  return params.every((p) => {
    const eq = p.indexOf('=');
    const name = (eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase();
    return name !== 'charset' || /^"?utf-?8"?$/i.test(p.slice(eq + 1).trim());
  });
}

/** A body's JSON, refused (400 invalid_json) when empty, malformed or nested deeper than MAX_JSON_DEPTH. */
export function parseJson(raw: string): unknown {
  if (raw.trim() === '') throw new ServiceError('invalid_json', 'request body is empty; a JSON body is required');
  // Before parsing: 40 MiB of `[` would otherwise become millions of nested arrays first.
  if (depthExceeds(raw, MAX_JSON_DEPTH)) {
    throw new ServiceError('invalid_json', `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new ServiceError('invalid_json', `request body is not valid JSON: ${(e as Error).message}`);
  }
  return storableStrings(parsed, raw);
}

function tooLarge(limit: number): ServiceError {
  return new ServiceError('payload_too_large', `request body exceeds ${limit} bytes`);
}

/**
 * Whether the JSON text opens an array or object deeper than `max`, by one pass over the text:
 * brackets count outside strings only, and a string is skipped to its closing quote with the
 * native indexOf, so long strings (HTML bodies, attachments) cost next to nothing. Malformed text
 * is left to JSON.parse.
 */
function depthExceeds(raw: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x22) {
      // To the closing quote: one not escaped by an odd run of backslashes.
      for (;;) {
        i = raw.indexOf('"', i + 1);
        if (i < 0) return false;
        let slashes = 0;
        while (raw.charCodeAt(i - 1 - slashes) === 0x5c) slashes++;
        if (slashes % 2 === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * Makes every string of a parsed body storable in PostgreSQL, or refuses the body
 * (core/validate.ts). Both cases can only come from JSON escapes, so bodies without them (nearly
 * all) are not walked.
 */
function storableStrings(value: unknown, raw: string): unknown {
  const nul = raw.includes('\\u0000');
  const surrogate = /\\u[dD][89a-fA-F]/.test(raw);
  if (!nul && !surrogate) return value;
  return storable(value, { nul, surrogate });
}
