/**
 * The raw byte route kind (`HttpServer.raw`, HLS): the handler answers pre-rendered bytes at once,
 * or later (LL-HLS blocking reloads) through a `DeferredReply`.
 */
import type uWS from 'uWebSockets.js';
import { newRequestId } from '../../ids.js';
import { writeRaw, type RawReply } from '../reply.js';
import { paramCount, remoteAddressOf } from '../request.js';
import type { RouteHost } from './host.js';

/**
 * A raw reply given later (LL-HLS blocking playlist reload, preload hints): `defer` gets an
 * `answer` function to call once (with a function that renders the reply at that moment) and
 * returns a cancel function, called if the client goes away first.
 */
export interface DeferredReply {
  defer(answer: (reply: () => RawReply) => void): () => void;
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
  host.app[method](pattern, (res, req) => {
    const params: string[] = [];
    for (let i = 0; i < nParams; i++) params.push(req.getParameter(i) ?? '');
    const requestId = newRequestId();
    let r: RawReply | DeferredReply;
    info.res = res;
    info.req = req;
    try {
      r = handler(params, req.getQuery() ?? '', requestId, info);
    } catch (e) {
      // An exception escaping a uWS callback ends the process: answer 500 instead.
      return replies.error(res, { aborted: false }, e, requestId);
    } finally {
      info.res = null;
      info.req = null;
    }
    if (!('defer' in r)) return writeRaw(res, head, r, requestId);
    // A blocking request (LL-HLS): answer later, inside a cork; never after an abort.
    const state = { aborted: false, answered: false };
    let cancel: () => void = () => {};
    res.onAborted(() => {
      state.aborted = true;
      cancel();
    });
    cancel = r.defer((reply) => {
      if (state.aborted || state.answered) return; // a second call is ignored
      let out: RawReply;
      try {
        out = reply();
      } catch (e) {
        return replies.error(res, state, e, requestId);
      }
      replies.raw(res, state, head, out, requestId);
    });
  });
}
