/**
 * The RTMP ingest server: a node:net listener that feeds each connection's bytes to a native
 * sans-I/O RtmpSession and writes back what the session answers. Authorization and media go to the
 * live side through `IngestHooks`. Bad input closes that one connection with one warning line
 * (remote address and reason, never the stream key).
 */
import net from 'node:net';
import { RtmpSession, type RtmpHandler } from '../native/index.js';
import type { Logger } from '../log/logger.js';
import type { PublishDecision, PublishSink, Publisher } from '../services/live.js';

/** What ingest asks of the live side. */
export interface IngestHooks {
  authorize(app: string, streamName: string): PublishDecision;
  attach(streamId: string, publisher: Publisher): PublishSink;
}

/** Ingest limits. Times in ms. */
export interface IngestOptions {
  /** A connection that has not published within this time is closed. */
  handshakeTimeoutMs: number;
  /** A publishing connection silent this long is considered gone. */
  idleTimeoutMs: number;
  maxMessageBytes: number;
}

const DEFAULTS: IngestOptions = { handshakeTimeoutMs: 15_000, idleTimeoutMs: 30_000, maxMessageBytes: 1 << 20 };

export class RtmpServer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly hooks: IngestHooks, private readonly log: Logger, private readonly opts: IngestOptions = DEFAULTS) {
    this.server = net.createServer({ noDelay: true }, (socket) => this.onConnection(socket));
    this.server.on('error', (e) => this.log.error('rtmp server error', { err: String(e) }));
  }

  /** Listens on host:port (0 = a free port); resolves to the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error) => reject(new Error(`cannot listen on rtmp://${host}:${port}: ${e.message}`));
      this.server.once('error', onError);
      this.server.listen({ host, port, backlog: 511 }, () => {
        this.server.off('error', onError);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  /** Stops listening and closes every connection. */
  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private onConnection(socket: net.Socket): void {
    this.sockets.add(socket);
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    const session = new RtmpSession({ maxMessageBytes: this.opts.maxMessageBytes });
    let sink: PublishSink | null = null;
    let app = '';
    let closed = false;
    socket.setTimeout(this.opts.handshakeTimeoutMs);

    const flushOutput = () => {
      const out = session.takeOutput();
      if (out && !socket.destroyed) socket.write(out);
    };
    const close = (reason: string, level: 'warn' | 'info' = 'info') => {
      if (closed) return;
      closed = true;
      this.log[level](level === 'warn' ? 'rtmp connection closed: bad input' : 'rtmp connection closed', { remote, reason });
      const s = sink;
      sink = null;
      s?.end();
      socket.end();
      socket.destroySoon();
      setTimeout(() => socket.destroy(), 2000).unref();
    };
    const publisher: Publisher = {
      close: (reason) => close(reason),
      reject: (code, description) => {
        session.rejectPublish(code, description);
        flushOutput();
        close(`publish rejected: ${code}`);
      },
    };

    // Events of one read, in order. Audio comes without an event object (RtmpSession.pushTo).
    const handler: RtmpHandler = {
      audio: (timestampMs, data) => {
        if (!closed) sink?.audio(timestampMs, data);
      },
      event: (e) => {
        if (closed) return;
        switch (e.type) {
          case 'connect':
            app = e.app;
            break;
          case 'publish': {
            const d = this.hooks.authorize(app, e.streamName);
            if (!d.ok) {
              session.rejectPublish(d.status, 'Unknown stream or wrong stream key.');
              flushOutput();
              close(`publish refused: ${d.reason}`, 'warn');
              break;
            }
            session.acceptPublish();
            flushOutput();
            socket.setTimeout(this.opts.idleTimeoutMs);
            sink?.end();
            sink = this.hooks.attach(d.streamId, publisher);
            this.log.info('publish started', { remote, streamId: d.streamId });
            break;
          }
          case 'unpublish': {
            const s = sink;
            sink = null;
            s?.end();
            break;
          }
          case 'error':
            flushOutput();
            close(`${e.code}: ${e.message}`, 'warn');
            break;
          case 'metadata':
            break;
        }
      },
    };

    socket.on('data', (chunk) => {
      if (closed) return;
      session.pushTo(chunk, handler);
      if (session.hasOutput) flushOutput();
    });
    socket.on('timeout', () => close(sink ? 'publisher silent' : 'no publish in time', 'warn'));
    socket.on('error', (e) => close(`socket error: ${e.message}`));
    socket.on('close', () => {
      this.sockets.delete(socket);
      if (closed) return;
      const vanished = session.end().find((e) => e.type === 'error');
      if (vanished && vanished.type === 'error') close(`${vanished.code}: ${vanished.message}`, 'warn');
      else close('peer closed');
    });
  }
}
