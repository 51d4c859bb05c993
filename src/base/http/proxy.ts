/**
 * The forwarding route of a worker thread's HTTP server (docs/scaling.md): every request the
 * worker does not serve itself (the API, the dashboard, OAuth, WHEP, feeds, episode audio, any
 * other path, and other methods on its own paths) is passed to the main thread over the main
 * thread's private unix socket, and the answer is passed back, both bodies streamed with
 * backpressure: the client's body is read with uWS `pause()`/`resume()` against the upstream
 * socket's `drain`, the answer is written with `tryEnd`/`write` + `onWritable` while the upstream
 * response is paused. So an upload of any size (500 MB episodes) or a long answer (episode audio,
 * ranged reads) holds at most a socket buffer or two in the worker.
 *
 * The client's socket address travels in `PEER_HEADER` (any value the client sent under that name
 * is dropped first); the main thread believes it only on the unix socket (src/base/http/request.ts),
 * so rate limits, per-address caps and `X-Forwarded-For` handling see the real client.
 * Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded either way.
 *
 * uWS rules (docs/architecture.md): request data is copied before anything async, `onAborted` is attached at
 * once, later writes are corked, nothing is touched after an abort, and no exception escapes
 * into uWS (a failure answers 500 or closes the connection).
 */
import http from 'node:http';
import type uWS from 'uWebSockets.js';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Logger } from '../logger.js';
import { announcesBody } from './body.js';
import type { Replies, ReqState } from './reply.js';
import { PEER_HEADER, remoteAddressOf } from './request.js';

/** Request headers not forwarded (hop-by-hop, RFC 9110 §7.6.1; the peer header is set by the proxy). */
const DROP_REQUEST = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'upgrade', 'expect', PEER_HEADER]);
/** Response headers not passed back: hop-by-hop, and those uWS writes itself (length, date, its name). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'content-length', 'date', 'uwebsockets']);

/** Counts of what the forwarding route did (tests, diagnostics). */
export interface ForwardCounts {
  forwarded: number;
}

/**
 * Registers the catch-all forwarding route on `app` (after every route the thread serves itself:
 * uWS tries specific patterns first), and on each of `also` (patterns more specific than one the
 * thread serves, which it leaves to the main thread). `socketPath` is the main thread's private unix socket.
 */
export function registerForwardRoute(app: uWS.TemplatedApp, socketPath: string, replies: Replies, log: Logger, counts: ForwardCounts, also: readonly string[] = []): http.Agent {
  // One unix-socket connection per forwarded request: a kept-alive one could be closed by the main
  // thread's idle timeout just as it is reused (the request would then fail). A unix connect costs
  // tens of µs, and forwarded requests are the API's, not the listeners'.
  const agent = new http.Agent({ keepAlive: false });
  const route: ForwardRoute = { socketPath, replies, log, counts, agent };
  for (const pattern of also) app.any(pattern, (res, req) => forward(route, res, req));
  app.any('/*', (res, req) => forward(route, res, req));
  return agent;
}

/** What every forwarded request uses: bound once by `registerForwardRoute`. */
interface ForwardRoute {
  socketPath: string;
  replies: Replies;
  log: Logger;
  counts: ForwardCounts;
  agent: http.Agent;
}

/** One forwarded request: its reply state, whether the answer's head was written, whether it is over. */
interface ForwardState extends ReqState {
  headSent: boolean;
  finished: boolean;
}

/** The forwarding handler: copies the request, opens the upstream request, streams the body up and the answer back. */
function forward(route: ForwardRoute, res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  route.counts.forwarded++;
  const requestId = newRequestId();
  const method = req.getMethod().toUpperCase();
  const query = req.getQuery();
  const url = req.getUrl();
  const path = query ? `${url}?${query}` : url;
  const state: ForwardState = { aborted: false, answered: false, method, url, headSent: false, finished: false };
  const headers = forwardedHeaders(req);
  headers[PEER_HEADER] = remoteAddressOf(res, req);
  const hasBody = announcesBody(req);
  const upstream = http.request({ socketPath: route.socketPath, method, path, headers, agent: route.agent, setHost: false });
  res.onAborted(() => {
    state.aborted = true;
    upstream.destroy();
  });
  const fail = (e: unknown) => {
    if (state.aborted || state.finished) return;
    state.finished = true;
    if (!state.headSent) {
      route.log.warn('forwarding to the main thread failed', { requestId, method, url, err: e instanceof Error ? e.message : String(e) });
      route.replies.error(res, state, new ApiError('internal_error', 'The request could not be passed to the server; retry.'), requestId);
    } else {
      state.aborted = true;
      res.close();
    }
  };
  upstream.on('error', fail);
  if (hasBody) streamRequestBody(res, state, upstream);
  else upstream.end();
  upstream.on('response', (up) => relayAnswer(res, state, up, fail));
}

