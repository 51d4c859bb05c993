/**
 * The listener side of the Icecast port (docs/behaviour.md §10, docs/icecast.md "Listeners"):
 * `GET|HEAD /live/<stream_id>[.<ext>]` or a stream's own mount, answered by the listening side
 * (`IcecastListening`, delivery's `/listen` machinery) with Icecast 2.4's head (`HTTP/1.0 200 OK`,
 * no framing) and the body until either side closes; `/status-json.xsl`; the per-stream listener
 * counts and bytes of the port (docs/metrics.md). ./icecast-server.ts accepts the connection and
 * hands a listener's request here.
 */
import type net from 'node:net';
import type { Logger } from '../../base/logger.js';
import { setSendBuffer } from '../../native/http-front.js';
import type { ProgressiveClient } from '../../base/http/routes/progressive.js';
import type { IcecastListenSink, IcecastListening } from './port.js';
import { printable, response, type RequestHead } from './icecast-http.js';

/** A listener's mount: `/live/<stream_id>`, or with the codec's extension. */
const LISTEN_PATH = /^\/live\/(stm_[A-Za-z0-9]+)(?:\.(mp3|aac|opus|ogg))?$/;

/** One connection of the port: its socket, peer, and its slot of the source caps (released once). */
export interface IcecastConn {
  socket: net.Socket;
  ip: string;
  remote: string;
  release(): void;
}

/** What the listener side reads and asks of the server. */
export interface IcecastListenersDeps {
  /** Listeners and the status JSON; null: every listener request is 404. */
  listening: IcecastListening | null;
  log: Logger;
  /** Kernel send buffer of a listener's socket (SO_SNDBUF, bytes; 0 = as the kernel sizes it). */
  sendBufferBytes: number;
  /** How long an ended listener's connection may stay open after its body (ms). */
  closeMs: number;
  /** Writes a whole answer, gives the connection's slot back and ends it. */
  answer(conn: IcecastConn, text: string | Buffer): void;
  /** Ends `socket` after `text` (destroyed `closeMs` later whatever the client does). */
  finish(socket: net.Socket, text: string | Buffer): void;
  /** The stream whose own mount is `path`, or null. */
  streamOfMount(path: string): string | null;
}

/** Serves listeners on the Icecast port and counts them. */
export class IcecastListeners {
  /** Listeners on this port now, by stream id (docs/metrics.md `skylark_listeners`, protocol `icecast`). */
  readonly byStream = new Map<string, number>();
  private readonly sockets = new Set<net.Socket>();
  private closedBytes = 0;

  constructor(private readonly d: IcecastListenersDeps) {}

  /**
   * A listener's `GET|HEAD`: `/status-json.xsl`, or a mount `/live/<id>[.<ext>]` answered by the
   * listening side — its head as Icecast 2.4 writes it (`HTTP/1.0 200 OK`, no framing), then the
   * body until either side closes. Anything else is 404.
   */
  serve(conn: IcecastConn, head: RequestHead, url: URL): void {
    const { socket } = conn;
    const isHead = head.method === 'HEAD';
    if (url.pathname === '/status-json.xsl' && this.d.listening) {
      const body = Buffer.from(this.d.listening.statusJson(), 'utf8');
      const h = response('200 OK', { 'Content-Type': 'application/json; charset=utf-8', 'Access-Control-Allow-Origin': '*', 'Content-Length': String(body.length) });
      this.d.answer(conn, isHead ? h : Buffer.concat([Buffer.from(h, 'latin1'), body]));
      return;
    }
    const m = LISTEN_PATH.exec(url.pathname);
    const mounted = m || !this.d.listening ? null : this.d.streamOfMount(url.pathname);
    if ((!m && !mounted) || !this.d.listening) {
      this.d.answer(conn, response('404 Not Found', {}, `No such mount: ${printable(url.pathname)}. Listen at /live/<stream id> or at a stream's own mount.\n`));
      return;
    }
    const q = head.target.indexOf('?');
    const streamId = m ? m[1]! : mounted!;
    const a = this.d.listening.listen({
      method: isHead ? 'HEAD' : 'GET',
      streamId,
      ext: m ? (m[2] ?? null) : null,
      query: q < 0 ? '' : head.target.slice(q + 1),
      header: (name) => head.headers.get(name) ?? '',
      remoteAddress: conn.ip,
    });
    if ('refuse' in a) {
      const r = a.refuse;
      let text = `HTTP/1.0 ${r.status}\r\nServer: Skylark\r\nConnection: Close\r\n`;
      for (const [k, v] of r.headers) text += `${k}: ${v}\r\n`;
      text += `Content-Length: ${r.body.length}\r\n\r\n`;
      this.d.answer(conn, Buffer.concat([Buffer.from(text, 'latin1'), r.body]));
      return;
    }
    // From here the connection is a listener: the listening caps count it, not the source caps.
    conn.release();
    let text = 'HTTP/1.0 200 OK\r\nServer: Skylark\r\nConnection: Close\r\nPragma: no-cache\r\nExpires: Mon, 26 Jul 1997 05:00:00 GMT\r\n';
    for (const [k, v] of a.stream.headers) text += `${k}: ${v}\r\n`;
    text += '\r\n';
    if (isHead) {
      this.d.finish(socket, text);
      return;
    }
    socket.removeAllListeners('data');
    socket.on('data', () => {}); // a listener sends nothing more that matters: dropped
    this.capSendBuffer(socket, conn.remote);
    const sink = new SocketSink(socket, this.d.closeMs);
    socket.cork();
    try {
      socket.write(text, 'latin1');
      sink.client = a.stream.open(sink);
    } catch (e) {
      this.d.log.error('icecast listener could not be opened', { remote: conn.remote, err: e instanceof Error ? e.stack : String(e) });
      sink.close();
      return;
    } finally {
      socket.uncork();
    }
    if (sink.done) return sink.leave();
    this.countListener(streamId, socket);
  }

