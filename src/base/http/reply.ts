/**
 * The reply writers of the HTTP layer: JSON answers and the error envelope (spec "Errors"), form
 * and HTML answers, raw bytes (HLS, WHEP). Each writes status, headers and body in one go, under
 * `res.cork` (docs/architecture.md "uWS rules" 3) — except `writeRaw`, the HLS hot path, which is called
 * synchronously inside uWS's own cork (a deferred raw answer corks around it). Nothing here throws
 * into uWS: a reply that cannot be serialized answers 500.
 */
import { STATUS_CODES } from 'node:http';
import type uWS from 'uWebSockets.js';
import { ApiError, internalError } from '../errors/errors.js';
import type { Logger } from '../logger.js';
import { HttpTally, routeClassOf, statusOf } from './tally.js';

/** What a JSON API handler answers. */
export interface ApiReply {
  status: number;
  body: unknown;
  headers?: Record<string, string> | undefined;
  /** A body that is not JSON (e.g. CSV for `Accept: text/csv`): sent as is, with its Content-Type, instead of `body`. */
  text?: { contentType: string; body: string } | undefined;
}

/** What a form/HTML handler answers; the handler sets Content-Type. */
export interface WebReply {
  status: number;
  headers?: Record<string, string> | undefined;
  body?: string | Uint8Array | undefined;
}

