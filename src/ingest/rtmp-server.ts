/**
 * The RTMP ingest server: the native RtmpListener (TCP accept and reads in C++ on Node's loop, a
 * sans-I/O RTMP session per connection) and what each connection means to the live side.
 * Authorization and media go there through `IngestHooks`; once the live side routes a publisher,
 * its audio reaches the passthrough segmenter without a JS call per message (docs/decisions.md
 * "Ingest I/O"). Bad input closes that one connection with one warning line (remote address and
 * reason, never the stream key).
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { AUDIO_TAG_HEADER_MAX_BYTES, RtmpListener, type RtmpConnection, type RtmpConnectionHandler, type Segmenter, type SegmenterEvent } from '../native/index.js';
import type { LimitSettings } from '../config/config.js';
import type { Limits } from '../limits/limits.js';
import type { Logger } from '../log/logger.js';
import type { PublishDecision, PublishSink, Publisher, RouteTarget } from '../services/live.js';

/** What ingest asks of the live side. */
export interface IngestHooks {
  authorize(app: string, streamName: string): PublishDecision;
  attach(streamId: string, publisher: Publisher): PublishSink;
}

/** Ingest limits. Times in ms. */
export interface IngestOptions {
  /** A publishing connection silent this long is considered gone. */
  idleTimeoutMs: number;
  maxMessageBytes: number;
  /** Merged reads of live (routed) publishers, ms (0 = read as bytes arrive); RtmpListener. */
  mergeReadsMs: number;
  /** The RTMP caps (PRODUCT.md §13), enforced by the listener; unset: the listener's defaults. */
  limitSettings?: Pick<LimitSettings, 'rtmpMaxConnections' | 'rtmpMaxConnectionsPerIp' | 'rtmpPublishTimeoutMs' | 'rtmpPrePublishBytes' | 'maxAudioFrameBytes'>;
  /** Where cap hits are counted and logged. */
  limits?: Limits;
}

/** Ingest defaults (docs/decisions.md "Ingest", "Ingest I/O"). */
export const INGEST_DEFAULTS: IngestOptions = { idleTimeoutMs: 30_000, maxMessageBytes: 1 << 20, mergeReadsMs: 100 };

export class RtmpServer {
  private readonly listener: RtmpListener;

  constructor(private readonly hooks: IngestHooks, private readonly log: Logger, private readonly opts: IngestOptions = INGEST_DEFAULTS) {
    const caps = opts.limitSettings;
    this.listener = new RtmpListener(
      {
        maxMessageBytes: opts.maxMessageBytes,
        mergeReadsMs: opts.mergeReadsMs,
        ...(caps && {
          maxConnections: caps.rtmpMaxConnections,
          maxConnectionsPerIp: caps.rtmpMaxConnectionsPerIp,
          publishTimeoutMs: caps.rtmpPublishTimeoutMs,
          prePublishBytes: caps.rtmpPrePublishBytes,
          maxAudioMessageBytes: caps.maxAudioFrameBytes + AUDIO_TAG_HEADER_MAX_BYTES,
        }),
        onLimit: (cause, remote) => opts.limits?.hit(cause, remote),
      },
      (conn) => this.onConnection(conn),
    );
  }

  /**
   * Listens on host:port (0 = a free port); resolves to the bound port. A host name is resolved
   * first (the listener takes IP literals).
   * @throws Error "cannot listen on rtmp://host:port: …" (address in use, no permission, bad host)
   */
  async listen(host: string, port: number): Promise<number> {
    try {
      const ip = net.isIP(host) ? host : (await lookup(host)).address;
      return this.listener.listen(ip, port, 511);
    } catch (e) {
      throw new Error(`cannot listen on rtmp://${host}:${port}: ${(e as Error).message}`);
    }
  }

  /** Stops listening and closes every connection. */
  close(): Promise<void> {
    this.listener.close();
    return Promise.resolve();
  }

  private onConnection(conn: RtmpConnection): RtmpConnectionHandler {
    const remote = conn.remote;
    let sink: PublishSink | null = null;
    let route: RouteTarget | null = null;
    let app = '';
    let closed = false;
    // Until its publish is accepted, the listener's absolute publish deadline bounds the connection.

    const endSink = () => {
      const s = sink;
      sink = null;
      route = null;
      s?.end();
    };
    const close = (reason: string, level: 'warn' | 'info' = 'info') => {
      if (closed) return;
      closed = true;
      this.log[level](level === 'warn' ? 'rtmp connection closed: bad input' : 'rtmp connection closed', { remote, reason });
      conn.close(); // unroutes at once: no audio reaches the segmenter after this
      endSink();
    };
    const publisher: Publisher = {
      close: (reason) => close(reason),
      reject: (code, description) => {
        conn.rejectPublish(code, description);
        close(`publish rejected: ${code}`);
      },
      route: (target, frames, merge) => {
        if (closed) return;
        route = target;
        conn.route(target ? (target.segmenter as unknown as Segmenter) : null, frames, merge);
      },
      audioBytes: () => conn.audioBytes,
    };

    return {
      audio: (timestampMs, data, segmented) => {
        if (!closed) sink?.audio(timestampMs, data, segmented);
      },
      segmenterEvents: (events: SegmenterEvent[]) => {
        // Always applied, even after close: the segmenter has advanced on this audio already.
        route?.onEvents(events);
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
              conn.rejectPublish(d.status, 'Unknown stream or wrong stream key.');
              close(`publish refused: ${d.reason}`, 'warn');
              break;
            }
            conn.acceptPublish();
            conn.setTimeout(this.opts.idleTimeoutMs);
            conn.route(null, true, false);
            endSink();
            sink = this.hooks.attach(d.streamId, publisher);
            this.log.info('publish started', { remote, streamId: d.streamId });
            break;
          }
          case 'unpublish':
            conn.route(null, true, false);
            endSink();
            break;
          case 'error':
            close(`${e.code}: ${e.message}`, 'warn');
            break;
          case 'metadata':
            break;
        }
      },
      timeout: () => close('publisher silent', 'warn'),
      closed: (reason, error) => {
        if (closed) return;
        if (error) close(`${error.code}: ${error.message}`, 'warn');
        else close(reason);
      },
    };
  }
}
