/**
 * The RTMP ingest server: the native RtmpListener (TCP accept and reads in C++ on Node's loop, a
 * sans-I/O RTMP session per connection) and what each connection means to ingest. The RTMP app
 * must be `live/<stream_id>` and the stream name its key (OBS "Server" + "Stream key"); a publish
 * goes to `Publishing`, which attaches it to the stream's media hub — once live, its audio reaches
 * the passthrough segmenter without a JS call per message (docs/decisions.md "Ingest I/O"); its
 * `onMetaData` `title`/`artist`/`album` is what plays now (docs/behaviour.md §11). Bad
 * input closes that one connection with one warning line (remote address and reason, never the
 * stream key). No exception leaves a native callback: each is caught and logged.
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { AUDIO_TAG_HEADER_MAX_BYTES, RtmpListener, type RtmpConnection, type RtmpConnectionHandler, type RtmpControlEvent } from '../../native/rtmp-listener.js';
import type { LimitSettings } from '../../base/config.js';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import type { Publishing } from './publishing.js';
import type { PublishSink, Publisher } from './publish-entry.js';
import type { NowPlaying } from './port.js';

/** `live/<stream_id>` (a trailing slash allowed): the stream id, or null. */
export function streamIdOfApp(app: string): string | null {
  const m = /^live\/(stm_[A-Za-z0-9]+)\/?$/.exec(app);
  return m ? m[1]! : null;
}

/** Ingest limits. Times in ms. */
export interface IngestOptions {
  /** A publishing connection silent this long is considered gone. */
  idleTimeoutMs: number;
  maxMessageBytes: number;
  /** Merged reads of live (routed) publishers, ms (0 = read as bytes arrive); RtmpListener. */
  mergeReadsMs: number;
  /** The RTMP caps (docs/behaviour.md §13), enforced by the listener; unset: the listener's defaults. */
  limitSettings?: Pick<LimitSettings, 'rtmpMaxConnections' | 'rtmpMaxConnectionsPerIp' | 'rtmpPublishTimeoutMs' | 'rtmpPrePublishBytes' | 'maxAudioFrameBytes'>;
  /** Where cap hits are counted and logged. */
  limits?: Limits;
}

/** Ingest defaults (docs/decisions.md "Ingest", "Ingest I/O"). */
export const INGEST_DEFAULTS: IngestOptions = { idleTimeoutMs: 30_000, maxMessageBytes: 1 << 20, mergeReadsMs: 100 };

/**
 * The RTMP ingest (docs/behaviour.md §13 for its caps): a native RtmpListener whose connections
 * publish through `Publishing`. `listen` resolves to the bound port; `close` ends every connection.
 */
export class RtmpIngest {
  private readonly listener: RtmpListener;

  constructor(private readonly publishing: Publishing, private readonly log: Logger, private readonly opts: IngestOptions = INGEST_DEFAULTS) {
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
        onCallbackError: (e) => this.log.error('rtmp callback failed', { err: e instanceof Error ? e.stack : String(e) }),
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
    const session = new IngestConnection(conn, this.publishing, this.log, this.opts);
    return guarded(session.handler(), (where, e) => {
      this.log.error('rtmp connection handler failed; connection closed', { remote: conn.remote, where, err: e instanceof Error ? e.stack : String(e) });
      try {
        session.close(`internal error in ${where}`, 'warn');
      } catch {
        // Closing failed too: the listener drops the connection when its socket closes.
      }
    });
  }
}

/**
 * What one RTMP connection means to ingest: its `connect` app, its publish (handed to
 * `Publishing`, answered NetStream.Publish.Start or .BadName), its audio into the publish sink,
 * its `onMetaData` now playing, and its close (once, with one log line). Until its publish is
 * accepted, the listener's absolute publish deadline bounds the connection.
 */
class IngestConnection {
  private sink: PublishSink | null = null;
  private app = '';
  /** The stream of the accepted publish (its `onMetaData` title is what plays now). */
  private publishedTo: string | null = null;
  private closed = false;
  /** The connection's last error comes from an audio message over the cap. */
  private tooLarge = false;
  private readonly publisher: Publisher;

  constructor(
    private readonly conn: RtmpConnection,
    private readonly publishing: Publishing,
    private readonly log: Logger,
    private readonly opts: IngestOptions,
  ) {
    this.publisher = {
      remote: conn.remote,
      close: (reason) => this.close(reason),
      reject: (description) => {
        conn.rejectPublish('NetStream.Publish.Rejected', description);
        this.close('publish rejected: NetStream.Publish.Rejected');
      },
      route: (target, frames, merge) => {
        if (!this.closed) conn.route(target, frames, merge);
      },
      audioBytes: () => conn.audioBytes,
    };
  }

