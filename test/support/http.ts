import { checkContract } from './contract';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as-is instead of JSON.stringify(body). */
  raw?: string | Buffer;
  contentType?: string | null;
  headers?: Record<string, string>;
}

/** Real HTTP against the running app. */
export async function request<T = any>(baseUrl: string, method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && opts.contentType !== null) headers['content-type'] = opts.contentType ?? 'application/json';
  const res = await fetch(baseUrl + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Non-JSON bodies (HTML pages) are returned as text.
  }
  // Every answer of /api/v1 against the OpenAPI document (test/support/contract.ts).
  checkContract({ method, path, status: res.status, headers: res.headers, body: parsed });
  return { status: res.status, headers: res.headers, body: parsed as T };
}
