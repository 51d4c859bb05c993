/**
 * GET/HEAD routes that answer bytes with HTTP caching semantics over uWebSockets.js: feeds
 * (pre-rendered bytes) and episode audio (files streamed from disk). Conditional requests
 * (`If-None-Match`, `If-Modified-Since` → 304), `Accept-Ranges: bytes`, single byte ranges (206 with
 * `Content-Range`, 416 when unsatisfiable, `If-Range`), HEAD with the headers GET would send.
 * Files are streamed with uWS backpressure: each chunk read from disk goes through `tryEnd`; when
 * the socket is full the next read waits for `onWritable` (docs/architecture.md "uWS rules" 2–4).
 */
import { close, openSync, read } from 'node:fs';
import type uWS from 'uWebSockets.js';
import parseRange from 'range-parser';
import type { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import { endHead, errorBody, statusLine, toApiError } from './reply.js';
import { remoteAddressOf } from './request.js';
import type { HttpServer } from './server.js';
import { routeClassOf } from './tally.js';

/** What a handler sees: copied out of uWS's request. */
export interface BytesRequest {
  method: 'GET' | 'HEAD';
  /** Path parameters (`:name`), raw (not percent-decoded: validate them against a strict pattern). */
  params: string[];
  requestId: string;
  /** The socket peer's address (for a request a worker thread forwarded: the client address it saw). */
  peer: string;
  /** `X-Forwarded-For`, raw ('' when absent). */
  forwardedFor: string;
  /** `User-Agent` ('' when absent). */
  userAgent: string;
}

/** Validators and caching of an answer. */
interface Cacheable {
  /** Strong entity tag, quoted (`"abc"`). */
  etag: string;
  /** Last change (ms since epoch). */
  lastModified: number;
  contentType: string;
  cacheControl: string;
  headers?: Record<string, string>;
}

/** An in-memory body (e.g. a rendered feed). */
export interface BytesAnswer extends Cacheable {
  kind: 'bytes';
  body: Uint8Array;
}

/** A file on disk of `size` bytes, streamed (ranges allowed). The file must not change under this name. */
export interface FileAnswer extends Cacheable {
  kind: 'file';
  path: string;
  size: number;
  /**
   * Called once when a GET starts streaming a body of `length` bytes (not for HEAD, 304 or 416);
   * may return a function told the body bytes written as they go: each call gets the bytes uWS
   * reported written (`getWriteOffset`) since the previous call, after every chunk handed over;
   * on completion the rest of `length`; on an abort nothing more (the last reported offset
   * stands). So the calls sum to what the socket took, never to what was only read from disk.
   */
  observe?: (length: number) => ((bytes: number) => void) | null;
}

/** Not there: an API error envelope (usually 404). */
export interface ErrorAnswer {
  kind: 'error';
  error: ApiError;
}

export type Answer = BytesAnswer | FileAnswer | ErrorAnswer;

/** Chunk size of file reads (bytes). */
const READ_CHUNK = 256 * 1024;

/**
 * Registers GET and HEAD on `pattern` (as `http.stream()` routes: listed by `routes()`, 405 with
 * `Allow: GET, HEAD` for other methods). `resolve` runs synchronously in the uWS callback and decides
 * the answer; a thrown error answers 500 (logged by the caller's `onError`).
 */
export function registerBytesRoute(
  http: HttpServer,
  pattern: string,
  resolve: (req: BytesRequest) => Answer,
  onError?: (e: unknown, requestId: string) => void,
): void {
  const nParams = (pattern.match(/:/g) ?? []).length;
  const route = routeClassOf(pattern);
  const { tally } = http.replies;
  for (const method of ['get', 'head'] as const) {
    http.stream(method, pattern, (res, req) => {
      const requestId = newRequestId();
      const params: string[] = [];
      for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
      const h = {
        ifNoneMatch: req.getHeader('if-none-match'),
        ifModifiedSince: req.getHeader('if-modified-since'),
        range: req.getHeader('range'),
        ifRange: req.getHeader('if-range'),
      };
      const who = { peer: remoteAddressOf(res, req), forwardedFor: req.getHeader('x-forwarded-for'), userAgent: req.getHeader('user-agent') };
      let answer: Answer;
      try {
        answer = resolve({ method: method === 'get' ? 'GET' : 'HEAD', params, requestId, ...who });
      } catch (e) {
        onError?.(e, requestId);
        answer = { kind: 'error', error: toApiError(e, requestId, undefined) };
      }
      tally.add(route, answerRequest(res, method === 'head', answer, h, requestId));
    }, { kind: 'raw' });
  }
}

interface CondHeaders {
  ifNoneMatch: string;
  ifModifiedSince: string;
  range: string;
  ifRange: string;
}

/** Whether an `If-None-Match` list names `etag` (weak comparison, RFC 9110 §13.1.2). */
function noneMatchHits(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === bare);
}