  /** Closes the connection once (unrouted at once: no audio reaches the segmenter after this) and ends its publish. */
  close(reason: string, level: 'warn' | 'info' = 'info'): void {
    if (this.closed) return;
    this.closed = true;
    this.log[level](level === 'warn' ? 'rtmp connection closed: bad input' : 'rtmp connection closed', { remote: this.conn.remote, reason });
    this.conn.close();
    this.endSink();
  }

  /** The listener's handler of this connection (unguarded: RtmpIngest wraps it). */
  handler(): RtmpConnectionHandler {
    return {
      audio: (timestampMs, data, segmented) => {
        if (!this.closed) this.sink?.audio(timestampMs, data, segmented);
      },
      event: (e) => {
        if (!this.closed) this.event(e);
      },
      limit: (cause) => {
        if (cause === 'audio_frame_bytes') this.tooLarge = true;
      },
      timeout: () => this.close('publisher silent', 'warn'),
      closed: (reason, error) => {
        if (this.closed) return;
        if (error) this.close(`${error.code}: ${error.message}`, 'warn');
        else this.close(reason);
      },
    };
  }

  private event(e: RtmpControlEvent): void {
    switch (e.type) {
      case 'connect':
        this.app = e.app;
        break;
      case 'publish':
        this.publish(e.streamName);
        break;
      case 'unpublish':
        this.conn.route(null, true, false);
        this.endSink();
        break;
      case 'error':
        // An audio frame over the cap (docs/behaviour.md §13): the stream's owner hears why the publish ended.
        if (this.tooLarge && this.sink) this.sink.fail({ code: 'frame_too_large', message: `An audio message was larger than ${this.opts.limitSettings?.maxAudioFrameBytes ?? 'the allowed'} bytes; the publish was ended.` });
        this.close(`${e.code}: ${e.message}`, 'warn');
        break;
      case 'metadata': {
        // docs/behaviour.md §11: `@setDataFrame`/`onMetaData` carrying `title` (FFmpeg `-metadata title=…`).
        const np = nowPlayingOf(e.values);
        if (np && this.sink && this.publishedTo) this.publishing.nowPlaying(this.publishedTo, np);
        break;
      }
    }
  }

  private publish(streamName: string): void {
    const streamId = streamIdOfApp(this.app);
    // The log redacts a stream key typed into the app (src/base/logger.ts).
    if (!streamId) return this.refuse(`unknown application '${this.app.slice(0, 80)}'`);
    const key = streamName.split('?')[0]!;
    // A second publish on this connection replaces its first one.
    this.conn.route(null, true, false);
    this.endSink();
    const d = this.publishing.publish(streamId, key, this.publisher);
    if (!d.ok) return this.refuse(d.reason);
    this.sink = d.sink;
    this.publishedTo = streamId;
    this.conn.acceptPublish();
    this.conn.setTimeout(this.opts.idleTimeoutMs);
    this.log.info('publish started', { remote: this.conn.remote, streamId });
  }

  private refuse(reason: string): void {
    this.conn.rejectPublish('NetStream.Publish.BadName', 'Unknown stream or wrong stream key.');
    this.close(`publish refused: ${reason}`, 'warn');
  }

  private endSink(): void {
    const s = this.sink;
    this.sink = null;
    s?.end();
  }
}

/** Longest now-playing text taken from a publisher (docs/behaviour.md §11). */
const NOW_PLAYING_MAX = 256;

/**
 * What plays now from `onMetaData` values: `title` (required), `artist`, `album` — strings only,
 * trimmed, at most 256 characters; other keys are ignored. Null without a title.
 */
export function nowPlayingOf(values: Record<string, number | string | boolean>): NowPlaying | null {
  const text = (k: string): string | null => {
    const v = Object.hasOwn(values, k) ? values[k] : undefined;
    if (typeof v !== 'string') return null;
    const t = v.trim().slice(0, NOW_PLAYING_MAX);
    return t === '' ? null : t;
  };
  const title = text('title');
  return title === null ? null : { title, artist: text('artist'), album: text('album') };
}

/** The same handler, with every callback's exception caught and given to `onError` (never into native code). */
function guarded(h: RtmpConnectionHandler, onError: (where: string, e: unknown) => void): RtmpConnectionHandler {
  const wrap =
    <A extends unknown[]>(where: string, f: (...a: A) => void) =>
    (...a: A): void => {
      try {
        f(...a);
      } catch (e) {
        onError(where, e);
      }
    };
  return {
    audio: wrap('audio', h.audio),
    limit: wrap('limit', (c: Parameters<NonNullable<RtmpConnectionHandler['limit']>>[0]) => h.limit?.(c)),
    event: wrap('event', h.event),
    timeout: wrap('timeout', h.timeout),
    closed: wrap('closed', h.closed),
  };
}
