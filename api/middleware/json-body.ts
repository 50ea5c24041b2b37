import type Koa from 'koa';
import { ApiError } from '../errors';

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
      try {
        resolve(JSON.parse(raw));
      } catch (e) {
        reject(new ApiError(400, 'invalid_json', `request body is not valid JSON: ${(e as Error).message}`));
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
