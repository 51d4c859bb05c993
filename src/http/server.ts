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

/**
 * What a JSON API handler sees: everything copied out of uWS's stack-allocated request (the query
 * is parsed on first use; `remoteAddress` reads as '' once the request was answered).
 */
export interface ApiRequest {
  method: string;
  url: string;
  query: URLSearchParams;
  params: string[];
  headers: {
    authorization: string;
    contentType: string;
    idempotencyKey: string;
    userAgent: string;
    forwardedFor: string;
    /** Copied by upload routes only (src/http/upload.ts): `Cookie`, `Origin`, `X-CSRF-Token` for session-authenticated uploads (the dashboard). */
    cookie?: string;
    origin?: string;
    csrfToken?: string;
  };
  remoteAddress: string;
  requestId: string;
  /** The parsed JSON body (`{}` when the request had none). */
  body: unknown;
  /** Headers added to whatever this request is answered with, errors included (e.g. rate limits). */
  responseHeaders: Record<string, string>;
  /**
   * Who the request acts for, set by the route guard once authenticated (the account id). Scopes
   * idempotency keys; when unset, a POST's key is scoped by its `Authorization` header.
   */
  actor?: string;
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
  /** The scope the guard requires (from `guard.scope(…)`): listed by `routes()`, the scope map and OpenAPI. */
  scope?: string;
  /** OpenAPI description of the route (see src/api/openapi/registry.ts `RouteDoc`); opaque here. */
  doc?: unknown;
}

/** Options of a `stream()` route. */
export interface StreamRouteOptions {
  /** The scope the handler's guard requires (listed by `routes()`, the scope map and OpenAPI). */
  scope?: string | undefined;
  /** OpenAPI description (src/api/openapi/registry.ts `RouteDoc`); opaque here. */
  doc?: unknown;
  /** How `routes()` lists it: `api` (JSON answers under /v2, in the OpenAPI document) or `raw` (bytes). */
  kind?: 'api' | 'raw';
}

/** One registered route, as `routes()` lists it. */
export interface RouteInfo {
  /** As HTTP spells it: GET, POST, PATCH, PUT, DELETE, HEAD, OPTIONS. */
  method: string;
  /** The uWS pattern (`/v2/streams/:id`). */
  pattern: string;
  /** `api` JSON routes, `raw` byte routes (HLS), `web` form/HTML routes (OAuth). */
  kind: 'api' | 'raw' | 'web';
  scope?: string | undefined;
  doc?: unknown;
}

/**
 * Idempotency for JSON POSTs carrying `Idempotency-Key` (PRODUCT.md §7), consulted after the body
 * was read and before the handler runs. `begin` throws an ApiError to refuse (400/409), answers a
 * stored reply, or lets the handler run and is told its reply (`null`: nothing to keep, e.g. a 5xx).
 */
export interface IdempotencyHook {
  begin(req: ApiRequest): { kind: 'replay'; reply: ApiReply } | { kind: 'proceed'; complete(reply: ApiReply | null): void };
}