/** The request's headers as `http.request` takes them (repeated ones as arrays), without those of `DROP_REQUEST`. */
function forwardedHeaders(req: uWS.HttpRequest): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  req.forEach((k, v) => {
    if (DROP_REQUEST.has(k)) return;
    const had = headers[k];
    if (had === undefined) headers[k] = v;
    else if (Array.isArray(had)) had.push(v);
    else headers[k] = [had, v];
  });
  return headers;
}

/** The client's body, streamed: the socket pauses while the upstream socket's buffer is full. */
function streamRequestBody(res: uWS.HttpResponse, state: ForwardState, upstream: http.ClientRequest): void {
  res.onData((chunk, isLast) => {
    if (state.aborted) return;
    // uWS neuters `chunk` when this returns: copy it.
    const ok = upstream.write(Buffer.from(new Uint8Array(chunk)));
    if (isLast) upstream.end();
    else if (!ok) {
      res.pause();
      upstream.once('drain', () => {
        if (!state.aborted) res.resume();
      });
    }
  });
}

/** The main thread's answer: its status and headers (less `DROP_RESPONSE`) at once, then its body (none for HEAD). */
function relayAnswer(res: uWS.HttpResponse, state: ForwardState, up: http.IncomingMessage, fail: (e: unknown) => void): void {
  if (state.aborted) {
    up.destroy();
    return;
  }
  const lengthHeader = up.headers['content-length'];
  const length = lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : null;
  const status = `${up.statusCode ?? 502} ${up.statusMessage ?? ''}`.trim();
  const raw = up.rawHeaders;
  res.cork(() => {
    res.writeStatus(status);
    for (let i = 0; i + 1 < raw.length; i += 2) if (!DROP_RESPONSE.has(raw[i]!.toLowerCase())) res.writeHeader(raw[i]!, raw[i + 1]!);
  });
  state.headSent = true;
  state.answered = true;
  if (state.method === 'HEAD') {
    up.resume();
    state.finished = true;
    res.cork(() => {
      if (length !== null) res.writeHeader('Content-Length', String(length));
      res.endWithoutBody();
    });
    return;
  }
  relayBody(res, state, up, length);
  up.on('error', fail);
}

/**
 * The answer's body, `length` bytes (null: unknown, sent chunked). Backpressure: the upstream
 * response pauses while the client's socket is full. `write` (no length: chunked) keeps what it
 * could not send; `tryEnd` (a known length) does not, so the rest of that chunk is written again
 * from `onWritable`.
 */
function relayBody(res: uWS.HttpResponse, state: ForwardState, up: http.IncomingMessage, length: number | null): void {
  let pending: { chunk: Buffer; from: number } | null = null;
  let waiting = false;
  res.onWritable((offset) => {
    if (state.aborted || state.finished) return true;
    if (length === null) {
      if (waiting) {
        waiting = false;
        up.resume();
      }
      return true;
    }
    if (!pending) return true;
    const [sent, done] = res.tryEnd(pending.chunk.subarray(offset - pending.from), length);
    if (done) state.finished = true;
    if (!sent && !done) return false;
    pending = null;
    up.resume();
    return true;
  });
  up.on('data', (chunk: Buffer) => {
    if (state.aborted || state.finished) return;
    if (length === null) {
      let ok = true;
      res.cork(() => {
        ok = res.write(chunk);
      });
      if (!ok) {
        waiting = true;
        up.pause();
      }
      return;
    }
    const from = res.getWriteOffset();
    let sent = true;
    res.cork(() => {
      const [s, done] = res.tryEnd(chunk, length);
      if (done) state.finished = true;
      sent = s || done;
    });
    if (!sent) {
      pending = { chunk, from };
      up.pause();
    }
  });
  up.on('end', () => {
    if (state.aborted || state.finished) return;
    state.finished = true;
    if (length === null || length === 0) res.cork(() => res.end());
    else {
      // The main thread's answer was shorter than it announced: the client must not take it as whole.
      state.aborted = true;
      res.close();
    }
  });
}
