/**
 * The HTTP/1.0 front (docs/http.md "HTTP/1.0"). The HTTP server library parses HTTP/1.1 only; a
 * native hook on its socket reads (src/native/http-front.ts) hands every connection whose first
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
 *
 * Limits (docs/behaviour.md §13): connections are capped in total and per client address group
 * (`PerAddressCounter`, src/base/limits/limits.ts), a request head must be complete in
 * `headTimeoutMs` (408, RFC 9110 §15.5.9), and a kept-alive connection is closed after
 * `idleTimeoutMs` without a request; a request being answered has no deadline.
 */
import http from 'node:http';
import net from 'node:net';
import { closeSync, readFileSync } from 'node:fs';
import { ApiError } from '../errors/errors.js';
import { newRequestId } from '../ids.js';
import type { Logger } from '../logger.js';
import { PerAddressCounter, type Limits } from '../limits/limits.js';
import { errorBody } from './reply.js';
import { PEER_HEADER } from './request.js';

/** Request headers not passed on (hop-by-hop, RFC 9110 §7.6.1; the peer header is set here). */
const DROP_REQUEST = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'upgrade', PEER_HEADER]);
/** Response headers not passed back (hop-by-hop: Node frames the HTTP/1.0 answer itself). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** Options of an `Http10Front`. */
export interface Http10FrontOptions {
  /** The process's fronts by port, which the native hook hands connections to (`Http10Ports`). */
  ports: Http10Ports;
  /** The main thread's private unix socket, where this node's HTTP server answers (src/base/http/server.ts `listenUnix`). */
  socketPath: string;
  /**
   * HTTP/1.0 connections open at once; more are closed at once (`http10_connections`). Never more
   * than half the process's descriptor limit (`fdLimit`), so the rest stays free for HTTP/1.1,
   * RTMP and the database.
   */
  maxConnections: number;
  /**
   * HTTP/1.0 connections open at once per client address group (IPv4, IPv6 /64: `addressGroup`,
   * src/base/limits/address-key.ts); more are closed at once (`http10_connections_per_ip`). A peer
   * in `trusted` (a configured proxy, which carries many clients) is held to `maxConnections` only.
   */
  maxConnectionsPerAddress: number;
  /** Peers exempt from `maxConnectionsPerAddress` (`SKYLARK_TRUSTED_PROXIES`); none when absent. */
  trusted?: (ip: string) => boolean;
  /** A request head must be complete this long after its first byte (ms; default 10,000). */
  headTimeoutMs?: number;
  /** A kept-alive connection with no request is closed after this long (ms; default 60,000); so is one whose answer the client does not read. */
  idleTimeoutMs?: number;
  /** The process's open-descriptor limit (RLIMIT_NOFILE); default: read from /proc/self/limits, none when unreadable. */
  fdLimit?: number | null;
  /** Where cap hits are counted and logged (src/base/limits/limits.ts); none when absent. */
  limits?: Pick<Limits, 'hit'>;
  log: Logger;
}

/** What a front did (tests, diagnostics). */
export interface Http10Counts {
  /** Connections taken. */
  connections: number;
  requests: number;
  /** Connections closed at once: a cap, or the front closed. */
  refused: number;
  /** Connections closed because a request head was not complete in time. */
  headTimeouts: number;
  /** Kept-alive connections closed idle. */
  idleTimeouts: number;
  /** Connections closed because the client did not read its answer. */
  stalled: number;
}

/** Default of `headTimeoutMs` (docs/behaviour.md §13). */
export const HTTP10_HEAD_TIMEOUT_MS = 10_000;
/** Default of `idleTimeoutMs` (docs/behaviour.md §13). */
export const HTTP10_IDLE_TIMEOUT_MS = 60_000;

/**
 * The soft RLIMIT_NOFILE of this process (Node raises it to the hard limit at start), from
 * `/proc/self/limits`; null where that cannot be read (not Linux) or says `unlimited`.
 */
export function processFdLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
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

/**
 * The HTTP/1.0 fronts of a process by local port (several servers may share a process, as tests
 * run them): the native hook is process-wide, so the connections it hands over go through one of
 * these to the front of the port they reached. The composition root makes one per process and
 * gives it to every front it builds.
 */