/** What a response observer sees (tests validate every answer against the OpenAPI document with it). */
export interface ObservedResponse {
  method: string;
  /** The matched route pattern; undefined for the 404/405 fallbacks. */
  pattern: string | undefined;
  url: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What a form/HTML handler (the OAuth endpoints) sees. */
export interface WebRequest {
  method: string;
  url: string;
  query: URLSearchParams;
  headers: { authorization: string; contentType: string; cookie: string; origin: string; forwardedFor: string; userAgent: string };
  remoteAddress: string;
  requestId: string;
  /** The raw body (empty for GET). */
  body: Buffer;
}

/** What a form/HTML handler answers; the handler sets Content-Type. */
export interface WebReply {
  status: number;
  headers?: Record<string, string> | undefined;
  body?: string | Uint8Array | undefined;
}

/**
 * A raw reply given later (LL-HLS blocking playlist reload, preload hints): `defer` gets an
 * `answer` function to call once (with a function that renders the reply at that moment) and
 * returns a cancel function, called if the client goes away first.
 */
export interface DeferredReply {
  defer(answer: (reply: () => RawReply) => void): () => void;
}

/** Writes a RawReply (status, headers, X-Request-ID, body; HEAD: length only). */
const X_REQUEST_ID = Buffer.from('X-Request-ID', 'latin1');

function writeRaw(res: uWS.HttpResponse, method: 'get' | 'head', r: RawReply, requestId: string): void {
  res.writeStatus(r.status);
  for (const [k, v] of r.headers) res.writeHeader(k, v);
  res.writeHeader(X_REQUEST_ID, requestId);
  if (method === 'head') {
    // Not endWithoutBody(length): this uWS build then fails to mark the response ended and
    // aborts the whole process ("Returning from a request handler without responding").
    res.writeHeader('Content-Length', String(r.body.byteLength));
    res.endWithoutBody();
  } else res.end(r.body);
}

/** What a raw (HLS) handler may read of its request while it runs (synchronously). */
export interface RawRequestInfo {
  /** A request header by lower-case name ('' when absent). */
  header(name: string): string;
  /** The socket peer's address as text (IPv6 in full form). */
  remoteAddress(): string;
}

/** The RawRequestInfo of `raw()`: points at the request being handled, null otherwise. */
class RawInfo implements RawRequestInfo {
  res: uWS.HttpResponse | null = null;
  req: uWS.HttpRequest | null = null;
  header(name: string): string {
    return this.req ? this.req.getHeader(name) : '';
  }
  remoteAddress(): string {
    return this.res ? Buffer.from(this.res.getRemoteAddressAsText()).toString() : '';
  }
}

/** A request of a `rawBody` route (WHEP): everything copied out of uWS, the body read. */
export interface RawBodyRequest {
  params: string[];
  query: string;
  /** The headers the route asked for, by lower-case name ('' when absent). */
  headers: Record<string, string>;
  remoteAddress: string;
  requestId: string;
  body: Buffer;
}

/** A raw response: pre-rendered bytes and headers (HLS playlists and segments). */
export interface RawReply {
  /** e.g. '200 OK' (or its bytes, for hot paths: see `headerBytes`). */
  status: string | Uint8Array;
  headers: ReadonlyArray<readonly [string | Uint8Array, string | Uint8Array]>;
  body: Uint8Array | ArrayBuffer;
}

/** Pre-encodes constant headers (names and values as bytes: uWS then skips a string conversion per call). */
export function headerBytes(headers: ReadonlyArray<readonly [string, string]>): ReadonlyArray<readonly [Uint8Array, Uint8Array]> {
  return headers.map(([k, v]) => [Buffer.from(k, 'latin1'), Buffer.from(v, 'latin1')] as const);
}

/** `'200 OK'` as bytes, for hot raw paths. */
export const STATUS_200 = Buffer.from('200 OK', 'latin1');

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
  private readonly routeList: RouteInfo[] = [];
  private idempotency: IdempotencyHook | null = null;
  private observer: ((r: ObservedResponse) => void) | null = null;

  constructor(private readonly opts: HttpServerOptions) {
    this.app = uWS.App();
  }

