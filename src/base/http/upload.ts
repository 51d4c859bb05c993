/**
 * Streamed uploads over uWebSockets.js (docs/behaviour.md §5 `PUT …/audio`): the request body goes
 * chunk by chunk from the body reader (src/base/http/body.ts, streaming mode) into a file write stream,
 * never buffered whole. When the file stream is full (`write` returns false) the socket is paused
 * until it drains, so a fast client cannot fill memory. A size cap is enforced on `Content-Length`
 * up front and on the bytes actually received; a disk floor (docs/behaviour.md §13) on the free space of
 * the volume written to, before the first byte and while writing. Every refusal drains the body
 * first, so the answer reaches the client. uWS rules (docs/architecture.md): request data copied first,
 * `onAborted` before anything async, every later write inside `cork`.
 */
import { createWriteStream, rmSync, statfsSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import type uWS from 'uWebSockets.js';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Limits } from '../limits/limits.js';
import { DRAIN_MAX_BYTES, RequestBody, announcesBody, type BodySink } from './body.js';
import { toApiError, type ApiReply, type ReqState } from './reply.js';
import { decodedParams, paramCount, remoteAddressOf } from './request.js';
import type { ApiRequest } from './routes/api.js';
import type { HttpServer } from './server.js';

/** While writing, the free space is measured again after at most this many bytes (and whenever the estimate nears the floor). */
export const DISK_CHECK_BYTES = 1024 * 1024;

/** How an upload route handles one request. All callbacks may throw ApiError to refuse. */
export interface UploadRouteOptions<C> {
  /** Authenticates and authorizes (synchronously, before any body byte is read); its result is `ctx`. */
  guard: (req: ApiRequest) => C;
  /**
   * Checks the target and the announced body (synchronously, before reading): e.g. 404 for an
   * unknown object, 415 for a `Content-Type` that cannot be right. Returns where to write the body
   * (a temporary file, created fresh) and the largest body accepted (bytes).
   */
  begin: (req: ApiRequest, ctx: C) => { tempPath: string; maxBytes: number };
  /**
   * Runs once the whole body is on disk at `tempPath` (`sizeBytes` long). It owns the file from
   * then on (move it or delete it). Its reply is sent as JSON.
   */
  finish: (req: ApiRequest, ctx: C, tempPath: string, sizeBytes: number) => Promise<ApiReply>;
  log?: { error(msg: string, fields?: Record<string, unknown>): void };
  /** The scope `guard` requires: listed by `http.routes()` (scope map, OpenAPI). */
  scope?: string;
  /** OpenAPI description of the route (src/control/api/openapi/registry.ts `RouteDoc`). */
  doc?: unknown;
  /**
   * The disk floor (bytes, `config.limits.minFreeDiskBytes`): free space that must remain on the
   * volume of `tempPath` (`fs.statfs`, blocks available to unprivileged users). Checked before the
   * first byte is read (free space minus `Content-Length`, when announced) and while the body is
   * written (see `DISK_CHECK_BYTES`); under it → 507 `insufficient_storage`. 0 or absent: no
   * check. Either way a write failing with `ENOSPC`/`EDQUOT` answers 507 too.
   */
  minFreeDiskBytes?: number;
  /** Counts the limits hit (`http_body_bytes` for 413, `disk_free` for 507; docs/behaviour.md §13). */
  limits?: Limits;
}

/** 507 `insufficient_storage` (the node's data volume is (nearly) full). */
const insufficientStorage = () =>
  new ApiError('insufficient_storage', 'The server does not have enough free disk space to store this upload. Try again later or contact the operator.');

/** Free bytes of the volume holding `dir` (`statfs`), or Infinity when it cannot be measured (a full disk then still fails with ENOSPC). */
function freeBytes(dir: string): number {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return Infinity;
  }
}

/**
 * Registers `method pattern` as a streamed upload (an `http.stream()` route: listed by `routes()`
 * with `opts.scope`/`opts.doc`, 405 for other methods). `:name` segments become `req.params`
 * (percent-decoded). Errors answer the API's JSON envelope; an error answered before the body was
 * fully read drains the body first (src/base/http/body.ts: bounded in bytes and time, then closed).
 * Over `maxBytes` → 413 `body_too_large`; an empty body → 400 `body_missing`; under the disk floor
 * or out of space → 507 `insufficient_storage`. A refused upload leaves no file behind and
 * `finish` is not called (the target stays as it was).
 */
