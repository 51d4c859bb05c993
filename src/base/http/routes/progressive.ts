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
  /**
   * GET only, optional: makes the sink `open` is then given, an object of a class made by
   * `streamedResponse` (the connection is its own sink and client: one object per listener).
   * `open` must return that object or `NO_CLIENT`.
   */
  sink?: () => StreamedResponse;
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

/** Streamed-response state: the response is over. */
const DONE = 1;
/** Streamed-response state: uWS's `onWritable` is registered. */
const WATCHING = 2;
/** Streamed-response state: `open` returned the client (its `gone` and `writable` are due). */
const ATTACHED = 4;

/** What a streamed response needs of its server: the log, and the tally that counts its bytes (docs/metrics.md). */
type SinkHost = Pick<RouteHost, 'log' | 'replies'>;

/** A class to mix the streamed response into (`abstract` allowed); any constructor arguments. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a mixin's base takes any arguments (TypeScript's mixin rule)
type MixinBase = abstract new (...args: any[]) => object;

/**
 * Mixes the sink over one streamed uWS response into `Base` (the TypeScript mixin pattern): the
 * class made is a `ProgressiveSink` and, through the `gone` and `writable` it must implement, its
 * own `ProgressiveClient`. A progressive listener lives for hours and what it keeps is memory per
 * listener (docs/bench/listener-memory.md): a stream whose `sink` factory makes such an object
 * (`ProgressiveStream.sink`) has one object per listener for the connection, its sink and its
 * client. Its methods are on the prototype; uWS's `onAborted` is its bound `aborted`, and its
 * `onWritable` is registered only when a write first meets backpressure (most listeners never do,
 * and each registration keeps a function and two V8 global handles per response). It keeps no
 * request id (a string per listener): the response carried it in `X-Request-ID`.
 *
 * Its fields and the methods below `done` belong to this layer (src/base/http/routes/progressive.ts):
 * the object's own class does not touch them.
 */
export function streamedResponse<B extends MixinBase>(Base: B) {
  abstract class StreamedResponse extends Base implements ProgressiveSink, ProgressiveClient {
    /** DONE, WATCHING and ATTACHED: one small integer, not a field each. */
    responseState = 0;
    /** The uWS response (set by this layer before `open` runs). */
    response: uWS.HttpResponse | null = null;
    /** The server's log and reply writers. */
    responseHost: SinkHost | null = null;
    /** The client went away, or the sink was closed: called once, never after `end`. */
    abstract gone(): void;
    /** The socket drained after a `write` returned false (backpressure). */
    abstract writable(): void;
    /** Whether the response is over (ended, closed or aborted). */
    get done(): boolean {
      return (this.responseState & DONE) !== 0;
    }

    write(chunk: Uint8Array): boolean {
      if (this.done) return false;
      this.responseHost!.replies.tally.bytes[RC.listen]! += chunk.byteLength;
      if (this.response!.write(chunk)) return true;
      if ((this.responseState & WATCHING) === 0) {
        this.responseState |= WATCHING;
        this.response!.onWritable(this.drained.bind(this));
      }
      return false;
    }

    cork(fn: () => void): void {
      if (!this.done) this.response!.cork(fn);
    }

    end(): void {
      if (this.done) return;
      this.responseState = (this.responseState | DONE) & ~ATTACHED;
      this.response!.cork(this.ended.bind(this));
    }
    ended(): void {
      this.response!.end();
    }

    close(): void {
      if (this.done) return;
      this.responseState |= DONE;
      this.response!.close(); // runs onAborted, which calls `gone`
      this.leave();
    }

    /** The client went away (uWS `onAborted`). */
    aborted(): void {
      this.responseState |= DONE;
      this.leave();
    }

    /** The socket drained (uWS `onWritable`). */
    drained(): boolean {
      if ((this.responseState & (DONE | ATTACHED)) === ATTACHED) {
        try {
          this.writable();
        } catch (e) {
          this.responseHost!.log.error('progressive stream: writable handler failed', { err: e instanceof Error ? e.stack : String(e) });
        }
      }
      return true;
    }

    /** Tells the client it is gone, once. */
    leave(): void {
      if ((this.responseState & ATTACHED) === 0) return;
      this.responseState &= ~ATTACHED;
      try {
        this.gone();
      } catch (e) {
        this.responseHost!.log.error('progressive stream: gone handler failed', { err: e instanceof Error ? e.stack : String(e) });
      }
    }
  }
  return StreamedResponse;
}

/** A streamed response as this layer drives it (what `streamedResponse` makes). */
export type StreamedResponse = InstanceType<ReturnType<typeof streamedResponse<MixinBase>>>;

/** The sink of a stream that brings none of its own: it tells the client `open` returned. */
class ResponseSink extends streamedResponse(Object) {
  /** What `open` returned. */
  client: ProgressiveClient = NO_CLIENT;

  gone(): void {
    this.client.gone();
  }

  writable(): void {
    this.client.writable();
  }
}

/**
 * Writes status and headers, then runs the stream's `open` with a sink over `res`: the stream's
 * own (`ProgressiveStream.sink`), which must then be the client `open` returns (or `NO_CLIENT`),
 * or one of this layer's, which tells the client `open` returns.
 */
function openStream(res: uWS.HttpResponse, s: ProgressiveStream, requestId: string, host: SinkHost): void {
  const { log } = host;
  const sink = s.sink ? s.sink() : new ResponseSink();
  sink.response = res;
  sink.responseHost = host;
  // A bound method, not a closure: no context object per listener.
  res.onAborted(sink.aborted.bind(sink));
  writeHead(res, s, requestId);
  try {
    const client = s.open(sink);
    if (sink instanceof ResponseSink) sink.client = client;
    else if (client !== sink && client !== NO_CLIENT) throw new Error("a stream's own sink must be the client its open returns");
    if (client !== NO_CLIENT) sink.responseState |= ATTACHED;
  } catch (e) {
    log.error('progressive stream: open failed', { requestId, err: e instanceof Error ? e.stack : String(e) });
    sink.close();
    return;
  }
  if (sink.done) sink.leave(); // closed (or aborted) during open
}
