/**
 * The raw-body route kind (`HttpServer.rawBody`, WHEP): a non-JSON body under its cap
 * (src/base/http/body.ts), the named headers copied out, a raw answer given at once or later.
 */
import { newRequestId } from '../../ids.js';
import type { RawReply, ReqState } from '../reply.js';
import { httpMethod, paramCount, remoteAddressOf, safeDecode } from '../request.js';
import { bodyReader, type RouteHost } from './host.js';

/** A request of a `rawBody` route (WHEP): everything copied out of uWS, the body read. */
export interface RawBodyRequest {
  params: string[];
  query: string;
  /** The headers the route asked for, by lower-case name ('' when absent). */
  headers: Record<string, string>;
  remoteAddress: string;
  requestId: string;
  body: Buffer;
}

/** Options of a `rawBody` route. */
export interface RawBodyRouteOptions {
  /** The body cap (bytes); larger → 413 `body_too_large`. */
  maxBodyBytes: number;
  /** Request headers to copy, by lower-case name. */
  headers: string[];
}

/** Registers the uWS handler of a raw-body route (see `HttpServer.rawBody`). */
export function registerRawBodyRoute(
  host: RouteHost,
  method: 'post' | 'patch' | 'del' | 'options',
  pattern: string,
  handler: (req: RawBodyRequest) => RawReply | Promise<RawReply>,
  opts: RawBodyRouteOptions,
): void {
  const nParams = paramCount(pattern);
  const name = httpMethod(method);
  const { replies } = host;
  const maxBytes = opts.maxBodyBytes;
  host.app[method](pattern, (res, req) => {
    const requestId = newRequestId();
    const params: string[] = [];
    for (let i = 0; i < nParams; i++) params.push(safeDecode(req.getParameter(i) ?? '') ?? '');
    const headers: Record<string, string> = {};
    for (const h of opts.headers) headers[h] = req.getHeader(h);
    const request: RawBodyRequest = { params, query: req.getQuery() ?? '', headers, remoteAddress: remoteAddressOf(res, req), requestId, body: Buffer.alloc(0) };
    const state: ReqState = { aborted: false, method: name, pattern, url: req.getUrl() };
    const run = () => {
      let r: RawReply | Promise<RawReply>;
      try {
        r = handler(request);
      } catch (e) {
        return replies.error(res, state, e, requestId);
      }
      if (r instanceof Promise) r.then((out) => replies.raw(res, state, false, out, requestId), (e) => replies.error(res, state, e, requestId));
      else replies.raw(res, state, false, r, requestId);
    };
    const body = bodyReader(host, res, req, state, maxBytes, () => request.remoteAddress);
    body.buffer(
      (bytes) => {
        request.body = bytes;
        run();
      },
      (e, close) => replies.error(res, state, e, requestId, {}, close),
    );
  });
}