export class Http10Ports {
  private readonly fronts = new Map<number, Http10Front>();

  /**
   * Takes a connection from the native hook (src/native/http-front.ts): `fd` (owned from now on),
   * `head` the bytes it sent so far (at least its request line). It goes to the front of the port it
   * reached; with none there (the server is stopping), it is closed.
   */
  readonly adopt = (fd: number, head: Buffer): void => {
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
    const front = socket.localPort !== undefined ? this.fronts.get(socket.localPort) : undefined;
    if (!front) {
      socket.destroy();
      return;
    }
    front.adopt(socket, head);
  };

  /** `front` serves the HTTP/1.0 connections of local `port`. */
  set(port: number, front: Http10Front): void {
    this.fronts.set(port, front);
  }

  /** `front` no longer serves `port` (a newer front of the port stays). */
  release(port: number, front: Http10Front): void {
    if (this.fronts.get(port) === front) this.fronts.delete(port);
  }
}

/**
 * Where an adopted connection is (docs/behaviour.md §13): reading a request head (`head`, due
 * `headTimeoutMs` after `since`), answering (`busy`: no deadline, so a long `/listen` answer or a
 * slow upload goes on), or kept alive between requests (`idle`, closed `idleTimeoutMs` after
 * `since` unless a byte of the next request comes, which starts its head deadline).
 */
interface Conn {
  socket: net.Socket;
  /** The peer's address (`peerText`); '' when unknown. */
  address: string;
  /** Counted in the per-address counter (not a trusted proxy). */
  perAddress: boolean;
  phase: 'head' | 'busy' | 'idle';
  /** When the phase began (ms, `performance.now()` scale of the sweep). */
  since: number;
  /** Requests whose answers are not finished. */
  inFlight: number;
  /** `socket.bytesRead` when the connection went idle. */
  readMark: number;
  /** Answer bytes not yet taken by the kernel at the last sweep, and since when none was taken (ms). */
  queued: number;
  stuckSince: number;
}

/** Sweep period bounds (ms): deadlines are met within one period. */
const SWEEP_MIN_MS = 100;
const SWEEP_MAX_MS = 1000;

/**
 * Node's HTTP/1.x server in front of the HTTP/1.1 server, for HTTP/1.0 connections only. Node's
 * own head and keep-alive timers need a listening server (this one never listens: sockets come
 * from `adopt`), so the front keeps its own (docs/behaviour.md §13): one sweep checks every
 * connection's deadline, a few times per shortest timeout.
 */
export class Http10Front {
  readonly counts: Http10Counts = { connections: 0, requests: 0, refused: 0, headTimeouts: 0, idleTimeouts: 0, stalled: 0 };
  /** Connections open at once, at most (`maxConnections`, bounded by the descriptor limit). */
  readonly maxConnections: number;
  private readonly server: http.Server;
  private readonly conns = new Map<net.Socket, Conn>();
  private readonly perAddress: PerAddressCounter;
  private readonly headTimeoutMs: number;
  private readonly idleTimeoutMs: number;
  private readonly sweepMs: number;
  private sweepTimer: NodeJS.Timeout | null = null;
  // One unix connection per request, as the worker threads' forwarding does (src/base/http/proxy.ts).
  private readonly agent = new http.Agent({ keepAlive: false });
  private closed = false;
  private port: number | null = null;