  /** Counts a listener of `streamId` on this port until its socket closes (`byStream`, `bytes`). */
  private countListener(streamId: string, socket: net.Socket): void {
    const by = this.byStream;
    by.set(streamId, (by.get(streamId) ?? 0) + 1);
    this.sockets.add(socket);
    socket.once('close', () => {
      const n = (by.get(streamId) ?? 1) - 1;
      if (n > 0) by.set(streamId, n);
      else by.delete(streamId);
      this.sockets.delete(socket);
      this.closedBytes += socket.bytesWritten;
    });
  }

  /** Bytes written to listeners on this port since it started (head and body; read at scrape time: docs/metrics.md). */
  bytes(): number {
    let n = this.closedBytes;
    for (const s of this.sockets) n += s.bytesWritten;
    return n;
  }

  /**
   * Caps a listener socket's kernel send buffer (`listenSendBufferBytes`): an explicit SO_SNDBUF
   * also stops Linux from growing it to megabytes, which would hide a stalled reader from the
   * mount's 10 s rule for minutes. A failure is logged; the listener is served anyway.
   */
  private capSendBuffer(socket: net.Socket, remote: string): void {
    const bytes = this.d.sendBufferBytes;
    if (!(bytes > 0)) return;
    const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
    if (typeof fd !== 'number' || fd < 0 || !setSendBuffer(fd, bytes)) this.d.log.warn('icecast listener: send buffer not capped', { remote });
  }
}

/**
 * A listener's body writer over its socket (the shape of src/base/http/routes/progressive.ts's sink): no
 * framing, the bytes as they are until the end. `write` is false once Node buffers more than its
 * high-water mark for the socket (then the client's `writable` runs at 'drain'); after `end`,
 * `close` or the client's going away, every call does nothing. The client's `gone` runs once when
 * the connection closes before `end`.
 */
class SocketSink implements IcecastListenSink {
  done = false;
  /** What `open` returned (null before, once told it is gone, or after `end`). */
  client: ProgressiveClient | null = null;

  constructor(
    private readonly socket: net.Socket,
    private readonly closeMs: number,
  ) {
    socket.on('drain', () => {
      if (!this.done) this.client?.writable();
    });
    socket.once('close', () => {
      this.done = true;
      this.leave();
    });
  }

  write(chunk: Uint8Array): boolean {
    return this.done ? false : this.socket.write(chunk);
  }

  cork(fn: () => void): void {
    if (this.done) return;
    this.socket.cork();
    try {
      fn();
    } finally {
      this.socket.uncork();
    }
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.client = null;
    const timer = setTimeout(() => this.socket.destroy(), this.closeMs);
    timer.unref();
    this.socket.once('close', () => clearTimeout(timer));
    this.socket.end();
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.socket.destroy();
    this.leave();
  }

  /** Tells the client it is gone, once. */
  leave(): void {
    const c = this.client;
    this.client = null;
    c?.gone();
  }
}