  /**
   * Registers a JSON API route. `:name` segments become `req.params` in order (percent-decoded; a
   * malformed escape answers 404). Bodies over `maxJsonBodyBytes` → 413 `body_too_large`, malformed
   * or non-object JSON → 400 `invalid_json`, a thrown ApiError → its envelope, anything else → 500
   * `internal_error` without details (logged with the request id).
   */
  api(method: HttpMethod, pattern: string, handler: ApiHandler, opts?: Omit<ApiRouteOptions, 'guard'> & { guard?: undefined }): void;
  api<C>(method: HttpMethod, pattern: string, handler: GuardedApiHandler<C>, opts: ApiRouteOptions<C> & { guard: (req: ApiRequest) => C }): void;
  api(method: HttpMethod, pattern: string, handler: GuardedApiHandler<unknown>, opts: ApiRouteOptions = {}): void {
    const readBody = opts.readBody ?? (method === 'post' || method === 'patch' || method === 'put');
    const guard = opts.guard;
    this.addPattern(pattern, method);
    this.routeList.push({ method: httpMethod(method), pattern, kind: 'api', scope: opts.scope, doc: opts.doc });
    const idempotent = method === 'post';
    const nParams = (pattern.match(/:/g) ?? []).length;
    const httpName = httpMethod(method);
    this.app[method](pattern, (res, req) => {
      const requestId = newRequestId();
      const params: string[] = [];
      let badParam = false;
      for (let i = 0; i < nParams; i++) {
        const raw = req.getParameter(i) ?? '';
        const decoded = safeDecode(raw);
        if (decoded === null) badParam = true;
        params.push(decoded ?? raw);
      }
      const state: ReqState = { aborted: false, answered: false, method: httpName, pattern, url: req.getUrl() };
      const request = new UwsApiRequest(res, state, req, params, requestId);
      // Only routes that read a body need these (GETs skip two header look-ups).
      const contentLength = readBody ? Number(req.getHeader('content-length') || '0') : 0;
      const hasBody = readBody && hasRequestBody(req);
      // A malformed %-escape in a path segment names no object: answer like any unknown id would.
      if (badParam) return this.sendError(res, request.responseHeaders, state, new ApiError(404, 'resource_missing', 'The URL holds a malformed percent-encoded segment.'), requestId);
      let ctx: unknown;
      if (guard) {
        try {
          ctx = guard(request);
        } catch (e) {
          // The body (if any) is not read: close so the connection is not left mid-request.
          return this.sendError(res, request.responseHeaders, state, e, requestId, hasBody);
        }
      }
      if (!readBody) {
        // The common case (GET, DELETE): no body, no idempotency. A synchronous answer is written
        // right here, inside uWS's own cork, without registering onAborted (uWS needs it only for
        // answers sent after the handler returned).
        let reply: ApiReply | Promise<ApiReply>;
        try {
          reply = handler(request, ctx);
        } catch (e) {
          return this.sendError(res, request.responseHeaders, state, e, requestId);
        }
        if (!(reply instanceof Promise)) return this.sendJson(res, request.responseHeaders, state, reply, requestId);
        res.onAborted(() => {
          state.aborted = true;
        });
        reply.then(
          (r) => this.sendJson(res, request.responseHeaders, state, r, requestId),
          (e) => this.sendError(res, request.responseHeaders, state, e, requestId),
        );
        return;
      }
      res.onAborted(() => {
        state.aborted = true;
      });
      const run = () => {
        let complete: ((reply: ApiReply | null) => void) | null = null;
        if (idempotent && this.idempotency && request.headers.idempotencyKey) {
          try {
            const d = this.idempotency.begin(request);
            if (d.kind === 'replay') {
              request.responseHeaders['Idempotent-Replayed'] = 'true';
              return this.sendJson(res, request.responseHeaders, state, d.reply, requestId);
            }
            complete = d.complete;
          } catch (e) {
            return this.sendError(res, request.responseHeaders, state, e, requestId);
          }
        }
        const ok = (r: ApiReply) => {
          complete?.(r);
          this.sendJson(res, request.responseHeaders, state, r, requestId);
        };
        const fail = (e: unknown) => {
          complete?.(e instanceof ApiError && e.status < 500 ? { status: e.status, body: errorBody(e, requestId), headers: e.headers } : null);
          this.sendError(res, request.responseHeaders, state, e, requestId);
        };
        let reply: ApiReply | Promise<ApiReply>;
        try {
          reply = handler(request, ctx);
        } catch (e) {
          return fail(e);
        }
        if (reply instanceof Promise) reply.then(ok, fail);
        else ok(reply);
      };
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

  /**
   * Registers a raw byte route (HLS). The handler runs synchronously and answers at once. The
   * optional 4th handler argument reads request headers and the peer address while the handler
   * runs (one object reused across requests: never keep it past the call).
   */
  raw(method: 'get' | 'head', pattern: string, handler: (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply | DeferredReply): void {
    this.addPattern(pattern, method);
    this.routeList.push({ method: httpMethod(method), pattern, kind: 'raw' });
    const nParams = (pattern.match(/:/g) ?? []).length;
    const info = new RawInfo();
    this.app[method](pattern, (res, req) => {
      const params: string[] = [];
      for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
      const requestId = newRequestId();
      let r: RawReply | DeferredReply;
      info.res = res;
      info.req = req;
      try {
        r = handler(params, req.getQuery() ?? '', requestId, info);
      } catch (e) {
        // An exception escaping a uWS callback ends the process: answer 500 instead.
        return this.sendError(res, {}, { aborted: false }, e, requestId);
      } finally {
        info.res = null;
        info.req = null;
      }
      if (!('defer' in r)) return writeRaw(res, method, r, requestId);
      // A blocking request (LL-HLS): answer later, inside a cork; never after an abort.
      let aborted = false;
      let cancel: () => void = () => {};
      res.onAborted(() => {
        aborted = true;
        cancel();
      });
      cancel = r.defer((reply) => {
        if (aborted) return;
        aborted = true; // answered: a second call is ignored
        let out: RawReply;
        try {
          out = reply();
        } catch (e) {
          return res.cork(() => this.sendError(res, {}, { aborted: false }, e, requestId));
        }
        res.cork(() => writeRaw(res, method, out, requestId));
      });
    });
  }

  /**
   * Registers a form/HTML route (the OAuth authorization server): the raw body is read (up to
   * `maxBodyBytes`, default 64 KiB; larger → 413) and handed over with the cookie and origin
   * headers; the handler sets every response header but `X-Request-ID`. An exception escaping the
   * handler answers 500 `{"error":"server_error"}` (logged with the request id).
   */
  web(method: 'get' | 'post', pattern: string, handler: (req: WebRequest) => WebReply | Promise<WebReply>, opts: { maxBodyBytes?: number } = {}): void {
    const max = opts.maxBodyBytes ?? 64 * 1024;
    this.addPattern(pattern, method);
    this.routeList.push({ method: httpMethod(method), pattern, kind: 'web' });
    this.app[method](pattern, (res, req) => {
      const requestId = newRequestId();
      const request: WebRequest = {
        method: req.getMethod().toUpperCase(),
        url: req.getUrl(),
        query: new URLSearchParams(req.getQuery() ?? ''),
        headers: {
          authorization: req.getHeader('authorization'),
          contentType: req.getHeader('content-type'),
          cookie: req.getHeader('cookie'),
          origin: req.getHeader('origin'),
          forwardedFor: req.getHeader('x-forwarded-for'),
          userAgent: req.getHeader('user-agent'),
        },
        remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
        requestId,
        body: Buffer.alloc(0),
      };
      const state: ReqState = { aborted: false, method: request.method, pattern, url: request.url };
      res.onAborted(() => {
        state.aborted = true;
      });
      const send = (r: WebReply, close = false) => {
        if (state.aborted) return;
        res.cork(() => {
          res.writeStatus(statusLine(r.status));
          res.writeHeader('X-Request-ID', requestId);
          if (r.headers) for (const k in r.headers) res.writeHeader(k, r.headers[k]!);
          res.end(r.body ?? '', close);
        });
        this.observe(state, r.status, { ...r.headers, 'X-Request-ID': requestId }, typeof r.body === 'string' ? r.body : Buffer.from(r.body ?? '').toString());
      };
      const run = () => {
        let reply: WebReply | Promise<WebReply>;
        const crash = (e: unknown) => {
          this.opts.log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
          send({ status: 500, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }, body: '{"error":"server_error"}' });
        };
        try {
          reply = handler(request);
        } catch (e) {
          return crash(e);
        }
        if (reply instanceof Promise) reply.then((r) => send(r), crash);
        else send(reply);
      };
      const tooBig = () =>
        send({ status: 413, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }, body: '{"error":"invalid_request","error_description":"The request body is too large."}' }, true);
      if (method === 'get' || !hasRequestBody(req)) return run();
      if (Number(req.getHeader('content-length') || '0') > max) return tooBig();
      const chunks: Buffer[] = [];
      let size = 0;
      let finished = false;
      res.onData((ab, isLast) => {
        if (finished) return;
        size += ab.byteLength;
        if (size > max) {
          finished = true;
          return tooBig();
        }
        chunks.push(Buffer.from(ab.slice(0)));
        if (!isLast || state.aborted) return;
        finished = true;
        request.body = Buffer.concat(chunks, size);
        run();
      });
    });
  }

  /**
   * Registers a raw route that reads a non-JSON body (WHEP's `application/sdp`, RFC 9725) and may
   * answer asynchronously. Headers named in `opts.headers` (lower case) are copied out first;
   * bodies over `opts.maxBodyBytes` answer 413 `body_too_large` without running the handler. A
   * thrown/rejected ApiError answers its JSON envelope; anything else 500.
   */
  rawBody(method: 'post' | 'patch' | 'del' | 'options', pattern: string, handler: (req: RawBodyRequest) => RawReply | Promise<RawReply>, opts: { maxBodyBytes: number; headers: string[] }): void {
    this.addPattern(pattern, method);
    this.routeList.push({ method: httpMethod(method), pattern, kind: 'raw' });
    const nParams = (pattern.match(/:/g) ?? []).length;
    this.app[method](pattern, (res, req) => {
      const requestId = newRequestId();
      const params: string[] = [];
      for (let i = 0; i < nParams; i++) params.push(safeDecode(req.getParameter(i) ?? '') ?? '');
      const headers: Record<string, string> = {};
      for (const h of opts.headers) headers[h] = req.getHeader(h);
      const request: RawBodyRequest = { params, query: req.getQuery() ?? '', headers, remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(), requestId, body: Buffer.alloc(0) };
      const state: ReqState = { aborted: false, method: httpMethod(method), pattern, url: req.getUrl() };
      res.onAborted(() => {
        state.aborted = true;
      });
      const reply = (r: RawReply) => {
        if (state.aborted) return;
        res.cork(() => {
          res.writeStatus(r.status);
          for (const [k, v] of r.headers) res.writeHeader(k, v);
          res.writeHeader('X-Request-ID', requestId);
          res.end(r.body);
        });
      };
      const run = () => {
        let r: RawReply | Promise<RawReply>;
        try {
          r = handler(request);
        } catch (e) {
          return this.sendError(res, {}, state, e, requestId);
        }
        if (r instanceof Promise) r.then(reply, (e) => this.sendError(res, {}, state, e, requestId));
        else reply(r);
      };
      if (Number(req.getHeader('content-length') || '0') > opts.maxBodyBytes) return this.sendError(res, {}, state, tooLarge(opts.maxBodyBytes), requestId, true);
      if (!hasRequestBody(req)) return run();
      const chunks: Buffer[] = [];
      let size = 0;
      let finished = false;
      res.onData((ab, isLast) => {
        if (finished) return;
        size += ab.byteLength;
        if (size > opts.maxBodyBytes) {
          finished = true;
          return this.sendError(res, {}, state, tooLarge(opts.maxBodyBytes), requestId, true);
        }
        chunks.push(Buffer.from(ab.slice(0))); // uWS neuters the ArrayBuffer on return: copy
        if (!isLast || state.aborted) return;
        finished = true;
        request.body = Buffer.concat(chunks, size);
        run();
      });
    });
  }

  /**
   * Registers a streaming route: `handler` gets uWS's own response and request, for routes that
   * must stream (a request body straight to disk, a file answer with backpressure, ranged reads).
   * Unlike a bare `app[method]` registration the route is listed by `routes()` (so the scope map and
   * OpenAPI see it, with `opts.scope`/`opts.doc`) and other methods on its pattern answer 405 with
   * `Allow`. The handler owns the uWS rules (STYLE.md): copy request data before any await,
   * `onAborted` before anything async, cork later writes. It should report its JSON answers with
   * `reportResponse` so response observers (the tests' OpenAPI checker) see them.
   * `opts.kind`: `api` for JSON routes under `/v2` (the default when the pattern starts with `/v2/`),
   * else `raw`.
   */
  stream(method: HttpMethod, pattern: string, handler: (res: uWS.HttpResponse, req: uWS.HttpRequest) => void, opts: StreamRouteOptions = {}): void {
    this.addPattern(pattern, method);
    const kind = opts.kind ?? (pattern.startsWith('/v2/') ? 'api' : 'raw');
    this.routeList.push({ method: httpMethod(method), pattern, kind, scope: opts.scope, doc: opts.doc });
    this.app[method](pattern, handler);
  }

  /**
   * Tells the response observer (if any) about an answer a `stream()` route sent; `body` is the
   * text sent (JSON for API answers). Costs nothing when no observer is installed.
   */
  reportResponse(r: ObservedResponse): void {
    if (!this.observer) return;
    try {
      this.observer(r);
    } catch (e) {
      this.opts.log.error('response observer failed', { err: String(e) });
    }
  }

  /** Every registered route, in registration order. */
  routes(): readonly RouteInfo[] {
    return this.routeList;
  }

  /** Installs the idempotency store consulted by JSON POSTs with an `Idempotency-Key`. */
  useIdempotency(hook: IdempotencyHook): void {
    this.idempotency = hook;
  }

  /** Calls `fn` with every JSON and form answer (tests check them against the OpenAPI document). Costs nothing when unset. */
  observeResponses(fn: ((r: ObservedResponse) => void) | null): void {
    this.observer = fn;
  }

  private observe(state: ReqState, status: number, headers: Record<string, string>, body: string): void {
    if (!this.observer) return;
    try {
      this.observer({ method: state.method ?? '', pattern: state.pattern, url: state.url ?? '', status, headers, body });
    } catch (e) {
      this.opts.log.error('response observer failed', { err: String(e) });
    }
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
          { aborted: false, method, url: req.getUrl() },
          new ApiError(405, 'method_not_allowed', `${method} is not allowed on ${req.getUrl()}; use ${allow}.`, undefined, { Allow: allow }),
          requestId,
          hasRequestBody(req),
        );
      });
    }
    this.app.any('/*', (res, req) => {
      const requestId = newRequestId();
      this.sendError(res, {}, { aborted: false, method: req.getMethod().toUpperCase(), url: req.getUrl() }, new ApiError(404, 'route_not_found', `Unrecognized request URL (${req.getMethod().toUpperCase()} ${req.getUrl()}).`), requestId, hasRequestBody(req));
    });
  }

  private addPattern(pattern: string, method: HttpMethod): void {
    let set = this.patterns.get(pattern);
    if (!set) this.patterns.set(pattern, (set = new Set()));
    set.add(httpMethod(method));
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

  /**
   * Stops accepting connections and closes every open one at once: idle keep-alive connections,
   * held requests (LL-HLS blocking reloads, part waits) and transfers in progress, whose
   * `onAborted` handlers run. Closing the listen socket alone leaves uWS's connections on the
   * event loop, and the process then never exits. Idempotent.
   */
  close(): void {
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    // This uWS.js build has `TemplatedApp.close()` but its type declarations do not list it.
    (this.app as uWS.TemplatedApp & { close(): void }).close();
  }

  private sendJson(res: uWS.HttpResponse, extra: Record<string, string>, state: ReqState, reply: ApiReply, requestId: string): void {
    if (state.aborted) return;
    let body: string;
    try {
      body = JSON.stringify(reply.body);
    } catch (e) {
      // Never let a throw escape into uWS (it would end the process) or into a promise callback.
      return this.sendError(res, extra, state, e, requestId);
    }
    state.answered = true;
    res.cork(() => {
      res.writeStatus(statusBytes(reply.status));
      res.writeHeader(H_CONTENT_TYPE, V_JSON);
      res.writeHeader(H_REQUEST_ID, requestId);
      res.writeHeader(H_CACHE_CONTROL, V_NO_STORE);
      for (const k in extra) res.writeHeader(k, extra[k]!);
      if (reply.headers) for (const k in reply.headers) res.writeHeader(k, reply.headers[k]!);
      res.end(body);
    });
    if (this.observer) this.observe(state, reply.status, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-ID': requestId, ...extra, ...reply.headers }, body);
  }

  private sendError(res: uWS.HttpResponse, extra: Record<string, string>, state: ReqState, e: unknown, requestId: string, close = false): void {
    if (state.aborted) return;
    let err: ApiError;
    if (e instanceof ApiError) err = e;
    else {
      this.opts.log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
      err = new ApiError(500, 'internal_error', 'An internal error occurred. Quote the request id when you report it.');
    }
    const body = JSON.stringify(errorBody(err, requestId));
    state.answered = true;
    res.cork(() => {
      res.writeStatus(statusBytes(err.status));
      res.writeHeader(H_CONTENT_TYPE, V_JSON);
      res.writeHeader(H_REQUEST_ID, requestId);
      res.writeHeader(H_CACHE_CONTROL, V_NO_STORE);
      for (const k in extra) res.writeHeader(k, extra[k]!);
      for (const k in err.headers) res.writeHeader(k, err.headers[k]!);
      res.end(body, close);
    });
    if (this.observer) this.observe(state, err.status, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-ID': requestId, ...extra, ...err.headers }, body);
  }
}

/** Per-request state shared by the answer paths: abort flag and what the observer reports. */
interface ReqState {
  aborted: boolean;
  /** Set when an answer was written (uWS's response must not be touched after that). */
  answered?: boolean;
  method?: string;
  pattern?: string;
  url?: string;
}

// Constant header names and values, encoded once (uWS copies a JS string into UTF-8 on every call).
const H_CONTENT_TYPE = Buffer.from('Content-Type');
const V_JSON = Buffer.from('application/json; charset=utf-8');
const H_REQUEST_ID = Buffer.from('X-Request-ID');
const H_CACHE_CONTROL = Buffer.from('Cache-Control');
const V_NO_STORE = Buffer.from('no-store');
const STATUS_BYTES = new Map<number, Buffer>();
/** `statusLine(s)` as bytes, encoded once per status. */
function statusBytes(s: number): Buffer {
  let b = STATUS_BYTES.get(s);
  if (!b) STATUS_BYTES.set(s, (b = Buffer.from(statusLine(s))));
  return b;
}

/**
 * The ApiRequest of `api()` routes: everything is copied out of uWS's request up front except the
 * query (parsed on first use) and the peer address (read from the response on first use, while the
 * request is being answered; '' once the answer was written or the client went away).
 */
class UwsApiRequest implements ApiRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: ApiRequest['headers'];
  body: unknown = {};
  responseHeaders: Record<string, string> = {};
  actor?: string;
  private readonly rawQuery: string;
  private parsedQuery: URLSearchParams | null = null;
  private peer: string | null = null;

  constructor(
    private readonly res: uWS.HttpResponse,
    private readonly state: ReqState,
    req: uWS.HttpRequest,
    readonly params: string[],
    readonly requestId: string,
  ) {
    this.method = state.method!;
    this.url = state.url!;
    this.rawQuery = req.getQuery() ?? '';
    this.headers = {
      authorization: req.getHeader('authorization'),
      contentType: req.getHeader('content-type'),
      idempotencyKey: req.getHeader('idempotency-key'),
      userAgent: req.getHeader('user-agent'),
      forwardedFor: req.getHeader('x-forwarded-for'),
    };
  }

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.rawQuery));
  }

  get remoteAddress(): string {
    if (this.peer === null) {
      if (this.state.aborted || this.state.answered) return '';
      this.peer = Buffer.from(this.res.getRemoteAddressAsText()).toString();
    }
    return this.peer;
  }
}

/** `'del'` → `'DELETE'`, `'get'` → `'GET'`. */
const httpMethod = (m: HttpMethod) => (m === 'del' ? 'DELETE' : m.toUpperCase());

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