  constructor(private readonly opts: Http10FrontOptions) {
    this.headTimeoutMs = opts.headTimeoutMs ?? HTTP10_HEAD_TIMEOUT_MS;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? HTTP10_IDLE_TIMEOUT_MS;
    this.sweepMs = Math.min(SWEEP_MAX_MS, Math.max(SWEEP_MIN_MS, Math.floor(Math.min(this.headTimeoutMs, this.idleTimeoutMs) / 10)));
    const fds = opts.fdLimit === undefined ? processFdLimit() : opts.fdLimit;
    this.maxConnections = fds === null ? opts.maxConnections : Math.max(1, Math.min(opts.maxConnections, Math.floor(fds / 2)));
    this.perAddress = new PerAddressCounter(Number.MAX_SAFE_INTEGER, opts.maxConnectionsPerAddress);
    this.server = http.createServer(
      // Node's timers stay off (they would not run, or run beside the front's own): no whole-request
      // deadline (uploads may take minutes; the HTTP server behind applies its own).
      { requestTimeout: 0, headersTimeout: 0, keepAliveTimeout: 0 },
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
    this.opts.ports.set(port, this);
  }

  /** HTTP/1.0 connections open now. */
  get open(): number {
    return this.conns.size;
  }

  /**
   * Takes `socket`, whose first `head` bytes were read already (`Http10Ports.adopt`), or closes
   * it at once when the front is closed or a cap is reached (counted and logged, never fatal).
   */
  adopt(socket: net.Socket, head: Buffer): void {
    const address = peerText(socket.remoteAddress);
    const perAddress = !(this.opts.trusted?.(socket.remoteAddress ?? '') ?? false);
    const refusal = this.closed ? 'closed' : this.conns.size >= this.maxConnections ? 'http10_connections' : perAddress && this.perAddress.tryAcquire(address) !== 'ok' ? 'http10_connections_per_ip' : null;
    if (refusal !== null) {
      this.counts.refused++;
      if (refusal !== 'closed') this.opts.limits?.hit(refusal, address, { max: refusal === 'http10_connections' ? this.maxConnections : this.opts.maxConnectionsPerAddress });
      socket.destroy();
      return;
    }
    this.counts.connections++;
    const c: Conn = { socket, address, perAddress, phase: 'head', since: performance.now(), inFlight: 0, readMark: 0, queued: 0, stuckSince: 0 };
    this.conns.set(socket, c);
    socket.once('close', () => this.release(c));
    socket.on('error', () => socket.destroy());
    socket.unshift(head);
    this.startSweep();
    this.server.emit('connection', socket);
  }

  /** Closes every HTTP/1.0 connection at once (a graceful stop closes all connections). */
  close(): void {
    this.closed = true;
    if (this.port !== null) this.opts.ports.release(this.port, this);
    for (const c of [...this.conns.values()]) c.socket.destroy();
    this.conns.clear();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    this.agent.destroy();
  }

  private release(c: Conn): void {
    if (this.conns.get(c.socket) !== c) return;
    this.conns.delete(c.socket);
    if (c.perAddress) this.perAddress.release(c.address);
  }

  /** A request's head is complete (the 'request' event): no deadline until its answer is finished. */
  private requestStarted(socket: net.Socket, res: http.ServerResponse): void {
    const c = this.conns.get(socket);
    if (!c) return;
    c.inFlight++;
    c.phase = 'busy';
    res.once('close', () => {
      c.inFlight--;
      if (c.inFlight > 0 || socket.destroyed) return;
      c.phase = 'idle';
      c.since = performance.now();
      c.readMark = socket.bytesRead;
    });
  }

  private startSweep(): void {
    if (this.sweepTimer) return;
    this.sweepTimer = setInterval(() => this.sweep(), this.sweepMs);
    this.sweepTimer.unref();
  }

  /** Closes each connection past its deadline (see `Conn`); stops when none is open. */
  private sweep(): void {
    const now = performance.now();
    for (const c of this.conns.values()) {
      const { socket } = c;
      // An answer the client does not read: nothing of what waits in the socket was taken.
      const queued = socket.writableLength;
      if (queued === 0 || queued < c.queued) c.stuckSince = now;
      c.queued = queued;
      if (queued > 0 && now - c.stuckSince >= this.idleTimeoutMs) {
        this.counts.stalled++;
        socket.destroy();
        continue;
      }
      if (c.phase === 'idle' && socket.bytesRead !== c.readMark) {
        c.phase = 'head';
        c.since = now;
      }
      if (c.phase === 'head' && now - c.since >= this.headTimeoutMs) {
        this.counts.headTimeouts++;
        this.opts.limits?.hit('http10_head_timeout', c.address, { ms: this.headTimeoutMs });
        // As RFC 9110 §15.5.9 says: 408, and the connection closed.
        if (socket.writable && c.inFlight === 0) socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        socket.destroy();
      } else if (c.phase === 'idle' && now - c.since >= this.idleTimeoutMs) {
        this.counts.idleTimeouts++;
        socket.destroy();
      }
    }
    if (this.conns.size === 0 && this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.counts.requests++;
    this.requestStarted(req.socket, res);
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
