/**
 * The JSON API route kind (`HttpServer.api`): path parameters, the route guard (before any body
 * byte is read), the JSON body under its cap (src/base/http/body.ts), idempotency for POSTs, the
 * handler, and its answer or error envelope (src/base/http/reply.ts); CORS on every answer and the
 * route's preflight (docs/api-platform.md "CORS").
 */
import type uWS from 'uWebSockets.js';
import { ApiError } from '../../errors/errors.js';
import { newRequestId } from '../../ids.js';
import { errorBody, type ApiReply, type ReqState } from '../reply.js';
import { PEER_HEADER, decodedParams, httpMethod, paramCount, peerOr, type HttpMethod } from '../request.js';
import { bodyReader, type RouteHost } from './host.js';

/**
 * CORS of every `/v2` answer (docs/api-platform.md "CORS"; the Fetch standard's CORS protocol):
 * any origin may call the API, since it takes no cookies and answers only what the key or token
 * sent in `Authorization` grants. A browser script may read the request id, the rate-limit headers
 * and `Idempotent-Replayed`.
 */
export const API_CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers':
    'X-Request-ID, RateLimit, RateLimit-Policy, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed',
};

/** The preflight answer's headers: every method the API uses, the request headers it reads, cached 10 minutes by the browser. */
const PREFLIGHT_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ...Object.entries(API_CORS_HEADERS),
  ['Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS'],
  ['Access-Control-Allow-Headers', 'Authorization, Content-Type, Idempotency-Key'],
  ['Access-Control-Max-Age', '600'],
  ['Cache-Control', 'no-store'],
];
const EMPTY = new Uint8Array(0);
/** Patterns that have their preflight route, per uWS app (several methods share a pattern). */
const preflighted = new WeakMap<object, Set<string>>();

/**
 * Registers the CORS preflight of `pattern` once: `OPTIONS` → 204 with `PREFLIGHT_HEADERS`. It
 * needs no key and is not rate limited (the browser sends no `Authorization` on a preflight).
 * `registerApiRoute` calls it; routes registered otherwise under `/v2` (an upload) call it too.
 */
export function registerApiPreflight(host: Pick<RouteHost, 'app' | 'replies'>, pattern: string): void {
  let set = preflighted.get(host.app);
  if (!set) preflighted.set(host.app, (set = new Set()));
  if (set.has(pattern)) return;
  set.add(pattern);
  host.app.options(pattern, (res, req) => {
    const state: ReqState = { aborted: false, answered: false, method: 'OPTIONS', pattern, url: req.getUrl() };
    host.replies.raw(res, state, false, { status: '204 No Content', headers: PREFLIGHT_HEADERS, body: EMPTY }, newRequestId());
  });
}

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
    /** `Accept` (JSON API routes; '' when absent): a route may answer another representation, e.g. CSV. */
    accept?: string;
    /** Copied by upload routes only (src/base/http/upload.ts): `Cookie`, `Origin`, `X-CSRF-Token` for session-authenticated uploads (the dashboard). */
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
   * Who the request acts for, set by the route guard once authenticated (the credential: account and key or OAuth grant). Scopes
   * idempotency keys; when unset, a POST's key is scoped by its `Authorization` header.
   */
  actor?: string;
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
  /** OpenAPI description of the route (see src/control/api/openapi/registry.ts `RouteDoc`); opaque here. */
  doc?: unknown;
}

/**
 * Idempotency for JSON POSTs carrying `Idempotency-Key` (docs/behaviour.md §7), consulted after the body
 * was read and before the handler runs. `begin` throws an ApiError to refuse (400/409), answers a
 * stored reply, or lets the handler run and is told its reply (`null`: nothing to keep, e.g. a 5xx).
 */
export interface IdempotencyHook {
  begin(req: ApiRequest): { kind: 'replay'; reply: ApiReply } | { kind: 'proceed'; complete(reply: ApiReply | null): void };
}

/**
 * Registers the uWS handler of a JSON API route (see `HttpServer.api` for what it answers). GETs
 * and DELETEs (no body) answered synchronously are written inside uWS's own cork without
 * `onAborted`; everything else goes through a `RequestBody`. `idempotencyOf` gives the
 * idempotency store per request (it is installed after the routes are registered).
 */
export function registerApiRoute(host: RouteHost, idempotencyOf: () => IdempotencyHook | null, method: HttpMethod, pattern: string, handler: GuardedApiHandler<unknown>, opts: ApiRouteOptions): void {
  const route: ApiRoute = {
    host,
    replies: host.replies,
    maxBytes: host.maxJsonBodyBytes,
    idempotencyOf,
    pattern,
    handler,
    readBody: opts.readBody ?? (method === 'post' || method === 'patch' || method === 'put'),
    guard: opts.guard,
    idempotent: method === 'post',
    nParams: paramCount(pattern),
    httpName: httpMethod(method),
  };
  registerApiPreflight(host, pattern);
  host.app[method](pattern, (res, req) => answerApi(route, res, req));
  // HEAD of a GET route answers what GET would, without the body (RFC 9110 §9.3.2).
  if (method === 'get') {
    const head: ApiRoute = { ...route, httpName: 'HEAD' };
    host.app.head(pattern, (res, req) => answerApi(head, res, req));
  }
}

/** What every request of one JSON API route uses: bound once by `registerApiRoute`. */
interface ApiRoute {
  host: RouteHost;
  replies: RouteHost['replies'];
  /** The JSON body cap (bytes). */
  maxBytes: number;
  idempotencyOf: () => IdempotencyHook | null;
  pattern: string;
  handler: GuardedApiHandler<unknown>;
  readBody: boolean;
  guard: ((req: ApiRequest) => unknown) | undefined;
  /** A POST: `Idempotency-Key` is honoured. */
  idempotent: boolean;
  nParams: number;
  /** The method as HTTP spells it (`GET`). */
  httpName: string;
}