export function registerUploadRoute<C>(http: HttpServer, method: 'put' | 'post', pattern: string, opts: UploadRouteOptions<C>): void {
  const route: UploadRoute<C> = { http, pattern, opts, nParams: paramCount(pattern), floor: opts.minFreeDiskBytes ?? 0 };
  http.stream(method, pattern, (res, req) => upload(route, res, req), { scope: opts.scope, doc: opts.doc });
}

/** What every request of one upload route uses: bound once by `registerUploadRoute`. */
interface UploadRoute<C> {
  http: HttpServer;
  pattern: string;
  opts: UploadRouteOptions<C>;
  nParams: number;
  /** The disk floor (bytes; 0: no check). */
  floor: number;
}

/** One upload: its reply state and the temporary file being written (null once dropped or handed to `finish`). */
interface UploadState extends ReqState {
  file: WriteStream | null;
  tempPath: string | null;
}

/** A sink that keeps nothing: the body of an upload refused for its announced length is only drained. */
const DISCARD: BodySink = { write: () => true, end: () => {}, cancel: () => {} };

/** Closes and deletes the upload's temporary file, if it still has one. */
function dropTemp(u: UploadState): void {
  if (u.file) u.file.destroy();
  u.file = null;
  if (u.tempPath) rmSync(u.tempPath, { force: true });
  u.tempPath = null;
}

/** The upload handler: copies the request, runs `guard` and `begin` before any body byte is read, then receives the body. */
function upload<C>(route: UploadRoute<C>, res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  const { http, opts } = route;
  const requestId = newRequestId();
  const { params, bad: badParam } = decodedParams(req, route.nParams);
  const request = uploadRequest(res, req, params, requestId);
  const u: UploadState = { aborted: false, answered: false, method: request.method, pattern: route.pattern, url: request.url, file: null, tempPath: null };
  const onAbort = () => {
    u.aborted = true;
    dropTemp(u);
  };
  // Answers through the server's reply writers (so the response observer sees them); unexpected errors are logged by `opts.log`.
  const fail = (e: unknown, close: boolean) => http.replies.error(res, u, toApiError(e, requestId, opts.log), requestId, request.responseHeaders, close);
  /** Refuses a body not read yet: drained (up to the largest allowance: uploads are big), then answered. */
  const refuseUnread = (e: unknown) => new RequestBody(res, req, { maxBytes: 0, drainBytes: DRAIN_MAX_BYTES, onAbort }).refuse((close) => fail(e, close));

  if (badParam) return refuseUnread(new ApiError('resource_missing', 'The URL holds a malformed percent-encoded segment.'));
  let ctx: C;
  let target: { tempPath: string; maxBytes: number };
  try {
    ctx = opts.guard(request);
    if (!announcesBody(req)) throw new ApiError('body_missing', 'The request has no body: send the file as the raw request body.');
    target = opts.begin(request, ctx);
  } catch (e) {
    return refuseUnread(e);
  }
  const { maxBytes } = target;
  const body = new RequestBody(res, req, {
    maxBytes,
    onAbort,
    onTooLarge: () => opts.limits?.hit('http_body_bytes', request.remoteAddress, { maxBytes }),
  });
  receive(route, res, u, body, request, ctx, target, fail);
}

/** What an upload handler sees: everything copied out of uWS's request (the session headers too: dashboard uploads). */
function uploadRequest(res: uWS.HttpResponse, req: uWS.HttpRequest, params: string[], requestId: string): ApiRequest {
  return {
    method: req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    params,
    headers: {
      authorization: req.getHeader('authorization'),
      contentType: req.getHeader('content-type'),
      idempotencyKey: req.getHeader('idempotency-key'),
      userAgent: req.getHeader('user-agent'),
      forwardedFor: req.getHeader('x-forwarded-for'),
      cookie: req.getHeader('cookie'),
      origin: req.getHeader('origin'),
      csrfToken: req.getHeader('x-csrf-token'),
    },
    remoteAddress: remoteAddressOf(res, req),
    requestId,
    body: {},
    responseHeaders: {},
  };
}

