/**
 * The only home of uWebSockets.js. Owns the HTTP App, the JSON API plumbing (body cap, request
 * id, error envelope) and raw byte responses for HLS. Follows the uWS rules (STYLE.md): request data
 * copied before any await, onAborted before anything async, writes corked, bytes not strings.
 */
import uWS from 'uWebSockets.js';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Logger } from '../log/logger.js';

export type HttpMethod = 'get' | 'post' | 'patch' | 'put' | 'del' | 'head' | 'options';

/** What a JSON API handler sees: everything copied out of uWS's stack-allocated request. */
export interface ApiRequest {
  method: string;
  url: string;
  query: URLSearchParams;
  params: string[];
  headers: { authorization: string; contentType: string; idempotencyKey: string; userAgent: string; forwardedFor: string };
  remoteAddress: string;
  requestId: string;
  /** The parsed JSON body (`{}` when the request had none). */
  body: unknown;
  /** Headers added to whatever this request is answered with, errors included (e.g. rate limits). */
  responseHeaders: Record<string, string>;
}

/** What a JSON API handler answers. */
export interface ApiReply {
  status: number;
  body: unknown;
  headers?: Record<string, string> | undefined;
}

export type ApiHandler = (req: ApiRequest) => ApiReply | Promise<ApiReply>;
/** A handler that also gets what the route's `guard` returned (e.g. the authenticated principal). */
export type GuardedApiHandler<C> = (req: ApiRequest, ctx: C) => ApiReply | Promise<ApiReply>;

/** Options of one JSON API route. */
export interface ApiRouteOptions<C = unknown> {
  /** Read a JSON body (default: POST, PATCH, PUT). */
  readBody?: boolean;
  /**
   * Runs synchronously before the body is read (so an unauthenticated client gets its 401/403
   * without the server buffering up to 1 MiB first). Throw an ApiError to refuse; the return value
   * is passed to the handler as `ctx`. `req.body` is still `{}` here.
   */
  guard?: (req: ApiRequest) => C;
}

/** A raw response: pre-rendered bytes and headers (HLS playlists and segments). */
export interface RawReply {
  status: string; // e.g. '200 OK'
  headers: ReadonlyArray<readonly [string, string]>;
  body: Uint8Array | ArrayBuffer;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 304: '304 Not Modified', 400: '400 Bad Request', 401: '401 Unauthorized',
  403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed', 409: '409 Conflict', 413: '413 Payload Too Large',
  415: '415 Unsupported Media Type', 429: '429 Too Many Requests', 500: '500 Internal Server Error', 503: '503 Service Unavailable',
};
/** `200` → `'200 OK'`. */
export const statusLine = (s: number) => STATUS_TEXT[s] ?? `${s} Status`;

/** The error envelope of spec "Errors". */
export function errorBody(e: ApiError, requestId: string) {
  return { error: { type: e.type, code: e.code, message: e.message, ...(e.param !== undefined ? { param: e.param } : {}), requestId } };
}

/** HTTP server options. `maxJsonBodyBytes` caps JSON bodies (bytes); larger → 413 body_too_large. */
export interface HttpServerOptions {
  maxJsonBodyBytes: number;
  log: Logger;
}

/** The HTTP server: register routes, then `listen`. */
export class HttpServer {
  readonly app: uWS.TemplatedApp;
  private listenSocket: uWS.us_listen_socket | null = null;
  /** Registered pattern → its methods as HTTP spells them, for 405 and `Allow`. */
  private readonly patterns = new Map<string, Set<string>>();

  constructor(private readonly opts: HttpServerOptions) {
    this.app = uWS.App();
  }

