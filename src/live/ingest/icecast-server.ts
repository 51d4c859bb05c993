/**
 * The Icecast source ingest (docs/behaviour.md §10 "Ingest", §11): a second ingest listener for DJ
 * software and encoders that speak Icecast's source protocol — FFmpeg `icecast://`, libshout
 * (`shout`, ezstream, darkice, BUTT, Mixxx) and Liquidsoap.
 *
 * - `PUT` (Icecast 2.4, `Expect: 100-continue` honoured) or the legacy `SOURCE` method to
 *   `/live/<stream_id>` or to the stream's own mount (`icecastMount`, e.g. `/stream`; docs/icecast.md
 *   "Mounts"), HTTP Basic user `source` and password = the stream key. Wrong key,
 *   unknown or ended stream → 401; a stream key (any stream's) on a mount no stream has → 404
 *   naming the mount; a `Content-Type` of another codec than the stream's → 415 and
 *   `stream.error` `codec_mismatch`. Accepted: `100 Continue` (when expected) and `200 OK`, then
 *   the request body is the audio, for as long as the connection lasts.
 * - The body (MP3 frames, ADTS, Ogg Opus; chunked or not) goes through the native IcecastSource
 *   parser, which makes of it the audio messages an RTMP publisher would send, into the same
 *   `Publishing` (live on the first frame, reconnect window, newest publisher wins whichever
 *   protocol each uses, `ended`).
 * - `GET /admin/metadata?mount=/live/<id>|<own mount>&mode=updinfo&song=<Artist - Title>` (or `title=`,
 *   `artist=`) with the source's credentials sets the stream's now-playing title; the text is in
 *   the `charset=` it names (ISO-8859-1, Windows-1252, UTF-8; without one: UTF-8 when valid, else
 *   ISO-8859-1). A source connection that sends no title clears the previous one (publishing.ts).
 * - Listeners, as on Icecast 2.4 (docs/icecast.md): `GET|HEAD /live/<stream_id>[.mp3|.aac|.opus|.ogg]`
 *   or a stream's own mount (its codec) is answered by the `/listen` machinery through `IcecastListening` (the same audio, ICY
 *   metadata, caps and listener sessions), as `HTTP/1.0 200 OK` with an unframed body until close
 *   whatever the request's HTTP version; `GET /status-json.xsl` is Icecast's status JSON
 *   (./icecast-listeners.ts).
 *
 * Limits (docs/behaviour.md §13): connections per IP and in total, the request head within 10 s and
 * 16 KiB, a body silent for 30 s ends the publish. Each hit is logged and counted; no key is ever
 * logged. A connection that is refused (any 4xx/503) or answered once (`updinfo`, the status
 * JSON, a HEAD) gives its slot back when the answer is written and is destroyed REFUSED_CLOSE_MS
 * later whether or not the client closes its side. A listener's connection leaves the source
 * caps as soon as it is a listener: the listening caps count it from then on.
 */
import net from 'node:net';
import { lookup } from 'node:dns/promises';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import { PerAddressCounter } from '../../base/limits/limits.js';
import { IcecastSource, type IcecastCodec, type IcecastSourceEvent } from '../../native/icecast-source.js';
import type { Publishing } from './publishing.js';
import type { PublishSink, Publisher } from './publish-entry.js';
import type { IngestPort } from './port.js';
import { basicCredentials, codecOfContentType, decodeCharset, Dechunker, HeadReader, printable, queryBytes, response, type RequestHead } from './icecast-http.js';
import type { IcecastListening } from './port.js';
import { IcecastListeners, type IcecastConn } from './icecast-listeners.js';

/** Icecast ingest settings. Times in ms, sizes in bytes. */
export interface IcecastServerOptions {
  maxConnections: number;
  maxConnectionsPerIp: number;
  /** The request head must be complete this long after connecting. */
  headTimeoutMs: number;
  /** A source whose body is silent this long is closed. */
  idleTimeoutMs: number;
  /** Largest audio frame taken (docs/behaviour.md §13). */
  maxAudioFrameBytes: number;
  /**
   * Kernel send buffer of a listener's socket (SO_SNDBUF, bytes; 0 = as the kernel sizes it): so
   * that a listener who stops reading is seen behind, and cut, as on `/listen` (docs/icecast.md).
   */
  listenSendBufferBytes: number;
}