/**
 * Writes the body into a fresh file at `target.tempPath`, under the size cap and the disk floor
 * (checked before the first byte, then at least every `DISK_CHECK_BYTES`); hands the whole file to
 * `finish` (see `handOver`).
 */
function receive<C>(
  route: UploadRoute<C>,
  res: uWS.HttpResponse,
  u: UploadState,
  body: RequestBody,
  request: ApiRequest,
  ctx: C,
  target: { tempPath: string; maxBytes: number },
  fail: (e: unknown, close: boolean) => void,
): void {
  const { opts, floor } = route;
  const dir = path.dirname(target.tempPath);
  // Drops the partial file at once, then drains the body and answers 507.
  const diskFull = (free: number) => {
    opts.limits?.hit('disk_free', request.remoteAddress, { freeBytes: free, minFreeBytes: floor });
    dropTemp(u);
    body.refuse((close) => fail(insufficientStorage(), close));
  };
  // An announced length over the cap: no file; the reader answers 413 (after the drain).
  if (body.contentLength !== null && body.contentLength > target.maxBytes) return body.stream(DISCARD, fail);
  // The floor, before the first byte: the announced length must fit above it.
  let lastFree = floor > 0 ? freeBytes(dir) : Infinity;
  if (floor > 0 && lastFree - (body.contentLength ?? 0) < floor) return diskFull(lastFree);
  let stream: WriteStream;
  try {
    stream = u.file = createWriteStream(target.tempPath, { flags: 'wx' });
    u.tempPath = target.tempPath;
  } catch (e) {
    return body.refuse((close) => fail(e, close));
  }

  let handed = 0; // bytes given to the file stream
  let sinceCheck = 0; // of which since the free space was last measured
  stream.on('error', (e: NodeJS.ErrnoException) => {
    // A stream we dropped on purpose (abort, 413, 507) may still report its queued writes: ignore.
    if (u.file !== stream || u.aborted || u.answered) return;
    if (e.code === 'ENOSPC' || e.code === 'EDQUOT') return diskFull(floor > 0 ? freeBytes(dir) : 0);
    dropTemp(u);
    body.refuse((close) => fail(e, close));
  });
  stream.on('drain', () => body.resume());
  body.stream(
    {
      write: (chunk) => {
        if (floor > 0) {
          sinceCheck += chunk.length;
          if (sinceCheck >= DISK_CHECK_BYTES || lastFree - sinceCheck < floor) {
            // Bytes still queued in the stream are not on disk yet: count them as used.
            const free = freeBytes(dir) - (handed - stream.bytesWritten);
            if (free - chunk.length < floor) {
              diskFull(free);
              return true;
            }
            lastFree = free;
            sinceCheck = chunk.length;
          }
        }
        handed += chunk.length;
        return stream.write(chunk);
      },
      end: (size) => {
        stream.end((err?: Error | null) => {
          // A failed final write is answered by the 'error' listener.
          if (err || u.aborted || u.file !== stream) return;
          handOver(route, res, u, request, ctx, size, fail);
        });
      },
      cancel: () => dropTemp(u),
    },
    fail,
  );
}

/** The whole body is on disk (`size` bytes): the file now belongs to `finish`, whose reply is answered (an empty body: 400 `body_missing`). */
function handOver<C>(route: UploadRoute<C>, res: uWS.HttpResponse, u: UploadState, request: ApiRequest, ctx: C, size: number, fail: (e: unknown, close: boolean) => void): void {
  const p = u.tempPath!;
  u.file = null; // finished: the file now belongs to `finish`
  u.tempPath = null;
  if (size === 0) {
    rmSync(p, { force: true });
    return fail(new ApiError('body_missing', 'The request body is empty: send the file as the raw request body.'), false);
  }
  let reply: Promise<ApiReply>;
  try {
    reply = route.opts.finish(request, ctx, p, size);
  } catch (e) {
    rmSync(p, { force: true });
    return fail(e, false);
  }
  reply.then(
    (r) => route.http.replies.json(res, u, r, request.requestId, request.responseHeaders),
    (e) => fail(e, false),
  );
}
