import { gunzip } from 'node:zlib';
import { promisify } from 'node:util';
import type Koa from 'koa';
import type { Orm } from '../../db/orm';
import { hostingByToken, insertTlsReport, servedHosting } from '../../db/sql/mta-sts-hosting';
import { hostOfPolicyRequest, policyText } from '../../core/domains/mta-sts-hosting';
import { countsFor, parseTlsReport } from '../../core/domains/tls-report';
import { ServiceError, notFound, validationError } from '../../core/errors';
import { parseJson } from '../middleware/json-body';
import { apiRouter } from '../state';

export interface MtaStsRoutesDeps {
  orm: Orm;
}

/** A real report is a few kilobytes; a day of a large sender's failure details stays well under these. */
export const MAX_REPORT_BYTES = 1024 * 1024;
/** The cap on a gzip report's inflated size: a small bomb must not become gigabytes in memory. */
export const MAX_INFLATED_BYTES = 4 * 1024 * 1024;

const inflate = promisify(gunzip);
const TOKEN = /^[0-9a-f]{32}$/;

/**
 * MTA-STS for the return-path hosts, no API key:
 * - `GET /.well-known/mta-sts.txt` on `mta-sts.<host>` (the operator's CNAME to this service; the
 *   Host header names the host): the policy (RFC 8461 §3.3: 200, text/plain, no redirect), for a
 *   host a live domain has as its return path; anything else 404.
 * - `POST /tlsrpt/<token>`: a TLS-RPT report (RFC 8460 §5.3), application/tlsrpt+json or
 *   application/tlsrpt+gzip; the token (from the host's `_smtp._tls` record) names the host, and
 *   only that host's counts are kept. Sent again, a report adds nothing.
 */
export function mtaStsRoutes(deps: MtaStsRoutesDeps) {
  const router = apiRouter();

  router.get('/.well-known/mta-sts.txt', async (ctx) => {
    const host = hostOfPolicyRequest(ctx.hostname);
    const hosting = host && (await servedHosting(deps.orm, host));
    if (!hosting) throw notFound('MTA-STS policy');
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = policyText(hosting);
  });

  router.post('/tlsrpt/:token', async (ctx) => {
    // The address first: a token we did not issue (in any other case, too) is no route to anything.
    const token = ctx.params.token;
    const hosting = TOKEN.test(token) ? await hostingByToken(deps.orm, token) : null;
    if (!hosting) throw notFound('report address');
    const type = ctx.get('content-type').split(';')[0].trim().toLowerCase();
    if (type !== 'application/tlsrpt+json' && type !== 'application/tlsrpt+gzip') {
      throw new ServiceError('unsupported_media_type', 'Content-Type must be application/tlsrpt+json or application/tlsrpt+gzip');
    }
    const raw = await readRaw(ctx, MAX_REPORT_BYTES);
    const json = type === 'application/tlsrpt+gzip' ? await inflated(raw) : raw;
    const report = parseTlsReport(parseJson(json.toString('utf8')));
    if ('error' in report) throw validationError(report.error);
    const counts = countsFor(report, hosting.host);
    if (!counts) throw validationError(`the report has no policy for ${hosting.host}`);
    const stored = await insertTlsReport(deps.orm, {
      host: hosting.host,
      reporter: report.reporter,
      reportId: report.reportId,
      day: report.day,
      ...counts,
      at: new Date(),
    });
    ctx.status = stored ? 201 : 200;
    ctx.body = { stored, duplicate: !stored };
  });

  return router;
}

async function inflated(raw: Buffer): Promise<Buffer> {
  try {
    return await inflate(raw, { maxOutputLength: MAX_INFLATED_BYTES });
  } catch (err) {
    if (err instanceof RangeError) throw new ServiceError('payload_too_large', `the report inflates beyond ${MAX_INFLATED_BYTES} bytes`);
    throw new ServiceError('invalid_body', 'the report is not gzip data');
  }
}

/** The body, refused past `limit` bytes without buffering the rest. */
function readRaw(ctx: Koa.Context, limit: number): Promise<Buffer> {
  const tooLarge = () => new ServiceError('payload_too_large', `the report exceeds ${limit} bytes`);
  if (Number(ctx.get('content-length') || NaN) > limit) throw tooLarge();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    ctx.req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        ctx.req.resume();
        return reject(tooLarge());
      }
      chunks.push(chunk);
    });
    ctx.req.on('end', () => {
      if (!failed) resolve(Buffer.concat(chunks));
    });
    ctx.req.on('error', () => {
      if (!failed) reject(new ServiceError('invalid_body', 'request body could not be read'));
    });
  });
}