const httpDate = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toUTCString();

/** Writes the answer `a`; @returns its status (counted by the server's tally: docs/metrics.md). */
function answerRequest(res: uWS.HttpResponse, head: boolean, a: Answer, h: CondHeaders, requestId: string): number {
  if (a.kind === 'error') {
    res.writeStatus(statusLine(a.error.status));
    res.writeHeader('Content-Type', 'application/json; charset=utf-8');
    res.writeHeader('X-Request-ID', requestId);
    res.writeHeader('Cache-Control', 'no-store');
    const body = JSON.stringify(errorBody(a.error, requestId));
    if (head) endHead(res, Buffer.byteLength(body));
    else res.end(body);
    return a.error.status;
  }
  const size = a.kind === 'bytes' ? a.body.byteLength : a.size;
  const common = () => {
    res.writeHeader('X-Request-ID', requestId);
    res.writeHeader('ETag', a.etag);
    res.writeHeader('Last-Modified', httpDate(a.lastModified));
    res.writeHeader('Cache-Control', a.cacheControl);
    res.writeHeader('Accept-Ranges', 'bytes');
    if (a.headers) for (const k in a.headers) res.writeHeader(k, a.headers[k]!);
  };
  // RFC 9110 §13.2.2: If-None-Match wins over If-Modified-Since.
  const notModified = h.ifNoneMatch
    ? noneMatchHits(h.ifNoneMatch, a.etag)
    : h.ifModifiedSince !== '' && Number.isFinite(Date.parse(h.ifModifiedSince)) && Math.floor(a.lastModified / 1000) * 1000 <= Date.parse(h.ifModifiedSince);
  if (notModified) {
    res.writeStatus('304 Not Modified');
    common();
    res.endWithoutBody();
    return 304;
  }
  // Range (RFC 9110 §14.2): one range served as 206; several, a malformed header or a stale If-Range → the whole body.
  let start = 0;
  let end = size - 1;
  let partial = false;
  const ifRangeOk = h.ifRange === '' || h.ifRange === a.etag || (!h.ifRange.startsWith('"') && !h.ifRange.startsWith('W/') && Date.parse(h.ifRange) >= Math.floor(a.lastModified / 1000) * 1000);
  if (h.range !== '' && ifRangeOk) {
    const r = parseRange(size, h.range, { combine: true });
    if (r === -1) {
      res.writeStatus('416 Range Not Satisfiable');
      common();
      res.writeHeader('Content-Range', `bytes */${size}`);
      if (head) endHead(res, 0);
      else res.end();
      return 416;
    }
    if (r !== -2 && r.type === 'bytes' && r.length === 1) {
      start = r[0]!.start;
      end = r[0]!.end;
      partial = true;
    }
  }
  const length = size === 0 ? 0 : end - start + 1;
  const status = partial ? 206 : 200;
  res.writeStatus(partial ? '206 Partial Content' : '200 OK');
  common();
  res.writeHeader('Content-Type', a.contentType);
  if (partial) res.writeHeader('Content-Range', `bytes ${start}-${end}/${size}`);
  if (head) {
    endHead(res, length);
    return status;
  }
  if (a.kind === 'bytes') {
    res.end(partial ? a.body.subarray(start, end + 1) : a.body);
    return status;
  }
  if (length === 0) {
    res.end();
    return status;
  }
  streamFile(res, a.path, start, end, length, a.observe?.(length) ?? null);
  return status;
}