  /**
   * Registers a JSON API route. `:name` segments become `req.params` in order (percent-decoded; a
   * malformed escape answers 404). Bodies over `maxJsonBodyBytes` → 413 `body_too_large`, malformed
   * or non-object JSON → 400 `invalid_json`, a thrown ApiError → its envelope, anything else → 500
   * `internal_error` without details (logged with the request id).
   */
  api(method: HttpMethod, pattern: string, handler: ApiHandler, opts?: Omit<ApiRouteOptions, 'guard'>): void;
  api<C>(method: HttpMethod, pattern: string, handler: GuardedApiHandler<C>, opts: ApiRouteOptions<C> & { guard: (req: ApiRequest) => C }): void;
  api(method: HttpMethod, pattern: string, handler: GuardedApiHandler<unknown>, opts: ApiRouteOptions = {}): void {
    const readBody = opts.readBody ?? (method === 'post' || method === 'patch' || method === 'put');
    const guard = opts.guard;
    this.addPattern(pattern, method);
    this.app[method](pattern, (res, req) => {
      const requestId = newRequestId();
      const nParams = (pattern.match(/:/g) ?? []).length;
      const params: string[] = [];
      let badParam = false;
      for (let i = 0; i < nParams; i++) {
        const raw = req.getParameter(i) ?? '';
        const decoded = safeDecode(raw);
        if (decoded === null) badParam = true;
        params.push(decoded ?? raw);
      }
      const query = req.getQuery() ?? '';
      const request: ApiRequest = {
        method: req.getMethod().toUpperCase(),
        url: req.getUrl(),
        query: new URLSearchParams(query),
        params,
        headers: {
          authorization: req.getHeader('authorization'),
          contentType: req.getHeader('content-type'),
          idempotencyKey: req.getHeader('idempotency-key'),
          userAgent: req.getHeader('user-agent'),
          forwardedFor: req.getHeader('x-forwarded-for'),
        },
        remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
        requestId,
        body: {},
        responseHeaders: {},
      };
      const contentLength = Number(req.getHeader('content-length') || '0');
      const hasBody = hasRequestBody(req);
      const state = { aborted: false };
      res.onAborted(() => {
        state.aborted = true;
      });
      // A malformed %-escape in a path segment names no object: answer like any unknown id would.
      if (badParam) return this.sendError(res, request.responseHeaders, state, new ApiError(404, 'resource_missing', 'The URL holds a malformed percent-encoded segment.'), requestId);
      let ctx: unknown;
      if (guard) {
        try {
          ctx = guard(request);
        } catch (e) {
          // The body (if any) is not read: close so the connection is not left mid-request.
          return this.sendError(res, request.responseHeaders, state, e, requestId, readBody && hasBody);
        }
      }
      const run = () => {
        let reply: ApiReply | Promise<ApiReply>;
        try {
          reply = handler(request, ctx);
        } catch (e) {
          this.sendError(res, request.responseHeaders, state, e, requestId);
          return;
        }
        if (reply instanceof Promise) {
          reply.then(
            (r) => this.sendJson(res, request.responseHeaders, state, r, requestId),
            (e) => this.sendError(res, request.responseHeaders, state, e, requestId),
          );
        } else this.sendJson(res, request.responseHeaders, state, reply, requestId);
      };
      if (!readBody) return run();
      if (contentLength > this.opts.maxJsonBodyBytes) {
        return this.sendError(res, request.responseHeaders, state, tooLarge(this.opts.maxJsonBodyBytes), requestId, true);
      }
      readJsonBody(res, this.opts.maxJsonBodyBytes, state, (err, body) => {
        if (err) return this.sendError(res, request.responseHeaders, state, err, requestId, err.code === 'body_too_large');
        request.body = body;
        run();
      });
    });
  }

  /** Registers a raw byte route (HLS). The handler runs synchronously and answers at once. */
  raw(method: 'get' | 'head', pattern: string, handler: (params: string[], query: string, requestId: string) => RawReply): void {
    this.addPattern(pattern, method);
    const nParams = (pattern.match(/:/g) ?? []).length;
    this.app[method](pattern, (res, req) => {
      const params: string[] = [];
      for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
      const requestId = newRequestId();
      let r: RawReply;
      try {
        r = handler(params, req.getQuery() ?? '', requestId);
      } catch (e) {
        // An exception escaping a uWS callback ends the process: answer 500 instead.
        return this.sendError(res, {}, { aborted: false }, e, requestId);
      }
      res.writeStatus(r.status);
      for (const [k, v] of r.headers) res.writeHeader(k, v);
      res.writeHeader('X-Request-ID', requestId);
      if (method === 'head') {
        // Not endWithoutBody(length): this uWS build then fails to mark the response ended and
        // aborts the whole process ("Returning from a request handler without responding").
        res.writeHeader('Content-Length', String(r.body.byteLength));
        res.endWithoutBody();
      } else res.end(r.body);
    });
  }

  /** Adds 405 for other methods on every registered pattern and the JSON 404 for everything else. */
  finish(): void {
    for (const [p, methods] of this.patterns) {
      const allow = [...methods].join(', ');
      this.app.any(p, (res, req) => {
        const requestId = newRequestId();
        const method = req.getMethod().toUpperCase();
        this.sendError(
          res,
          {},
          { aborted: false },
          new ApiError(405, 'method_not_allowed', `${method} is not allowed on ${req.getUrl()}; use ${allow}.`, undefined, { Allow: allow }),
          requestId,
          hasRequestBody(req),
        );
      });
    }
    this.app.any('/*', (res, req) => {
      const requestId = newRequestId();
      this.sendError(res, {}, { aborted: false }, new ApiError(404, 'route_not_found', `Unrecognized request URL (${req.getMethod().toUpperCase()} ${req.getUrl()}).`), requestId, hasRequestBody(req));
    });
  }

