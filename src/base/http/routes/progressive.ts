/**
 * The progressive route kind (`HttpServer.progressive`: Icecast-style listening, src/delivery/progressive/): a
 * GET/HEAD whose answer is either a normal raw reply (404, 401/403, 429 …) or one long streamed
 * response. The handler runs synchronously and reads what it needs of the request there; for a
 * stream this layer writes the status and headers, then hands the handler's `open` a sink to write
 * the body through (chunked transfer coding) and tells the client object `open` returned when the
 * socket drained after backpressure and when the client goes away. HEAD answers the headers only
 * (no `Content-Length`: the body has none).
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
import { RC, routeClassOf, statusOf } from '../tally.js';

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
 * returns false when they could not all be sent now (backpressure: wait for the client's
 * `writable`). Writes outside the request callback go inside `cork`. After `end`, `close` or the
 * client's going away, every call does nothing (`write` returns false).
 */
export interface ProgressiveSink {
  write(chunk: Uint8Array): boolean;
  cork(fn: () => void): void;
  /** Ends the response (the terminating chunk) after what was written. */
  end(): void;
  /** Closes the connection at once (the client's `gone` function then runs). */
  close(): void;
  /** Whether the response is over (ended, closed or aborted). */
  readonly done: boolean;
}

/**
 * Who a streamed body is written for, as `open` returns it: one object whose methods the sink
 * calls (no function per listener: docs/benchmarks.md "Where a listener's memory goes").
 */
export interface ProgressiveClient {
  /** The client went away, or the sink was closed: called once, never after `sink.end()`. */
  gone(): void;
  /** The socket drained after a `write` returned false (backpressure). */
  writable(): void;
}

/** A streamed answer: status (default `200 OK`), headers, and what writes the body (GET only). */
export interface ProgressiveStream {
  status?: string;
  headers: ReadonlyArray<readonly [string | Uint8Array, string | Uint8Array]>;
  /**
   * GET only, called synchronously once status and headers are written (inside uWS's cork, so the
   * first writes go out with them). Returns the client the sink reports to.
   */
  open(sink: ProgressiveSink): ProgressiveClient;
}

/** A client that wants no report (a body that needs no cleanup). */
export const NO_CLIENT: ProgressiveClient = { gone() {}, writable() {} };

/**
 * The answer of a handler that leaves the request to the next route matching it (uWS
 * `setYield`): on a worker thread, the forwarding route (src/base/http/proxy.ts).
 */
export const YIELD: { readonly yield: true } = Object.freeze({ yield: true as const });

/** A progressive handler's answer: a normal raw reply, `{ stream }`, or YIELD. */
export type ProgressiveAnswer = RawReply | { stream: ProgressiveStream } | typeof YIELD;

export type ProgressiveHandler = (req: ProgressiveRequest) => ProgressiveAnswer;

/** Registers the uWS handler of a progressive route for `method` (see `HttpServer.progressive`). */
export function registerProgressiveRoute(host: RouteHost, method: 'get' | 'head', pattern: string, handler: ProgressiveHandler): void {
  const nParams = paramCount(pattern);
  const head = method === 'head';
  const { replies, log } = host;
  const route = routeClassOf(pattern);
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
      return replies.error(res, { aborted: false, route }, e, requestId);
    } finally {
      live = false;
    }
    if ('yield' in answer) return void req.setYield(true);
    if (!('stream' in answer)) {
      replies.tally.add(route, statusOf(answer.status));
      return writeRaw(res, head, answer, requestId);
    }
    const s = answer.stream;
    replies.tally.add(route, s.status ? statusOf(s.status) : 200);
    if (head) {
      writeHead(res, s, requestId);
      // No Content-Length: a progressive stream has no length (uWS writes none without an argument).
      res.endWithoutBody();
      return;
    }
    openStream(res, s, requestId, host);
  });
}

function writeHead(res: uWS.HttpResponse, s: ProgressiveStream, requestId: string): void {
  res.writeStatus(s.status ?? '200 OK');
  for (const [k, v] of s.headers) res.writeHeader(k, v);
  res.writeHeader(H_REQUEST_ID, requestId);
}

/** `ResponseSink` state: the response is over. */
const DONE = 1;
/** `ResponseSink` state: uWS's `onWritable` is registered. */
const WATCHING = 2;

/**
 * The sink over one streamed response. One object per listener with its methods on the prototype
 * (a progressive listener lives for hours, and what it keeps is memory per listener,
 * docs/benchmarks.md "Where a listener's memory goes"): uWS's `onAborted` is its bound method, and
 * its `onWritable` is registered only when a write first meets backpressure (most listeners
 * never do, and each registration keeps a function and two V8 global handles per response). It
 * keeps no request id (a string per listener): the response carried it in `X-Request-ID`.
 */
class ResponseSink implements ProgressiveSink {
  /** DONE and WATCHING: one small integer, not a field each. */
  private state = 0;
  /** What `open` returned (null before, once told it is gone, or after `end`). */
  client: ProgressiveClient | null = null;

  constructor(
    private readonly res: uWS.HttpResponse,
    /** The server's log and reply writers (their tally counts the bytes written: docs/metrics.md). */
    private readonly host: Pick<RouteHost, 'log' | 'replies'>,
  ) {}

  /** Whether the response is over (ended, closed or aborted). */
  get done(): boolean {
    return (this.state & DONE) !== 0;
  }

  write(chunk: Uint8Array): boolean {
    if (this.done) return false;
    this.host.replies.tally.bytes[RC.listen]! += chunk.byteLength;
    if (this.res.write(chunk)) return true;
    if ((this.state & WATCHING) === 0) {
      this.state |= WATCHING;
      this.res.onWritable(this.drained.bind(this));
    }
    return false;
  }

  cork(fn: () => void): void {
    if (!this.done) this.res.cork(fn);
  }

  end(): void {
    if (this.done) return;
    this.state |= DONE;
    this.client = null;
    this.res.cork(this.ended.bind(this));
  }

  private ended(): void {
    this.res.end();
  }

  close(): void {
    if (this.done) return;
    this.state |= DONE;
    this.res.close(); // runs onAborted, which calls `gone`
    this.leave();
  }

  /** The client went away (uWS `onAborted`). */
  aborted(): void {
    this.state |= DONE;
    this.leave();
  }

  /** The socket drained (uWS `onWritable`). */
  drained(): boolean {
    const c = this.client;
    if (!this.done && c) {
      try {
        c.writable();
      } catch (e) {
        this.host.log.error('progressive stream: writable handler failed', { err: e instanceof Error ? e.stack : String(e) });
      }
    }
    return true;
  }

  /** Tells the client it is gone, once. */
  leave(): void {
    const c = this.client;
    this.client = null;
    if (!c) return;
    try {
      c.gone();
    } catch (e) {
      this.host.log.error('progressive stream: gone handler failed', { err: e instanceof Error ? e.stack : String(e) });
    }
  }
}

/** Writes status and headers, then runs the stream's `open` with a sink over `res`. */
function openStream(res: uWS.HttpResponse, s: ProgressiveStream, requestId: string, host: Pick<RouteHost, 'log' | 'replies'>): void {
  const { log } = host;
  const sink = new ResponseSink(res, host);
  // A bound method, not a closure: no context object per listener.
  res.onAborted(sink.aborted.bind(sink));
  writeHead(res, s, requestId);
  try {
    sink.client = s.open(sink);
  } catch (e) {
    log.error('progressive stream: open failed', { requestId, err: e instanceof Error ? e.stack : String(e) });
    sink.close();
    return;
  }
  if (sink.done) sink.leave(); // closed (or aborted) during open
}
