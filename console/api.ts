import type { IncomingMessage, RequestListener } from 'node:http';
import inject from 'light-my-request';
import { CONSOLE_AUTH, type AuthOrganization, type AuthState } from '../core/auth';

/** An answer of the API as the console received it: status and parsed JSON body. */
export interface ApiAnswer<T = any> {
  status: number;
  body: T;
  ok: boolean;
  /** The API's error envelope, when it refused. */
  error?: { code: string; message: string; details?: { field: string; message: string }[] };
}

export interface ApiCall {
  query?: Record<string, string | undefined>;
  body?: unknown;
}

/**
 * The console acts through the API itself, in process: every list, filter, page and write a
 * console page makes is the API route a key would call, with its validation, its rules and its
 * audit row. The operator's authority rides on the request object (CONSOLE_AUTH), never on the wire.
 */
export class ConsoleApi {
  constructor(private readonly handler: () => RequestListener) {}

  async call<T = any>(auth: AuthState, method: string, path: string, opts: ApiCall = {}): Promise<ApiAnswer<T>> {
    const handler = this.handler();
    const dispatch: RequestListener = (req, res) => {
      (req as IncomingMessage & { [CONSOLE_AUTH]?: AuthState })[CONSOLE_AUTH] = auth;
      return handler(req, res);
    };
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') query[k] = v;
    const res = await inject(dispatch, {
      method,
      url: `/api/v1${path}`,
      query,
      ...(opts.body !== undefined ? { payload: JSON.stringify(opts.body), headers: { 'content-type': 'application/json' } } : {}),
    });
    const body = res.payload ? (JSON.parse(res.payload) as T) : (undefined as T);
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const error = ok ? undefined : (body as { error?: ApiAnswer['error'] })?.error;
    return { status: res.statusCode, body, ok, ...(error ? { error } : {}) };
  }
}

/**
 * The authority the console calls the API with for one organization the operator may see (the
 * caller checks): ADMIN, live, every domain. The console is no key: its writes are audited under
 * the operator (the key's id is never written), and it is never rate limited.
 */
export function operatorAuth(org: AuthOrganization, operator: { email: string }): AuthState {
  const organization = { id: org.id, name: org.name, plan: org.plan };
  return {
    key: {
      id: org.id,
      organizationId: org.id,
      name: `console:${operator.email}`,
      permission: 'admin',
      mode: 'live',
      domainIds: null,
      rateLimit: null,
    },
    organization,
    operator: { email: operator.email },
  };
}