  private addPattern(pattern: string, method: HttpMethod): void {
    let set = this.patterns.get(pattern);
    if (!set) this.patterns.set(pattern, (set = new Set()));
    set.add(method === 'del' ? 'DELETE' : method.toUpperCase());
  }

  /** Listens on host:port (0 = a free port); resolves to the bound port. @throws Error when the port is taken */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (sock) => {
        if (!sock) return reject(new Error(`cannot listen on http://${host}:${port}`));
        this.listenSocket = sock;
        resolve(uWS.us_socket_local_port(sock as unknown as uWS.us_socket));
      });
    });
  }

  /** Stops accepting connections (open keep-alive connections end with the process). */
  close(): void {
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
  }

  private sendJson(res: uWS.HttpResponse, extra: Record<string, string>, state: { aborted: boolean }, reply: ApiReply, requestId: string): void {
    if (state.aborted) return;
    let body: string;
    try {
      body = JSON.stringify(reply.body);
    } catch (e) {
      // Never let a throw escape into uWS (it would end the process) or into a promise callback.
      return this.sendError(res, extra, state, e, requestId);
    }
    res.cork(() => {
      res.writeStatus(statusLine(reply.status));
      res.writeHeader('Content-Type', 'application/json; charset=utf-8');
      res.writeHeader('X-Request-ID', requestId);
      res.writeHeader('Cache-Control', 'no-store');
      for (const k in extra) res.writeHeader(k, extra[k]!);
      if (reply.headers) for (const k in reply.headers) res.writeHeader(k, reply.headers[k]!);
      res.end(body);
    });
  }

  private sendError(res: uWS.HttpResponse, extra: Record<string, string>, state: { aborted: boolean }, e: unknown, requestId: string, close = false): void {
    if (state.aborted) return;
    let err: ApiError;
    if (e instanceof ApiError) err = e;
    else {
      this.opts.log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
      err = new ApiError(500, 'internal_error', 'An internal error occurred. Quote the request id when you report it.');
    }
    const body = JSON.stringify(errorBody(err, requestId));
    res.cork(() => {
      res.writeStatus(statusLine(err.status));
      res.writeHeader('Content-Type', 'application/json; charset=utf-8');
      res.writeHeader('X-Request-ID', requestId);
      res.writeHeader('Cache-Control', 'no-store');
      for (const k in extra) res.writeHeader(k, extra[k]!);
      for (const k in err.headers) res.writeHeader(k, err.headers[k]!);
      res.end(body, close);
    });
  }
}

/**
 * Whether the request announces a body. An error answered without reading it closes the
 * connection (`end(body, true)`) so that unread body bytes are never parsed as the next request.
 */
function hasRequestBody(req: uWS.HttpRequest): boolean {
  const cl = req.getHeader('content-length');
  return (cl !== '' && cl !== '0') || req.getHeader('transfer-encoding') !== '';
}

/** `decodeURIComponent`, or null for a malformed escape (which would otherwise throw inside uWS and end the process). */
function safeDecode(s: string): string | null {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

const tooLarge = (max: number) => new ApiError(413, 'body_too_large', `The request body is larger than ${max} bytes.`);

/** Reads a JSON body with a byte cap; `{}` for an empty body. */
function readJsonBody(
  res: uWS.HttpResponse,
  max: number,
  state: { aborted: boolean },
  done: (err: ApiError | null, body?: unknown) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  res.onData((ab, isLast) => {
    if (finished) return;
    size += ab.byteLength;
    if (size > max) {
      finished = true;
      return done(tooLarge(max));
    }
    chunks.push(Buffer.from(ab.slice(0))); // uWS neuters the ArrayBuffer on return: copy
    if (!isLast || state.aborted) return;
    finished = true;
    const text = Buffer.concat(chunks, size).toString('utf8');
    if (text.trim() === '') return done(null, {});
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (e) {
      return done(new ApiError(400, 'invalid_json', `The request body is not valid JSON: ${(e as Error).message}`));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return done(new ApiError(400, 'invalid_json', 'The request body must be a JSON object.'));
    }
    done(null, body);
  });
}