/** How long an answered or refused connection may stay open after the answer (ms): then it is destroyed. */
export const REFUSED_CLOSE_MS = 5000;

/** Defaults (docs/decisions.md "Icecast ingest"). */
export const ICECAST_DEFAULTS: IcecastServerOptions = { maxConnections: 200, maxConnectionsPerIp: 10, headTimeoutMs: 10_000, idleTimeoutMs: 30_000, maxAudioFrameBytes: 8192, listenSendBufferBytes: 256 * 1024 };

const STREAM_PATH = /^\/live\/(stm_[A-Za-z0-9]+)\/?$/;
/** What a stream's own mount may look like (the API's rule; the rest of it is checked when it is set). */
const MOUNT_SHAPE = /^\/[A-Za-z0-9._/-]{1,63}$/;

/** `ip` of `ip:port` forms and IPv4-mapped IPv6 (`::ffff:a.b.c.d`). */
function ipOf(socket: net.Socket): string {
  const a = socket.remoteAddress ?? '';
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

const XML_OK = '<?xml version="1.0"?>\n<iceresponse><message>Metadata update successful</message><return>1</return></iceresponse>\n';
const xmlError = (m: string) => `<?xml version="1.0"?>\n<iceresponse><message>${m.replace(/[<&>]/g, '')}</message><return>0</return></iceresponse>\n`;

export class IcecastServer {
  private readonly server: net.Server;
  private readonly counter: PerAddressCounter;
  private readonly sockets = new Set<net.Socket>();
  /** Listeners on this port now, by stream id (docs/metrics.md `skylark_listeners`, protocol `icecast`). */
  readonly listenersByStream: Map<string, number>;
  /** The port's listener side (./icecast-listeners.ts). */
  private readonly listeners: IcecastListeners;

  constructor(
    private readonly publishing: Publishing,
    private readonly port: Pick<IngestPort, 'authorizePublish' | 'onError' | 'streamOfMount' | 'isStreamKey'>,
    private readonly log: Logger,
    private readonly limits: Limits,
    private readonly opts: IcecastServerOptions = ICECAST_DEFAULTS,
    /** Listeners and the status JSON; without it every GET but the admin call is 404. */
    listening: IcecastListening | null = null,
  ) {
    this.counter = new PerAddressCounter(opts.maxConnections, opts.maxConnectionsPerIp);
    this.server = net.createServer({ noDelay: true }, (socket) => this.onConnection(socket));
    this.server.on('error', (e) => this.log.error('icecast listener error', { err: e.message }));
    this.listeners = new IcecastListeners({
      listening,
      log,
      sendBufferBytes: opts.listenSendBufferBytes,
      closeMs: REFUSED_CLOSE_MS,
      answer: (conn, text) => this.answer(conn, text),
      finish: (socket, text) => this.finish(socket, text),
      streamOfMount: (path) => this.streamOfMount(path),
    });
    this.listenersByStream = this.listeners.byStream;
  }

  /** Bytes written to listeners on this port since it started (head and body; read at scrape time: docs/metrics.md). */
  listenerBytes(): number {
    return this.listeners.bytes();
  }

  /**
   * Listens on host:port (0 = a free port); resolves to the bound port.
   * @throws Error "cannot listen on http://host:port: …"
   */
  async listen(host: string, port: number): Promise<number> {
    try {
      const ip = net.isIP(host) ? host : (await lookup(host)).address;
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen(port, ip, 511, () => {
          this.server.off('error', reject);
          resolve();
        });
      });
      return (this.server.address() as net.AddressInfo).port;
    } catch (e) {
      throw new Error(`cannot listen on http://${host}:${port} (Icecast ingest): ${(e as Error).message}`);
    }
  }

  /** Stops listening and closes every source connection. */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onConnection(socket: net.Socket): void {
    const ip = ipOf(socket);
    const remote = `${ip}:${socket.remotePort ?? 0}`;
    const slot = this.counter.tryAcquire(ip);
    socket.on('error', () => {}); // reported by 'close'
    if (slot !== 'ok') {
      this.limits.hit(slot === 'total' ? 'icecast_connections' : 'icecast_connections_per_ip', remote);
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      this.finish(socket, response('503 Service Unavailable', { 'Retry-After': '10' }, 'Too many source connections.\n'));
      return;
    }
    this.sockets.add(socket);
    let held = true;
    const conn: IcecastConn = {
      socket,
      ip,
      remote,
      release: () => {
        if (!held) return;
        held = false;
        this.counter.release(ip);
      },
    };
    socket.once('close', () => {
      this.sockets.delete(socket);
      conn.release();
    });
    const reader = new HeadReader();
    const headTimer = setTimeout(() => {
      this.log.warn('icecast connection closed: no request head in time', { remote });
      socket.destroy();
    }, this.opts.headTimeoutMs);
    headTimer.unref();
    const onHead = (data: Buffer) => {
      let r;
      try {
        r = reader.push(data);
      } catch (e) {
        r = { kind: 'error' as const, status: 400 as const, reason: (e as Error).message };
      }
      if (r.kind === 'more') return;
      clearTimeout(headTimer);
      socket.off('data', onHead);
      if (r.kind === 'error') {
        this.log.warn('icecast connection closed: bad request head', { remote, reason: r.reason });
        this.answer(conn, response(r.status === 431 ? '431 Request Header Fields Too Large' : '400 Bad Request'));
        return;
      }
      try {
        this.onRequest(conn, r.head, r.rest);
      } catch (e) {
        this.log.error('icecast request failed', { remote, err: e instanceof Error ? e.stack : String(e) });
        socket.destroy();
      }
    };
    socket.on('data', onHead);
  }

  /**
   * Writes a whole answer (a refusal, or a one-off reply) and ends the connection: its slot is
   * given back at once, and the socket is destroyed REFUSED_CLOSE_MS later if the client has not
   * closed its side by then. What the client still sends is read and dropped.
   */
  private answer(conn: IcecastConn, text: string | Buffer): void {
    conn.release();
    this.finish(conn.socket, text);
  }

  /** Ends `socket` after `text`; destroyed REFUSED_CLOSE_MS later whatever the client does. */
  private finish(socket: net.Socket, text: string | Buffer): void {
    socket.removeAllListeners('data');
    socket.on('data', () => {}); // drained and dropped: the peer's bytes are not kept
    socket.resume();
    socket.setTimeout(0);
    const timer = setTimeout(() => socket.destroy(), REFUSED_CLOSE_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    socket.end(text);
  }

  private onRequest(conn: IcecastConn, head: RequestHead, rest: Buffer): void {
    const { socket, remote } = conn;
    const url = new URL(head.target, 'http://icecast.invalid');
    if (head.method === 'GET' && (url.pathname === '/admin/metadata' || url.pathname === '/admin/metadata.xsl')) return this.updinfo(conn, head);
    if (head.method === 'GET' || head.method === 'HEAD') return this.listeners.serve(conn, head, url);
    if (head.method !== 'PUT' && head.method !== 'SOURCE') {
      this.answer(conn, response('405 Method Not Allowed', { Allow: 'GET, HEAD, PUT, SOURCE' }, 'Listen with GET, send audio with PUT or SOURCE to /live/<stream id>.\n'));
      return;
    }
    const m = STREAM_PATH.exec(url.pathname);
    const mounted = m ? null : this.streamOfMount(url.pathname);
    const creds = basicCredentials(head.headers.get('authorization'));
    const refuse = (reason: string) => {
      // libshout's first try carries no credentials and expects this 401 (the protocol's normal first
      // step, RFC 9110 §11.6.1): only a refusal of credentials that were sent is a warning.
      if (head.headers.get('authorization') === undefined) this.log.debug('icecast source asked for credentials', { remote, reason });
      else this.log.warn('icecast source refused', { remote, reason });
      this.answer(conn, response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }, 'Authentication required: user "source", the stream key as password.\n'));
    };
    if (!creds || creds.user !== 'source') return refuse('no source credentials');
    if (!m && !mounted) {
      // A source with a stream key on a mount no stream has is told which mount is missing
      // (docs/icecast.md "Mounts"); without a valid key the answer is the 401 as for any wrong key.
      if (!this.port.isStreamKey?.(creds.password)) return refuse(`unknown mount '${printable(url.pathname)}'`);
      this.log.warn('icecast source refused: no such mount', { remote, mount: printable(url.pathname) });
      this.answer(conn, response('404 Not Found', {}, `No such mount: ${printable(url.pathname)}. Publish to /live/<stream id>, or set the stream's icecastMount to ${printable(url.pathname)}.\n`));
      return;
    }
    const streamId = m ? m[1]! : mounted!;
    const granted = this.port.authorizePublish(streamId, creds.password);
    if (!granted.ok) return refuse(granted.reason);
    const want = granted.grant.codec;
    const sent = codecOfContentType(head.headers.get('content-type'));
    if (sent !== want) {
      const received = sent ?? (head.headers.get('content-type') || 'none').slice(0, 60);
      this.port.onError(streamId, { code: 'codec_mismatch', message: `The stream accepts ${want} audio but received ${received}.`, expected: want, received });
      this.log.warn('icecast source refused: codec mismatch', { remote, streamId, expected: want, received });
      this.answer(conn, response('415 Unsupported Media Type', {}, `This stream takes ${want} audio.\n`));
      return;
    }
    this.startSource(conn, streamId, creds.password, want, head, rest);
  }

  private startSource(conn: IcecastConn, streamId: string, key: string, codec: IcecastCodec, head: RequestHead, rest: Buffer): void {
    const { socket, remote } = conn;
    let closed = false;
    let bodyBytes = 0;
    let sink: PublishSink | null = null;
    const close = (reason: string, level: 'info' | 'warn' = 'info') => {
      if (closed) return;
      closed = true;
      this.log[level]('icecast source closed', { remote, streamId, reason });
      socket.destroy();
      const s = sink;
      sink = null;
      s?.end();
    };
    const publisher: Publisher = {
      remote,
      close: (reason) => close(reason),
      reject: (description) => close(`refused: ${description}`),
      // An Icecast source is read in JS and every frame goes through the hub: nothing to route.
      route: () => {},
      audioBytes: () => bodyBytes,
    };
    const decision = this.publishing.publish(streamId, key, publisher);
    if (!decision.ok) {
      this.answer(conn, response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }));
      return;
    }
    sink = decision.sink;
    if (/100-continue/i.test(head.headers.get('expect') ?? '')) socket.write('HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n');
    socket.write('HTTP/1.0 200 OK\r\n\r\n');
    this.log.info('publish started', { remote, streamId, protocol: 'icecast' });

    const parser = new IcecastSource(codec, { maxFrameBytes: Math.max(1024, this.opts.maxAudioFrameBytes) });
    const handler = {
      audio: (ts: number, body: Buffer) => sink?.audio(ts, body, false),
      event: (e: IcecastSourceEvent) => {
        if (e.type === 'tags') {
          const title = tagValue(e.comments, 'TITLE');
          if (title) this.publishing.nowPlaying(streamId, { title: title.slice(0, 256), artist: tagValue(e.comments, 'ARTIST')?.slice(0, 256) ?? null });
          return;
        }
        if (e.code === 'frame_too_large') {
          this.limits.hit('audio_frame_bytes', remote, { streamId });
          sink?.fail({ code: 'frame_too_large', message: e.message });
        } else if (e.code === 'codec_mismatch') sink?.fail({ code: 'codec_mismatch', message: e.message, expected: codec, received: e.received ?? 'unknown' });
        close(`${e.code}: ${e.message}`, 'warn');
      },
    };
    const chunked = /chunked/i.test(head.headers.get('transfer-encoding') ?? '');
    const dechunker = chunked ? new Dechunker() : null;
    const feed = (data: Buffer) => {
      if (closed) return;
      try {
        if (dechunker) {
          const r = dechunker.push(data);
          if ('error' in r) return close(`bad chunked body: ${r.error}`, 'warn');
          for (const b of r.out) {
            bodyBytes += b.length;
            parser.pushTo(b, handler);
          }
          if (r.done) close('source ended its body');
          return;
        }
        bodyBytes += data.length;
        parser.pushTo(data, handler);
      } catch (e) {
        this.log.error('icecast source failed', { remote, streamId, err: e instanceof Error ? e.stack : String(e) });
        close('internal error', 'warn');
      }
    };
    socket.setTimeout(this.opts.idleTimeoutMs, () => close('source silent', 'warn'));
    socket.on('data', feed);
    socket.once('close', () => close('source closed'));
    if (rest.length > 0) feed(rest);
  }

  /**
   * Icecast's admin metadata call, as DJ software makes it (`mode=updinfo`). The text of `song`,
   * `title`, `artist` is read as bytes and decoded in the `charset=` the call names (Icecast's
   * `admin.c`: ISO-8859-1, Windows-1252, UTF-8; without one, UTF-8 when valid, else ISO-8859-1).
   */
  private updinfo(conn: IcecastConn, head: RequestHead): void {
    const { remote } = conn;
    const reply = (status: string, body: string): void => this.answer(conn, response(status, { 'Content-Type': 'text/xml' }, body));
    const unauthorized = () => this.answer(conn, response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }));
    const q = head.target.indexOf('?');
    const params = queryBytes(q < 0 ? '' : head.target.slice(q + 1));
    const ascii = (name: string) => params.get(name)?.toString('latin1') ?? null;
    const mount = ascii('mount') ?? '';
    const m = STREAM_PATH.exec(mount);
    const streamId = m ? m[1]! : this.streamOfMount(mount);
    const creds = basicCredentials(head.headers.get('authorization'));
    if (!streamId || !creds) return unauthorized();
    const granted = this.port.authorizePublish(streamId, creds.password);
    if (!granted.ok) {
      this.log.warn('icecast metadata refused', { remote, reason: granted.reason });
      return unauthorized();
    }
    if (ascii('mode') !== 'updinfo') return reply('400 Bad Request', xmlError('Only mode=updinfo is supported'));
    let text: (name: string) => string | null;
    try {
      const charset = ascii('charset');
      decodeCharset(Buffer.alloc(0), charset);
      text = (name) => {
        const b = params.get(name);
        return b === undefined ? null : decodeCharset(b, charset).trim();
      };
    } catch (e) {
      return reply('400 Bad Request', xmlError((e as Error).message));
    }
    const song = text('song');
    let title = text('title');
    let artist = text('artist');
    if (song && !title) {
      const dash = song.indexOf(' - ');
      if (dash > 0 && !artist) {
        artist = song.slice(0, dash);
        title = song.slice(dash + 3);
      } else title = song;
    }
    if (!title) return reply('400 Bad Request', xmlError('No song or title given'));
    this.publishing.nowPlaying(streamId, { title: title.slice(0, 256), artist: artist ? artist.slice(0, 256) : null });
    reply('200 OK', XML_OK);
  }

  /**
   * The stream whose own mount is `path` (docs/icecast.md "Mounts"), or null. Only a path of a
   * mount's shape is looked up (at most 64 characters of `A-Z a-z 0-9 . _ - /` after a `/`): what a
   * stranger sends costs no database read otherwise.
   */
  private streamOfMount(path: string): string | null {
    if (!MOUNT_SHAPE.test(path) || !this.port.streamOfMount) return null;
    return this.port.streamOfMount(path);
  }
}

/** The value of a Vorbis comment `KEY=value` (key compared without case), or undefined. */
function tagValue(comments: string[], key: string): string | undefined {
  const prefix = `${key.toLowerCase()}=`;
  const c = comments.find((x) => x.slice(0, prefix.length).toLowerCase() === prefix);
  return c ? c.slice(prefix.length) : undefined;
}

