/**
 * The progressive route kind (`HttpServer.progressive`: Icecast-style listening, src/delivery/progressive/): a
 * GET/HEAD whose answer is either a normal raw reply (404, 401/403, 429 …) or one long streamed
 * response. The handler runs synchronously and reads what it needs of the request there; for a
 * stream this layer writes the status and headers, then hands the handler's `open` a sink to write
 * the body through (chunked transfer coding) and calls the function `open` returned when the
 * client goes away. HEAD answers the headers only (no `Content-Length`: the body has none).
 *
 * uWS rules (docs/architecture.md): `onAborted` is attached before anything else; the sink corks writes made
 * outside the request callback; after an abort or the end nothing touches the response; no
 * exception of the handler or of the sink's callbacks escapes into uWS.
 */
import type uWS from 'uWebSockets.js';
import { newRequestId } from '../../ids.js';
import { writeRaw, type RawReply } from '../reply.js';
import { paramCount, remoteAddressOf } from '../request.js';
import type { RouteHost } from './host.js';

const H_REQUEST_ID = Buffer.from('X-Request-ID');

/** What a progressive handler may read of its request while it runs (synchronously). */
export interface ProgressiveRequest {
  method: 'GET' | 'HEAD';
  /** Path parameters, raw (not percent-decoded). */
  params: string[];
  /** The query string without `?` ('' for none). */
  query: string;
  /** A request header by lower-case name ('' when absent); only while the handler runs. */
  header(name: string): string;
  /** The socket peer's address as text (IPv6 in full form). */
  remoteAddress: string;
  requestId: string;
}

/**
 * The body writer of a streamed response. `write` hands bytes to uWS, which keeps all of them; it
 * returns false when they could not all be sent now (backpressure: wait for `onWritable`). Writes
 * outside the request callback go inside `cork`. After `end`, `close` or the client's going away,
 * every call does nothing (`write` returns false).
 */
export interface ProgressiveSink {
  write(chunk: Uint8Array): boolean;
  cork(fn: () => void): void;
  /** `cb` runs when the socket drained after backpressure (replaces an earlier one). */
  onWritable(cb: () => void): void;
  /** Ends the response (the terminating chunk) after what was written. */
  end(): void;
  /** Closes the connection at once (the client's `gone` function then runs). */
  close(): void;
  /** Whether the response is over (ended, closed or aborted). */
  readonly done: boolean;
}

/** A streamed answer: status (default `200 OK`), headers, and what writes the body (GET only). */
export interface ProgressiveStream {
  status?: string;
  headers: ReadonlyArray<readonly [string | Uint8Array, string | Uint8Array]>;
  /**
   * GET only, called synchronously once status and headers are written (inside uWS's cork, so the
   * first writes go out with them). Returns the function to call when the client goes away (or
   * the sink is closed) — once, never after `sink.end()`.
   */
  open(sink: ProgressiveSink): () => void;
}

/** A progressive handler's answer: a normal raw reply, or `{ stream }`. */
export type ProgressiveAnswer = RawReply | { stream: ProgressiveStream };

export type ProgressiveHandler = (req: ProgressiveRequest) => ProgressiveAnswer;

/** Registers the uWS handler of a progressive route for `method` (see `HttpServer.progressive`). */
export function registerProgressiveRoute(host: RouteHost, method: 'get' | 'head', pattern: string, handler: ProgressiveHandler): void {
  const nParams = paramCount(pattern);
  const head = method === 'head';
  const { replies, log } = host;
  host.app[method](pattern, (res, req) => {
    const requestId = newRequestId();
    const params: string[] = [];
    for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
    let live = true;
    const request: ProgressiveRequest = {
      method: head ? 'HEAD' : 'GET',
      params,
      query: req.getQuery() ?? '',
      header: (name) => (live ? req.getHeader(name) : ''),
      remoteAddress: remoteAddressOf(res, req),
      requestId,
    };
    let answer: ProgressiveAnswer;
    try {
      answer = handler(request);
    } catch (e) {
      // An exception escaping a uWS callback ends the process: answer 500 instead.
      return replies.error(res, { aborted: false }, e, requestId);
    } finally {
      live = false;
    }
    if (!('stream' in answer)) return writeRaw(res, head, answer, requestId);
    const s = answer.stream;
    if (head) {
      writeHead(res, s, requestId);
      // No Content-Length: a progressive stream has no length (uWS writes none without an argument).
      res.endWithoutBody();
      return;
    }
    openStream(res, s, requestId, log);
  });
}

function writeHead(res: uWS.HttpResponse, s: ProgressiveStream, requestId: string): void {
  res.writeStatus(s.status ?? '200 OK');
  for (const [k, v] of s.headers) res.writeHeader(k, v);
  res.writeHeader(H_REQUEST_ID, requestId);
}

/**
 * The sink over one streamed response. One object per listener with its methods on the prototype
 * (a progressive listener lives for hours, and what it keeps is memory per listener,
 * docs/benchmarks.md "Where a listener's memory goes"); uWS's callbacks are its bound methods.
 */
class ResponseSink implements ProgressiveSink {
  done = false;
  /** The stream's function for the client's going away (null once called, or after `end`). */
  gone: (() => void) | null = null;
  private writable: (() => void) | null = null;

  constructor(
    private readonly res: uWS.HttpResponse,
    private readonly requestId: string,
    private readonly log: RouteHost['log'],
  ) {}

  write(chunk: Uint8Array): boolean {
    return this.done ? false : this.res.write(chunk);
  }

  cork(fn: () => void): void {
    if (!this.done) this.res.cork(fn);
  }

  onWritable(cb: () => void): void {
    this.writable = cb;
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.gone = null;
    const res = this.res;
    res.cork(() => res.end());
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.res.close(); // runs onAborted, which calls `gone`
    this.leave();
  }

  /** The client went away (uWS `onAborted`). */
  aborted(): void {
    this.done = true;
    this.leave();
  }

  /** The socket drained (uWS `onWritable`). */
  drained(): boolean {
    if (!this.done && this.writable) {
      try {
        this.writable();
      } catch (e) {
        this.log.error('progressive stream: writable handler failed', { requestId: this.requestId, err: e instanceof Error ? e.stack : String(e) });
      }
    }
    return true;
  }

  /** Runs `gone` once. */
  leave(): void {
    const g = this.gone;
    this.gone = null;
    if (!g) return;
    try {
      g();
    } catch (e) {
      this.log.error('progressive stream: gone handler failed', { requestId: this.requestId, err: e instanceof Error ? e.stack : String(e) });
    }
  }
}

/** Writes status and headers, then runs the stream's `open` with a sink over `res`. */
function openStream(res: uWS.HttpResponse, s: ProgressiveStream, requestId: string, log: RouteHost['log']): void {
  const sink = new ResponseSink(res, requestId, log);
  // Bound methods, not closures: no context object per listener.
  res.onAborted(sink.aborted.bind(sink));
  res.onWritable(sink.drained.bind(sink));
  writeHead(res, s, requestId);
  try {
    sink.gone = s.open(sink);
  } catch (e) {
    log.error('progressive stream: open failed', { requestId, err: e instanceof Error ? e.stack : String(e) });
    sink.close();
    return;
  }
  if (sink.done) sink.leave(); // closed (or aborted) during open
}
