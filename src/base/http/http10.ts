/**
 * The HTTP/1.0 front (docs/http.md "HTTP/1.0"). The HTTP server library parses HTTP/1.1 only; a
 * native hook on its socket reads (src/live/native/http-front.ts) hands every connection whose first
 * request line says HTTP/1.0 to `adopt()` here, with the bytes already read. Node's own HTTP/1.x
 * server then parses it and each request is passed, as HTTP/1.1, to this node's HTTP server over
 * the main thread's private unix socket (the route every other request takes: the same handlers,
 * caps, logs and listener counts), with the client's address in `PEER_HEADER`. The answer comes
 * back as the HTTP/1.1 server wrote it (status, headers, body) and Node writes it in HTTP/1.0
 * terms (RFC 9112 §9.3, RFC 1945): a body of known length with `Content-Length`; an open-ended one
 * (a progressive `/listen` stream) unframed until the connection closes; the connection closed
 * after the response unless the client asked for `Connection: keep-alive` and the length is known.
 *
 * Hop-by-hop headers (RFC 9110 §7.6.1) are not passed on either way. A request without `Host`
 * (HTTP/1.0 does not require one) gets the address the client connected to.
 */
import http from 'node:http';
import net from 'node:net';
import { closeSync } from 'node:fs';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Logger } from '../logger.js';
import { errorBody } from './reply.js';
import { PEER_HEADER } from './request.js';

/** Request headers not passed on (hop-by-hop, RFC 9110 §7.6.1; the peer header is set here). */
const DROP_REQUEST = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'upgrade', PEER_HEADER]);
/** Response headers not passed back (hop-by-hop: Node frames the HTTP/1.0 answer itself). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** Options of an `Http10Front`. */
export interface Http10FrontOptions {
  /** The main thread's private unix socket, where this node's HTTP server answers (src/base/http/server.ts `listenUnix`). */
  socketPath: string;
  /** HTTP/1.0 connections open at once; more are closed at once (counted in `refused`). */
  maxConnections: number;
  log: Logger;
}

/** What a front did (tests, diagnostics). */
export interface Http10Counts {
  connections: number;
  requests: number;
  refused: number;
}

/**
 * The socket peer's address written as the HTTP server library writes it: IPv4 dotted, IPv6 as
 * eight groups of four hex digits (so caps and logs key both paths alike).
 */
export function peerText(address: string | undefined): string {
  if (!address) return '';
  if (net.isIPv4(address)) return address;
  if (!net.isIPv6(address)) return address;
  const [head = '', tail = ''] = address.split('::') as [string, string?];
  const words = (part: string | undefined): string[] => {
    if (!part) return [];
    const out: string[] = [];
    for (const w of part.split(':')) {
      if (net.isIPv4(w)) {
        const b = w.split('.').map(Number);
        out.push(((b[0]! << 8) | b[1]!).toString(16), ((b[2]! << 8) | b[3]!).toString(16));
      } else out.push(w);
    }
    return out;
  };
  const h = words(head);
  const t = address.includes('::') ? words(tail) : [];
  const all = address.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return all.map((w) => w.padStart(4, '0').toLowerCase()).join(':');
}

/** The front of each local port (several servers may share a process, as tests run them). */
const fronts = new Map<number, Http10Front>();

/**
 * Takes a connection from the native hook (src/live/native/http-front.ts): `fd` (owned from now on),
 * `head` the bytes it sent so far (at least its request line). It goes to the front of the port it
 * reached; with none there (the server is stopping), it is closed.
 */
export function adoptHttp10Connection(fd: number, head: Buffer): void {
  let socket: net.Socket;
  try {
    socket = new net.Socket({ fd, readable: true, writable: true });
  } catch {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    return;
  }
  const front = socket.localPort !== undefined ? fronts.get(socket.localPort) : undefined;
  if (!front) {
    socket.destroy();
    return;
  }
  front.adopt(socket, head);
}

/** Node's HTTP/1.x server in front of the HTTP/1.1 server, for HTTP/1.0 connections only. */
export class Http10Front {
  readonly counts: Http10Counts = { connections: 0, requests: 0, refused: 0 };
  private readonly server: http.Server;
  private readonly sockets = new Set<net.Socket>();
  // One unix connection per request, as the worker threads' forwarding does (src/base/http/proxy.ts).
  private readonly agent = new http.Agent({ keepAlive: false });
  private closed = false;
  private port: number | null = null;

  constructor(private readonly opts: Http10FrontOptions) {
    this.server = http.createServer(
      // No whole-request deadline (uploads may take minutes; the HTTP server behind applies its
      // own); the head must arrive within 10 s; an idle kept-alive connection closes after 5 s.
      { requestTimeout: 0, headersTimeout: 10_000, keepAliveTimeout: 5_000 },
      (req, res) => this.forward(req, res),
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
      if (socket.writable && err.code !== 'ECONNRESET') socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      socket.destroy();
    });
  }

  /** Serves the HTTP/1.0 connections that reach local `port` (the HTTP server's). */
  attach(port: number): void {
    this.port = port;
    fronts.set(port, this);
  }

  /** Takes `socket`, whose first `head` bytes were read already (adoptHttp10Connection). */
  adopt(socket: net.Socket, head: Buffer): void {
    if (this.closed || this.sockets.size >= this.opts.maxConnections) {
      this.counts.refused++;
      socket.destroy();
      return;
    }
    this.counts.connections++;
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.unshift(head);
    this.server.emit('connection', socket);
  }

  /** Closes every HTTP/1.0 connection at once (a graceful stop closes all connections). */
  close(): void {
    this.closed = true;
    if (this.port !== null && fronts.get(this.port) === this) fronts.delete(this.port);
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.agent.destroy();
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.counts.requests++;
    const headers: string[] = [];
    let hasHost = false;
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!.toLowerCase();
      if (DROP_REQUEST.has(name)) continue;
      if (name === 'host') hasHost = true;
      headers.push(raw[i]!, raw[i + 1]!);
    }
    const socket = req.socket;
    if (!hasHost) headers.push('Host', socket.localFamily === 'IPv6' ? `[${socket.localAddress}]:${socket.localPort}` : `${socket.localAddress}:${socket.localPort}`);
    headers.push(PEER_HEADER, peerText(socket.remoteAddress));
    const upstream = http.request({ socketPath: this.opts.socketPath, method: req.method, path: req.url, headers, agent: this.agent, setHost: false });
    res.on('close', () => upstream.destroy());
    upstream.on('response', (answer) => {
      const out: string[] = [];
      const rh = answer.rawHeaders;
      for (let i = 0; i + 1 < rh.length; i += 2) if (!DROP_RESPONSE.has(rh[i]!.toLowerCase())) out.push(rh[i]!, rh[i + 1]!);
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (e) => {
      if (res.writableEnded) return;
      // A HEAD answer is complete at its head: bytes the server sends after it are no concern here.
      if (res.headersSent && req.method === 'HEAD') {
        res.end();
        return;
      }
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const requestId = newRequestId();
      this.opts.log.warn('an HTTP/1.0 request could not be passed to the server', { requestId, method: req.method, err: e.message });
      const body = JSON.stringify(errorBody(new ApiError('internal_error', 'The request could not be passed to the server; retry.'), requestId));
      res.writeHead(500, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
    req.pipe(upstream);
  }
}