/** The route's uWS handler: copies the request, runs the guard before any body byte is read, then the handler. */
function answerApi(route: ApiRoute, res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  const { replies, guard } = route;
  const requestId = newRequestId();
  const { params, bad } = decodedParams(req, route.nParams);
  const state: ReqState = { aborted: false, answered: false, method: route.httpName, pattern: route.pattern, url: req.getUrl() };
  const request = new UwsApiRequest(res, state, req, params, requestId);
  const extra = request.responseHeaders;
  // Only routes that read a body need a reader (GETs skip the header look-ups and onData).
  const body = route.readBody ? bodyReader(route.host, res, req, state, route.maxBytes, () => request.remoteAddress) : null;
  // An answer given before the body was read drains it first (src/base/http/body.ts), so it reaches the client.
  const refuse = (e: unknown) => (body ? body.refuse((close) => replies.error(res, state, e, requestId, extra, close)) : replies.error(res, state, e, requestId, extra));
  // A malformed %-escape in a path segment names no object: answer like any unknown id would.
  if (bad) return refuse(new ApiError('resource_missing', 'The URL holds a malformed percent-encoded segment.'));
  let ctx: unknown;
  if (guard) {
    try {
      ctx = guard(request);
    } catch (e) {
      return refuse(e);
    }
  }
  if (!body) return answerWithoutBody(route, res, state, request, ctx);
  body.buffer(
    (bytes) => {
      const parsed = parseJsonObject(bytes);
      if (parsed instanceof ApiError) return replies.error(res, state, parsed, requestId, extra);
      request.body = parsed;
      answerWithBody(route, res, state, request, ctx);
    },
    (err, close) => replies.error(res, state, err, requestId, extra, close),
  );
}

/**
 * The common case (GET, DELETE): no body, no idempotency. A synchronous answer is written right
 * here, inside uWS's own cork, without registering onAborted (uWS needs it only for answers sent
 * after the handler returned).
 */
function answerWithoutBody(route: ApiRoute, res: uWS.HttpResponse, state: ReqState, request: ApiRequest, ctx: unknown): void {
  const { replies } = route;
  const { requestId, responseHeaders: extra } = request;
  let reply: ApiReply | Promise<ApiReply>;
  try {
    reply = route.handler(request, ctx);
  } catch (e) {
    return replies.error(res, state, e, requestId, extra);
  }
  if (!(reply instanceof Promise)) return replies.json(res, state, reply, requestId, extra);
  res.onAborted(() => {
    state.aborted = true;
  });
  reply.then(
    (r) => replies.json(res, state, r, requestId, extra),
    (e) => replies.error(res, state, e, requestId, extra),
  );
}

/** Runs the handler once the JSON body was read, under idempotency for a POST carrying `Idempotency-Key` (docs/behaviour.md §7). */
function answerWithBody(route: ApiRoute, res: uWS.HttpResponse, state: ReqState, request: ApiRequest, ctx: unknown): void {
  const { replies } = route;
  const { requestId, responseHeaders: extra } = request;
  let complete: ((reply: ApiReply | null) => void) | null = null;
  const idempotency = route.idempotent ? route.idempotencyOf() : null;
  if (idempotency && request.headers.idempotencyKey) {
    try {
      const d = idempotency.begin(request);
      if (d.kind === 'replay') {
        extra['Idempotent-Replayed'] = 'true';
        return replies.json(res, state, d.reply, requestId, extra);
      }
      complete = d.complete;
    } catch (e) {
      return replies.error(res, state, e, requestId, extra);
    }
  }
  const ok = (r: ApiReply) => {
    complete?.(r);
    replies.json(res, state, r, requestId, extra);
  };
  const fail = (e: unknown) => {
    complete?.(e instanceof ApiError && e.status < 500 ? { status: e.status, body: errorBody(e, requestId), headers: e.headers } : null);
    replies.error(res, state, e, requestId, extra);
  };
  let reply: ApiReply | Promise<ApiReply>;
  try {
    reply = route.handler(request, ctx);
  } catch (e) {
    return fail(e);
  }
  if (reply instanceof Promise) reply.then(ok, fail);
  else ok(reply);
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
  /** Starts with the CORS headers, so every answer carries them (errors included). */
  responseHeaders: Record<string, string> = { ...API_CORS_HEADERS };
  actor?: string;
  private readonly rawQuery: string;
  private parsedQuery: URLSearchParams | null = null;
  private peer: string | null = null;
  /** The client address a worker thread forwarded (`PEER_HEADER`); used only when the socket has no peer address. */
  private readonly forwardedPeer: string;

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
      accept: req.getHeader('accept'),
    };
    this.forwardedPeer = req.getHeader(PEER_HEADER);
  }

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.rawQuery));
  }

  get remoteAddress(): string {
    if (this.peer === null) {
      if (this.state.aborted || this.state.answered) return '';
      this.peer = peerOr(Buffer.from(this.res.getRemoteAddressAsText()).toString(), this.forwardedPeer);
    }
    return this.peer;
  }
}

/**
 * Parses a JSON request body that must be an object: `{}` for an empty (or blank) body, else the
 * parsed object, or the 400 `invalid_json` to answer.
 */
function parseJsonObject(bytes: Buffer): unknown {
  const text = bytes.toString('utf8');
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    return new ApiError('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return new ApiError('invalid_json', 'The request body must be a JSON object.');
  return body;
}