/**
 * Open file descriptors by path, shared by concurrent responses and closed after `FD_IDLE_MS`
 * unused (like nginx's open_file_cache: no open/close per request). Files served here are never
 * rewritten under the same name; a deleted file is refused before it gets here (the caller's
 * lookup), and its descriptor closes once idle.
 */
const FD_IDLE_MS = 30_000;
const fds = new Map<string, { fd: number; refs: number; idleSince: number }>();
let sweeper: NodeJS.Timeout | null = null;

function acquireFd(path: string): number {
  let e = fds.get(path);
  if (!e) {
    e = { fd: openSync(path, 'r'), refs: 0, idleSince: 0 };
    fds.set(path, e);
    if (!sweeper) {
      sweeper = setInterval(() => {
        const now = Date.now();
        for (const [p, x] of fds) {
          if (x.refs === 0 && now - x.idleSince > FD_IDLE_MS) {
            fds.delete(p);
            close(x.fd, () => {});
          }
        }
        if (fds.size === 0 && sweeper) {
          clearInterval(sweeper);
          sweeper = null;
        }
      }, FD_IDLE_MS / 2);
      sweeper.unref();
    }
  }
  e.refs++;
  return e.fd;
}

function releaseFd(path: string): void {
  const e = fds.get(path);
  if (!e) return;
  e.refs--;
  if (e.refs === 0) e.idleSince = Date.now();
}

/**
 * Streams bytes `start..end` (inclusive) of `path` as the response body of `length` bytes, with
 * backpressure: one buffer per response, filled by `fs.read` at a position; each chunk goes to
 * `tryEnd`, and when the socket could not take all of it the rest waits for `onWritable` before the
 * next read. Status and headers are already written (synchronously).
 */
function streamFile(res: uWS.HttpResponse, path: string, start: number, end: number, length: number, sent: ((bytes: number) => void) | null): void {
  let fd: number;
  try {
    fd = acquireFd(path);
  } catch {
    res.close(); // headers are out; the file vanished between lookup and open
    return;
  }
  let done = false;
  let pos = start;
  let remaining = end - start + 1;
  const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, length));
  let pending: Uint8Array | null = null;
  let pendingOffset = 0;
  // Body bytes reported to `sent` so far; reported up to uWS's write offset after each write.
  let reported = 0;
  const report = (offset: number) => {
    if (sent && offset > reported) {
      const n = offset - reported;
      reported = offset;
      try {
        sent(n);
      } catch {
        sent = null; // an observer's failure never ends the response (nor escapes into uWS)
      }
    }
  };
  const finish = () => {
    if (done) return;
    done = true;
    releaseFd(path);
  };
  res.onAborted(finish);
  res.onWritable((off) => {
    if (done || !pending) return true;
    const [ok, responded] = res.tryEnd(pending.subarray(off - pendingOffset), length);
    if (responded) {
      report(length);
      finish();
      return true;
    }
    report(res.getWriteOffset());
    if (ok) {
      pending = null;
      readNext();
    }
    return ok;
  });
  const readNext = (): void => {
    read(fd, buf, 0, Math.min(buf.length, remaining), pos, (err, n) => {
      if (done) return;
      if (err || n === 0) {
        finish();
        res.cork(() => res.close()); // headers are out: closing is the only honest signal left
        return;
      }
      pos += n;
      remaining -= n;
      const chunk = buf.subarray(0, n);
      const offset = res.getWriteOffset();
      let ok = false;
      let responded = false;
      res.cork(() => {
        [ok, responded] = res.tryEnd(chunk, length);
      });
      if (responded) {
        report(length);
        return finish();
      }
      report(res.getWriteOffset());
      if (ok) {
        if (remaining > 0) readNext();
        return;
      }
      pending = chunk;
      pendingOffset = offset;
    });
  };
  readNext();
}
