/**
 * Streamed uploads over uWebSockets.js (PRODUCT.md §5 `PUT …/audio`): the request body goes
 * chunk by chunk from uWS `onData` into a file write stream, never buffered whole. When the file
 * stream is full (`write` returns false) the socket is paused (`res.pause()`) until it drains, so a
 * fast client cannot fill memory. A size cap is enforced on `Content-Length` up front and on the
 * bytes actually received. uWS rules (STYLE.md): request data copied first, `onAborted` before
 * anything async, every later write inside `cork`.
 */
import { createWriteStream, rmSync, type WriteStream } from 'node:fs';
import type uWS from 'uWebSockets.js';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import { errorBody, statusLine, type ApiReply, type ApiRequest, type HttpServer } from './server.js';

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
  /** OpenAPI description of the route (src/api/openapi/registry.ts `RouteDoc`). */
  doc?: unknown;
}

/**
 * Registers `method pattern` as a streamed upload (an `http.stream()` route: listed by `routes()`
 * with `opts.scope`/`opts.doc`, 405 for other methods). `:name` segments become `req.params`
 * (percent-decoded). Errors answer the API's JSON envelope; an error answered before the body was
 * fully read closes the connection (the unread bytes must not be parsed as another request).
 * Over `maxBytes` → 413 `body_too_large`; an empty body → 400 `body_missing`.
 */
export function registerUploadRoute<C>(http: HttpServer, method: 'put' | 'post', pattern: string, opts: UploadRouteOptions<C>): void {
  const nParams = (pattern.match(/:/g) ?? []).length;
  http.stream(method, pattern, (res, req) => {
    const requestId = newRequestId();
    const params: string[] = [];
    let badParam = false;
    for (let i = 0; i < nParams; i++) {
      const raw = req.getParameter(i) ?? '';
      try {
        params.push(decodeURIComponent(raw));
      } catch {
        badParam = true;
        params.push(raw);
      }
    }
    const request: ApiRequest = {
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
      remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
      requestId,
      body: {},
      responseHeaders: {},
    };
    const contentLengthHeader = req.getHeader('content-length');
    const chunked = req.getHeader('transfer-encoding') !== '';
    const hasBody = chunked || (contentLengthHeader !== '' && contentLengthHeader !== '0');

    const st = { aborted: false, answered: false };
    let file: WriteStream | null = null;
    let tempPath: string | null = null;
    const dropTemp = () => {
      if (file) file.destroy();
      file = null;
      if (tempPath) rmSync(tempPath, { force: true });
      tempPath = null;
    };
    res.onAborted(() => {
      st.aborted = true;
      dropTemp();
    });

    const send = (status: number, body: unknown, headers: Record<string, string> | undefined, close: boolean) => {
      if (st.aborted || st.answered) return;
      st.answered = true;
      const text = JSON.stringify(body);
      res.cork(() => {
        res.writeStatus(statusLine(status));
        res.writeHeader('Content-Type', 'application/json; charset=utf-8');
        res.writeHeader('X-Request-ID', requestId);
        res.writeHeader('Cache-Control', 'no-store');
        for (const k in request.responseHeaders) res.writeHeader(k, request.responseHeaders[k]!);
        if (headers) for (const k in headers) res.writeHeader(k, headers[k]!);
        res.end(text, close);
      });
      http.reportResponse({
        method: request.method,
        pattern,
        url: request.url,
        status,
        headers: { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-ID': requestId, ...request.responseHeaders, ...headers },
        body: text,
      });
    };
    const fail = (e: unknown, close: boolean) => {
      let err: ApiError;
      if (e instanceof ApiError) err = e;
      else {
        opts.log?.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
        err = new ApiError(500, 'internal_error', 'An internal error occurred. Quote the request id when you report it.');
      }
      send(err.status, errorBody(err, requestId), err.headers, close);
    };

    if (badParam) return fail(new ApiError(404, 'resource_missing', 'The URL holds a malformed percent-encoded segment.'), hasBody);
    let ctx: C;
    let maxBytes: number;
    try {
      ctx = opts.guard(request);
      if (!hasBody) throw new ApiError(400, 'body_missing', 'The request has no body: send the file as the raw request body.');
      const b = opts.begin(request, ctx);
      maxBytes = b.maxBytes;
      if (contentLengthHeader !== '' && Number(contentLengthHeader) > maxBytes) throw tooLarge(maxBytes);
      tempPath = b.tempPath;
      file = createWriteStream(tempPath, { flags: 'wx' });
    } catch (e) {
      dropTemp();
      return fail(e, hasBody);
    }

    let size = 0;
    let paused = false;
    const stream = file;
    stream.on('error', (e: Error) => {
      // A stream we dropped on purpose (abort, 413) may still report its queued writes: ignore.
      if (file !== stream || st.aborted || st.answered) return;
      dropTemp();
      fail(e, true);
    });
    stream.on('drain', () => {
      if (paused && !st.aborted && !st.answered) {
        paused = false;
        res.resume();
      }
    });
    res.onData((ab, isLast) => {
      if (st.aborted || st.answered || !file) return;
      size += ab.byteLength;
      if (size > maxBytes) {
        dropTemp();
        return fail(tooLarge(maxBytes), true);
      }
      // uWS neuters the ArrayBuffer when this callback returns: copy before handing it to fs.
      if (ab.byteLength > 0 && !file.write(Buffer.from(ab.slice(0))) && !isLast) {
        paused = true;
        res.pause();
      }
      if (!isLast) return;
      const f = file;
      const p = tempPath!;
      f.end(() => {
        if (st.aborted) return;
        file = null; // finished: the file now belongs to `finish`
        tempPath = null;
        if (size === 0) {
          rmSync(p, { force: true });
          return fail(new ApiError(400, 'body_missing', 'The request body is empty: send the file as the raw request body.'), false);
        }
        let reply: Promise<ApiReply>;
        try {
          reply = opts.finish(request, ctx, p, size);
        } catch (e) {
          rmSync(p, { force: true });
          return fail(e, false);
        }
        reply.then(
          (r) => send(r.status, r.body, r.headers, false),
          (e) => fail(e, false),
        );
      });
    });
  }, { scope: opts.scope, doc: opts.doc });
}

const tooLarge = (max: number) => new ApiError(413, 'body_too_large', `The request body is larger than the limit of ${max} bytes.`);
