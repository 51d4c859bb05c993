/**
 * The only home of uWebSockets.js. `HttpServer` owns the App, the route list (for 405 + `Allow`,
 * the scope map and OpenAPI), the 404/405 fallbacks, listen and close; each route kind is a thin
 * registration over the body reader (./body.ts) and the reply writers (./reply.ts): `api` JSON
 * (./routes/api.ts), `raw` bytes for HLS (./routes/raw.ts), `web` forms and HTML
 * (./routes/web.ts), `rawBody` for WHEP (./routes/raw-body.ts), `progressive` for long streamed
 * GET/HEAD answers (Icecast-style listening, ./routes/progressive.ts), and `stream` for handlers that
 * drive uWS themselves (uploads ./upload.ts, files ./files.ts). Follows the uWS rules (docs/architecture.md):
 * request data copied before any await, onAborted before anything async, writes corked, bytes not
 * strings.
 */
import type uWS from 'uWebSockets.js';
import { uWS as uws } from './uws.js';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Logger } from '../logger.js';
import type { Limits } from '../limits/limits.js';
import { RequestBody, announcesBody } from './body.js';
import { Replies, type ObservedResponse, type RawReply, type ReqState, type WebReply } from './reply.js';
import { httpMethod, type HttpMethod } from './request.js';
import type { RouteHost } from './routes/host.js';
import { API_CORS_HEADERS, registerApiRoute, type ApiHandler, type ApiRequest, type ApiRouteOptions, type GuardedApiHandler, type IdempotencyHook } from './routes/api.js';
import { registerRawRoute, type DeferredReply, type RawRequestInfo } from './routes/raw.js';
import { WEB_MAX_BODY_BYTES, registerWebRoute, type WebRequest } from './routes/web.js';
import { registerRawBodyRoute, type RawBodyRequest } from './routes/raw-body.js';
import { registerProgressiveRoute, type ProgressiveHandler } from './routes/progressive.js';
import { registerForwardRoute, type ForwardCounts } from './proxy.js';

export type { HttpMethod } from './request.js';
export type { ApiReply, WebReply, RawReply, ObservedResponse } from './reply.js';
export { headerBytes, STATUS_200, statusLine, errorBody, REQUEST_ID_HEADER } from './reply.js';
export type { ApiRequest, ApiHandler, GuardedApiHandler, ApiRouteOptions, IdempotencyHook } from './routes/api.js';
export type { Answer, DeferredReply, RawRequestInfo } from './routes/raw.js';
export type { WebRequest } from './routes/web.js';
export type { RawBodyRequest } from './routes/raw-body.js';
export type { ProgressiveAnswer, ProgressiveClient, ProgressiveHandler, ProgressiveRequest, ProgressiveSink, ProgressiveStream, StreamedResponse } from './routes/progressive.js';
export { NO_CLIENT, streamedResponse, YIELD } from './routes/progressive.js';
export type { ForwardCounts } from './proxy.js';

export { HTTP_LIBRARY_OBJECT, HTTP_LIBRARY_BUILD } from './uws.js';

/** Options of a `stream()` route. */
export interface StreamRouteOptions {
  /** The scope the handler's guard requires (listed by `routes()`, the scope map and OpenAPI). */
  scope?: string | undefined;
  /** OpenAPI description (src/control/api/openapi/registry.ts `RouteDoc`); opaque here. */
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

/** HTTP server options. */
export interface HttpServerOptions {
  /** Largest JSON body (bytes); larger → 413 `body_too_large`. Also the drain cap of refused requests (src/base/http/body.ts). */
  maxJsonBodyBytes: number;
  log: Logger;
  /** Where hits of the body caps are counted (`http_body_bytes`, docs/behaviour.md §13); none when absent. */
  limits?: Pick<Limits, 'hit'> | undefined;
  /** The `Idempotency-Key` store consulted by JSON POSTs (./idempotency.ts, docs/behaviour.md §7); none: keys are ignored. */
  idempotency?: IdempotencyHook | undefined;
}

/** The HTTP server: register routes, then `listen`. */
export class HttpServer {
  readonly app: uWS.TemplatedApp;
  private listenSocket: uWS.us_listen_socket | null = null;
  private unixSocket: uWS.us_listen_socket | null = null;
  private forwardAgent: { destroy(): void } | null = null;
  /** Registered pattern → its methods as HTTP spells them, for 405 and `Allow`. */
  private readonly patterns = new Map<string, Set<string>>();
  private readonly routeList: RouteInfo[] = [];
  private readonly idempotency: IdempotencyHook | null;
  /** This server's reply writers (./reply.ts), for `stream()` routes: their answers reach the response observer too. */
  readonly replies: Replies;
  private readonly host: RouteHost;

  constructor(private readonly opts: HttpServerOptions) {
    this.app = uws.App();
    this.idempotency = opts.idempotency ?? null;
    this.replies = new Replies(opts.log);
    this.host = {
      app: this.app,
      replies: this.replies,
      log: opts.log,
      limits: opts.limits,
      maxJsonBodyBytes: opts.maxJsonBodyBytes,
    };
  }

