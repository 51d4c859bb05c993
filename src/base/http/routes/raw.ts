/**
 * The raw byte route kind (`HttpServer.raw`, HLS): the handler answers pre-rendered bytes at once,
 * or later (LL-HLS blocking reloads) through a `DeferredReply`.
 */
import type uWS from 'uWebSockets.js';
import { newRequestId } from '../../ids.js';
import { writeRaw, type RawReply, type ReqState } from '../reply.js';
import { paramCount, remoteAddressOf } from '../request.js';
import type { RouteHost } from './host.js';
import { hlsObjectClass, routeClassOf, statusOf } from '../tally.js';

/**
 * A raw reply given later (LL-HLS blocking playlist reload, preload hints): `defer` is called once,
 * right after the handler returned, with the `Answer` to give (once) when the time comes; `cancel`
 * if the client goes away first. One object per held request (no closures per request: held
 * requests live for up to seconds, and what they keep is what the garbage collector must trace).
 */
export interface DeferredReply {
  defer(to: Answer): void;
  cancel(): void;
}

/** Where a deferred reply goes: `answer(render)` writes what `render` returns then (at most once; later calls do nothing). */
export interface Answer {
  answer(render: () => RawReply): void;
}

/** What a raw (HLS) handler may read of its request while it runs (synchronously). */
export interface RawRequestInfo {
  /** A request header by lower-case name ('' when absent). */
  header(name: string): string;
  /** The socket peer's address as text (IPv6 in full form). */
  remoteAddress(): string;
}

/** The handler of a raw route: path parameters (raw, not decoded), the query string, the request id. */
export type RawHandler = (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply | DeferredReply;

/** The RawRequestInfo of `raw()`: points at the request being handled, null otherwise. */
class RawInfo implements RawRequestInfo {
  res: uWS.HttpResponse | null = null;
  req: uWS.HttpRequest | null = null;
  header(name: string): string {
    return this.req ? this.req.getHeader(name) : '';
  }
  remoteAddress(): string {
    return this.res && this.req ? remoteAddressOf(this.res, this.req) : '';
  }
}

/** Registers the uWS handler of a raw route (see `HttpServer.raw`). */
export function registerRawRoute(host: RouteHost, method: 'get' | 'head', pattern: string, handler: RawHandler): void {
  const nParams = paramCount(pattern);
  const info = new RawInfo();
  const head = method === 'head';
  const { replies } = host;
  const { tally } = replies;
  // The route class (docs/metrics.md): by pattern, or per request by the file name of an HLS object route.
  const fixedClass = routeClassOf(pattern);
  const fileParam = pattern.startsWith('/hls/') && pattern.endsWith('/:file') ? nParams - 1 : -1;
  host.app[method](pattern, (res, req) => {
    const params: string[] = [];
    for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
    const requestId = newRequestId();
    let r: RawReply | DeferredReply;
    info.res = res;
    info.req = req;
    const route = fileParam < 0 ? fixedClass : hlsObjectClass(params[fileParam]!);
    try {
      r = handler(params, req.getQuery() ?? '', requestId, info);
    } catch (e) {
      // An exception escaping a uWS callback ends the process: answer 500 instead.
      return replies.error(res, { aborted: false, route }, e, requestId);
    } finally {
      info.res = null;
      info.req = null;
    }
    if (!('defer' in r)) {
      tally.add(route, statusOf(r.status));
      if (!head) tally.bytes[route]! += r.body.byteLength;
      return writeRaw(res, head, r, requestId);
    }
    // A blocking request (LL-HLS): answered later, inside a cork; never after an abort.
    const p = new Pending(res, head, requestId, replies, r, route);
    res.onAborted(() => p.abort());
    r.defer(p);
  });
}

/** A held raw request's state: answered once, never after the client went away. */
class Pending implements Answer, ReqState {
  aborted = false;
  answered = false;

  constructor(
    private readonly res: uWS.HttpResponse,
    private readonly head: boolean,
    private readonly requestId: string,
    private readonly replies: RouteHost['replies'],
    private readonly deferred: DeferredReply,
    /** The route class (../tally.ts), read by the reply writers' count. */
    readonly route: number,
  ) {}

  answer(render: () => RawReply): void {
    if (this.aborted || this.answered) return; // a second call is ignored
    let out: RawReply;
    try {
      out = render();
    } catch (e) {
      return this.replies.error(this.res, this, e, this.requestId);
    }
    this.replies.raw(this.res, this, this.head, out, this.requestId);
  }

  abort(): void {
    this.aborted = true;
    this.deferred.cancel();
  }
}
