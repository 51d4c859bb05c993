/**
 * The form/HTML route kind (`HttpServer.web`: the OAuth authorization server, the dashboard): the
 * raw body under its cap (src/base/http/body.ts), the handler sets every response header but
 * `X-Request-ID`.
 */
import { newRequestId } from '../../ids.js';
import { announcesBody } from '../body.js';
import type { ReqState, WebReply } from '../reply.js';
import { remoteAddressOf } from '../request.js';
import { bodyReader, type RouteHost } from './host.js';

/** What a form/HTML handler (the OAuth endpoints) sees. */
export interface WebRequest {
  method: string;
  url: string;
  query: URLSearchParams;
  headers: { authorization: string; contentType: string; cookie: string; origin: string; forwardedFor: string; userAgent: string };
  remoteAddress: string;
  requestId: string;
  /** The raw body (empty for GET). */
  body: Buffer;
}

/** The default body cap of a form route (bytes). */
export const WEB_MAX_BODY_BYTES = 64 * 1024;

const SERVER_ERROR: WebReply = { status: 500, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }, body: '{"error":"server_error"}' };
const TOO_LARGE: WebReply = {
  status: 413,
  headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
  body: '{"error":"invalid_request","error_description":"The request body is too large."}',
};

/** Registers the uWS handler of a form/HTML route (see `HttpServer.web`). */
export function registerWebRoute(host: RouteHost, method: 'get' | 'post', pattern: string, handler: (req: WebRequest) => WebReply | Promise<WebReply>, maxBytes: number): void {
  const { replies } = host;
  host.app[method](pattern, (res, req) => {
    const requestId = newRequestId();
    const request: WebRequest = {
      method: req.getMethod().toUpperCase(),
      url: req.getUrl(),
      query: new URLSearchParams(req.getQuery() ?? ''),
      headers: {
        authorization: req.getHeader('authorization'),
        contentType: req.getHeader('content-type'),
        cookie: req.getHeader('cookie'),
        origin: req.getHeader('origin'),
        forwardedFor: req.getHeader('x-forwarded-for'),
        userAgent: req.getHeader('user-agent'),
      },
      remoteAddress: remoteAddressOf(res, req),
      requestId,
      body: Buffer.alloc(0),
    };
    const state: ReqState = { aborted: false, method: request.method, pattern, url: request.url };
    const run = () => {
      let reply: WebReply | Promise<WebReply>;
      const crash = (e: unknown) => {
        host.log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
        replies.web(res, state, SERVER_ERROR, requestId);
      };
      try {
        reply = handler(request);
      } catch (e) {
        return crash(e);
      }
      if (reply instanceof Promise) reply.then((r) => replies.web(res, state, r, requestId), crash);
      else replies.web(res, state, reply, requestId);
    };
    if (method === 'get' || !announcesBody(req)) {
      res.onAborted(() => {
        state.aborted = true;
      });
      return run();
    }
    const body = bodyReader(host, res, req, state, maxBytes, () => request.remoteAddress);
    body.buffer(
      (bytes) => {
        request.body = bytes;
        run();
      },
      (_e, close) => replies.web(res, state, TOO_LARGE, requestId, close),
    );
  });
}