  /**
   * Registers a JSON API route. `:name` segments become `req.params` in order (percent-decoded; a
   * malformed escape answers 404). Bodies over `maxJsonBodyBytes` → 413 `body_too_large`, malformed
   * or non-object JSON → 400 `invalid_json`, a thrown ApiError → its envelope, anything else → 500
   * `internal_error` without details (logged with the request id). An answer given before the body
   * was read (guard, 404, 413) drains it first (./body.ts).
   */
  api(method: HttpMethod, pattern: string, handler: ApiHandler, opts?: Omit<ApiRouteOptions, 'guard'> & { guard?: undefined }): void;
  api<C>(method: HttpMethod, pattern: string, handler: GuardedApiHandler<C>, opts: ApiRouteOptions<C> & { guard: (req: ApiRequest) => C }): void;
  api(method: HttpMethod, pattern: string, handler: GuardedApiHandler<unknown>, opts: ApiRouteOptions = {}): void {
    this.addRoute(method, pattern, 'api', opts.scope, opts.doc);
    // A GET route answers HEAD too (./routes/api.ts): listed in `Allow`, not as a route of its own.
    if (method === 'get') this.patterns.get(pattern)!.add('HEAD');
    registerApiRoute(this.host, () => this.idempotency, method, pattern, handler, opts);
  }