/** A raw response: pre-rendered bytes and headers (HLS playlists and segments, WHEP answers). */
export interface RawReply {
  /** e.g. '200 OK' (or its bytes, for hot paths: see `headerBytes`). */
  status: string | Uint8Array;
  headers: ReadonlyArray<readonly [string | Uint8Array, string | Uint8Array]>;
  body: Uint8Array | ArrayBuffer;
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

/**
 * Per-request state shared by a route's answer paths: whether the client went away (then `res`
 * must not be touched), whether an answer was written, and what the observer reports.
 */
export interface ReqState {
  aborted: boolean;
  /** Set when an answer was written (uWS's response must not be touched after that). */
  answered?: boolean;
  method?: string;
  pattern?: string;
  url?: string;
  /** The route class (./tally.ts `RC`) when the route knows it; else it is read from `pattern` or `url`. */
  route?: number;
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
  507: '507 Insufficient Storage',
};
/** `200` → `'200 OK'`; a status outside the table gets its RFC 9110 §15 reason phrase from Node's table (`303` → `'303 See Other'`). */
export const statusLine = (s: number) => STATUS_TEXT[s] ?? `${s} ${STATUS_CODES[s] ?? 'Unknown'}`;

const STATUS_BYTES = new Map<number, Buffer>();
/** `statusLine(s)` as bytes, encoded once per status. */
function statusBytes(s: number): Buffer {
  let b = STATUS_BYTES.get(s);
  if (!b) STATUS_BYTES.set(s, (b = Buffer.from(statusLine(s))));
  return b;
}

/** The error envelope of spec "Errors". */
export function errorBody(e: ApiError, requestId: string) {
  return { error: { type: e.type, code: e.code, message: e.message, ...(e.param !== undefined ? { param: e.param } : {}), requestId } };
}

/**
 * The ApiError a failure answers with: itself; for a SQLite error that reached the HTTP layer
 * (better-sqlite3's `SqliteError`, recognised by its `code` alone: http/ does not import the
 * driver), 503 `database_busy` with `Retry-After: 1` when the database is locked by another
 * connection (`SQLITE_BUSY*`, `SQLITE_LOCKED*`: the busy timeout ran out) or 507
 * `insufficient_storage` when its volume is full (`SQLITE_FULL`), both logged as warnings; else
 * 500 `internal_error` without details (logged with the request id, never shown).
 */
export function toApiError(e: unknown, requestId: string, log: (Pick<Logger, 'error'> & Partial<Pick<Logger, 'warn'>>) | undefined): ApiError {
  if (e instanceof ApiError) return e;
  const sqlite = sqliteErrorOf(e);
  if (sqlite) {
    log?.warn?.('database error answered', { requestId, code: (e as { code: string }).code, status: sqlite.status, err: (e as Error).message });
    return sqlite;
  }
  log?.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
  return internalError();
}

/** The answer to a SQLite busy/locked/full error (see `toApiError`), or null for anything else. */
function sqliteErrorOf(e: unknown): ApiError | null {
  if (!(e instanceof Error)) return null;
  const code = (e as Error & { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return null;
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new ApiError('database_busy', 'The database is busy; retry in a second.', { headers: { 'Retry-After': '1' } });
  }
  if (code === 'SQLITE_FULL') return new ApiError('insufficient_storage', 'The server does not have enough free disk space to store this change. Try again later or contact the operator.');
  return null;
}

// Constant header names and values, encoded once (uWS copies a JS string into UTF-8 on every call).
const H_CONTENT_TYPE = Buffer.from('Content-Type');
const V_JSON = Buffer.from('application/json; charset=utf-8');
/** The header that carries each answer's request id (docs/behaviour.md "Errors"). */
export const REQUEST_ID_HEADER = 'X-Request-ID';
const H_REQUEST_ID = Buffer.from(REQUEST_ID_HEADER);
const H_CACHE_CONTROL = Buffer.from('Cache-Control');
const V_NO_STORE = Buffer.from('no-store');
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Writes a JSON answer under cork: status, `Content-Type: application/json; charset=utf-8`,
 * `X-Request-ID`, `Cache-Control: no-store`, then the headers of `extra` and `more` (later ones
 * may repeat a name), then `body` (JSON text). `close` closes the connection after it. `head`
 * (a HEAD request, RFC 9110 §9.3.2): the same head with `Content-Length` of `body` and no body.
 */
export function writeJson(res: uWS.HttpResponse, status: number, requestId: string, body: string, extra?: Record<string, string>, more?: Record<string, string>, close = false, head = false): void {
  res.cork(() => {
    res.writeStatus(statusBytes(status));
    res.writeHeader(H_CONTENT_TYPE, V_JSON);
    res.writeHeader(H_REQUEST_ID, requestId);
    res.writeHeader(H_CACHE_CONTROL, V_NO_STORE);
    if (extra) for (const k in extra) res.writeHeader(k, extra[k]!);
    if (more) for (const k in more) res.writeHeader(k, more[k]!);
    if (head) endHead(res, Buffer.byteLength(body));
    else res.end(body, close);
  });
}

/** The headers `writeJson` sends, as the response observer reports them. */
export function jsonHeaders(requestId: string, extra?: Record<string, string>, more?: Record<string, string>): Record<string, string> {
  return { 'Content-Type': JSON_TYPE, 'X-Request-ID': requestId, ...extra, ...more };
}

/**
 * Writes a raw answer (status, headers, `X-Request-ID`, body; for HEAD the length only). Not
 * corked: call it synchronously in the route handler (inside uWS's own cork) or inside `res.cork`.
 */
export function writeRaw(res: uWS.HttpResponse, head: boolean, r: RawReply, requestId: string): void {
  res.writeStatus(r.status);
  for (const [k, v] of r.headers) res.writeHeader(k, v);
  res.writeHeader(H_REQUEST_ID, requestId);
  if (head) endHead(res, r.body.byteLength);
  else res.end(r.body);
}

/** HEAD: ends with `Content-Length: length` (what GET would send) and no body. */
export function endHead(res: uWS.HttpResponse, length: number): void {
  // Not endWithoutBody(length): this uWS build then fails to mark the response ended and aborts
  // the whole process ("Returning from a request handler without responding").
  res.writeHeader('Content-Length', String(length));
  res.endWithoutBody();
}

/**
 * The answers of one HTTP server: the writers above plus the response observer (tests check every
 * JSON and form answer against the OpenAPI document with it; it costs nothing when unset). Every
 * method checks `state` first: nothing is written after an abort or a first answer.
 */
export class Replies {
  /** Called with every JSON and form answer; null: none. */
  observer: ((r: ObservedResponse) => void) | null = null;
  /** Answers written, by route class and status (docs/metrics.md). */
  readonly tally = new HttpTally();

  constructor(private readonly log: Logger) {}

  /** Counts one answer of `status` to the request of `state`. */
  private count(state: ReqState, status: number): void {
    this.tally.add(state.route ?? routeClassOf(state.pattern ?? state.url ?? ''), status);
  }

  /** Answers `reply` as JSON with the request's `extra` headers (e.g. rate limits); an unserializable body answers 500. */
  json(res: uWS.HttpResponse, state: ReqState, reply: ApiReply, requestId: string, extra: Record<string, string>): void {
    if (state.aborted || state.answered) return;
    if (reply.text) {
      state.answered = true;
      this.count(state, reply.status);
      const headers: Record<string, string> = { ...jsonHeaders(requestId, extra, reply.headers), 'Content-Type': reply.text.contentType };
      const text = reply.text.body;
      res.cork(() => {
        res.writeStatus(statusBytes(reply.status));
        res.writeHeader(H_CACHE_CONTROL, V_NO_STORE);
        for (const k in headers) res.writeHeader(k, headers[k]!);
        if (state.method === 'HEAD') endHead(res, Buffer.byteLength(text));
        else res.end(text);
      });
      if (this.observer) this.observe(state, reply.status, headers, text);
      return;
    }
    let body: string;
    try {
      body = JSON.stringify(reply.body);
    } catch (e) {
      // Never let a throw escape into uWS (it would end the process) or into a promise callback.
      return this.error(res, state, e, requestId, extra);
    }
    state.answered = true;
    this.count(state, reply.status);
    writeJson(res, reply.status, requestId, body, extra, reply.headers, false, state.method === 'HEAD');
    if (this.observer) this.observe(state, reply.status, jsonHeaders(requestId, extra, reply.headers), body);
  }

  /** Answers the error envelope of `e` (see `toApiError`) with its headers; `close` closes the connection after it. */
  error(res: uWS.HttpResponse, state: ReqState, e: unknown, requestId: string, extra: Record<string, string> = {}, close = false): void {
    if (state.aborted || state.answered) return;
    const err = toApiError(e, requestId, this.log);
    const body = JSON.stringify(errorBody(err, requestId));
    state.answered = true;
    this.count(state, err.status);
    writeJson(res, err.status, requestId, body, extra, err.headers, close, state.method === 'HEAD');
    if (this.observer) this.observe(state, err.status, jsonHeaders(requestId, extra, err.headers), body);
  }

  /** Answers a form/HTML reply (its own headers, `X-Request-ID` added); `close` closes the connection after it. */
  web(res: uWS.HttpResponse, state: ReqState, r: WebReply, requestId: string, close = false): void {
    if (state.aborted || state.answered) return;
    state.answered = true;
    this.count(state, r.status);
    res.cork(() => {
      res.writeStatus(statusLine(r.status));
      res.writeHeader(H_REQUEST_ID, requestId);
      if (r.headers) for (const k in r.headers) res.writeHeader(k, r.headers[k]!);
      res.end(r.body ?? '', close);
    });
    if (this.observer) this.observe(state, r.status, { ...r.headers, 'X-Request-ID': requestId }, typeof r.body === 'string' ? r.body : Buffer.from(r.body ?? '').toString());
  }

  /** Answers a raw reply later (after an await): `writeRaw` under cork. */
  raw(res: uWS.HttpResponse, state: ReqState, head: boolean, r: RawReply, requestId: string): void {
    if (state.aborted || state.answered) return;
    state.answered = true;
    this.count(state, statusOf(r.status));
    if (!head && state.route !== undefined) this.tally.bytes[state.route]! += r.body.byteLength;
    res.cork(() => writeRaw(res, head, r, requestId));
  }

  /** Hands an answer written elsewhere (a `stream()` route) to the observer. */
  report(r: ObservedResponse): void {
    if (!this.observer) return;
    try {
      this.observer(r);
    } catch (e) {
      this.log.error('response observer failed', { err: String(e) });
    }
  }

  private observe(state: ReqState, status: number, headers: Record<string, string>, body: string): void {
    this.report({ method: state.method ?? '', pattern: state.pattern, url: state.url ?? '', status, headers, body });
  }
}