  /**
   * Registers a raw byte route (HLS). The handler runs synchronously and answers at once (or
   * later, through a `DeferredReply`). The optional 4th handler argument reads request headers and
   * the peer address while the handler runs (one object reused across requests: never keep it
   * past the call). A throwing handler answers 500.
   */
  raw(method: 'get' | 'head', pattern: string, handler: (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply | DeferredReply): void {
    this.addRoute(method, pattern, 'raw');
    registerRawRoute(this.host, method, pattern, handler);
  }

  /**
   * Registers a form/HTML route (the OAuth authorization server, the dashboard): the raw body is
   * read (up to `maxBodyBytes`, default 64 KiB; larger → 413 `{"error":"invalid_request"}`) and
   * handed over with the cookie and origin headers; the handler sets every response header but
   * `X-Request-ID`. An exception escaping the handler answers 500 `{"error":"server_error"}`
   * (logged with the request id).
   */
  web(method: 'get' | 'post', pattern: string, handler: (req: WebRequest) => WebReply | Promise<WebReply>, opts: { maxBodyBytes?: number } = {}): void {
    this.addRoute(method, pattern, 'web');
    registerWebRoute(this.host, method, pattern, handler, opts.maxBodyBytes ?? WEB_MAX_BODY_BYTES);
  }

  /**
   * Registers a raw route that reads a non-JSON body (WHEP's `application/sdp`, RFC 9725) and may
   * answer asynchronously. Headers named in `opts.headers` (lower case) are copied out first;
   * bodies over `opts.maxBodyBytes` answer 413 `body_too_large` without running the handler. A
   * thrown/rejected ApiError answers its JSON envelope; anything else 500.
   */
  rawBody(method: 'post' | 'patch' | 'del' | 'options', pattern: string, handler: (req: RawBodyRequest) => RawReply | Promise<RawReply>, opts: { maxBodyBytes: number; headers: string[] }): void {
    this.addRoute(method, pattern, 'raw');
    registerRawBodyRoute(this.host, method, pattern, handler, opts);
  }

  /**
   * Registers a progressive GET and HEAD route (Icecast-style listening): the handler runs
   * synchronously (params raw, query, headers and peer readable only then) and answers a raw reply
   * or `{ stream }`; for a stream the server writes status and headers, then hands `open` a sink
   * for the body (chunked) and calls what `open` returned when the client goes away. HEAD answers
   * the headers only, without `Content-Length`. A throwing handler answers 500.
   */
  progressive(pattern: string, handler: ProgressiveHandler): void {
    for (const method of ['get', 'head'] as const) {
      this.addRoute(method, pattern, 'raw');
      registerProgressiveRoute(this.host, method, pattern, handler);
    }
  }

  /**
   * Registers a streaming route: `handler` gets uWS's own response and request, for routes that
   * must stream (a request body straight to disk, a file answer with backpressure, ranged reads).
   * Unlike a bare `app[method]` registration the route is listed by `routes()` (so the scope map and
   * OpenAPI see it, with `opts.scope`/`opts.doc`) and other methods on its pattern answer 405 with
   * `Allow`. The handler owns the uWS rules (docs/architecture.md): copy request data before any await,
   * `onAborted` before anything async, cork later writes. It should report its JSON answers with
   * `reportResponse` so response observers (the tests' OpenAPI checker) see them.
   * `opts.kind`: `api` for JSON routes under `/v2` (the default when the pattern starts with `/v2/`),
   * else `raw`.
   */
  stream(method: HttpMethod, pattern: string, handler: (res: uWS.HttpResponse, req: uWS.HttpRequest) => void, opts: StreamRouteOptions = {}): void {
    this.addRoute(method, pattern, opts.kind ?? (pattern.startsWith('/v2/') ? 'api' : 'raw'), opts.scope, opts.doc);
    this.app[method](pattern, handler);
  }

  /**
   * Tells the response observer (if any) about an answer a `stream()` route sent; `body` is the
   * text sent (JSON for API answers). Costs nothing when no observer is installed.
   */
  reportResponse(r: ObservedResponse): void {
    this.replies.report(r);
  }

  /** Every registered route, in registration order. */
  routes(): readonly RouteInfo[] {
    return this.routeList;
  }

  /** Calls `fn` with every JSON and form answer (tests check them against the OpenAPI document). Costs nothing when unset. */
  observeResponses(fn: ((r: ObservedResponse) => void) | null): void {
    this.replies.observer = fn;
  }

  /**
   * Adds 405 for other methods on every registered pattern and the JSON 404 for everything else.
   * A request body is drained before the answer (./body.ts), under the JSON body cap.
   */
  finish(): void {
    for (const [p, methods] of this.patterns) {
      const allow = [...methods].join(', ');
      this.app.any(p, (res, req) => {
        const method = req.getMethod().toUpperCase();
        const url = req.getUrl();
        const cors = url.startsWith('/v2/') ? API_CORS_HEADERS : {};
        this.refuseRequest(res, req, { aborted: false, method, url }, new ApiError('method_not_allowed', `${method} is not allowed on ${url}; use ${allow}.`, { headers: { Allow: allow, ...cors } }));
      });
    }
    this.app.any('/*', (res, req) => {
      const method = req.getMethod().toUpperCase();
      const url = req.getUrl();
      // Under /v2 a browser script may read the refusal too (docs/api-platform.md "CORS").
      const headers = url === '/v2' || url.startsWith('/v2/') ? { headers: { ...API_CORS_HEADERS } } : undefined;
      this.refuseRequest(res, req, { aborted: false, method, url }, new ApiError('route_not_found', `Unrecognized request URL (${method} ${url}).`, headers));
    });
  }

  /** Answers `err` to a request whose body (if any) is not wanted: drained first, so the answer reaches the client. */
  private refuseRequest(res: uWS.HttpResponse, req: uWS.HttpRequest, state: ReqState, err: ApiError): void {
    const requestId = newRequestId();
    if (!announcesBody(req)) return this.replies.error(res, state, err, requestId);
    const body = new RequestBody(res, req, {
      maxBytes: this.opts.maxJsonBodyBytes,
      onAbort: () => {
        state.aborted = true;
      },
    });
    body.refuse((close) => this.replies.error(res, state, err, requestId, {}, close));
  }

  /** Lists a route and adds its method to its pattern's (for 405 and `Allow`). */
  private addRoute(method: HttpMethod, pattern: string, kind: RouteInfo['kind'], scope?: string, doc?: unknown): void {
    let set = this.patterns.get(pattern);
    if (!set) this.patterns.set(pattern, (set = new Set()));
    set.add(httpMethod(method));
    this.routeList.push({ method: httpMethod(method), pattern, kind, scope, doc });
  }

  /**
   * A worker thread's server, instead of `finish()`: every request no registered route takes (any
   * other path, any other method) is forwarded to the main thread's private unix socket
   * `socketPath` and its answer streamed back (./proxy.ts). `counts.forwarded` counts them.
   * `also`: patterns forwarded although a broader pattern of the thread's own would take them.
   */
  forwardRest(socketPath: string, counts: ForwardCounts, also: readonly string[] = []): void {
    this.forwardAgent = registerForwardRoute(this.app, socketPath, this.replies, this.opts.log, counts, also);
  }

  /**
   * Also listens on the unix socket `path` (the main thread, for the requests its worker threads
   * forward: the only connections whose forwarded client address it believes, src/base/http/request.ts).
   * Put it in a directory only this user can enter. @throws Error when it cannot be bound
   */
  listenUnix(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.app.listen_unix((sock) => {
        if (!sock) return reject(new Error(`cannot listen on the unix socket ${path}`));
        this.unixSocket = sock;
        resolve();
      }, path);
    });
  }

  /** Listens on host:port (0 = a free port); resolves to the bound port. @throws Error when the port is taken */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (sock) => {
        if (!sock) return reject(new Error(`cannot listen on http://${host}:${port}`));
        this.listenSocket = sock;
        resolve(uws.us_socket_local_port(sock as unknown as uWS.us_socket));
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
    if (this.listenSocket) uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    if (this.unixSocket) uws.us_listen_socket_close(this.unixSocket);
    this.unixSocket = null;
    this.forwardAgent?.destroy();
    this.forwardAgent = null;
    // This uWS.js build has `TemplatedApp.close()` but its type declarations do not list it.
    (this.app as uWS.TemplatedApp & { close(): void }).close();
  }
}
