/**
 * The Icecast source ingest (PRODUCT.md §10 "Ingest", §11): a second ingest listener for DJ
 * software and encoders that speak Icecast's source protocol — FFmpeg `icecast://`, libshout
 * (`shout`, ezstream, darkice, BUTT, Mixxx) and Liquidsoap.
 *
 * - `PUT` (Icecast 2.4, `Expect: 100-continue` honoured) or the legacy `SOURCE` method to
 *   `/live/<stream_id>`, HTTP Basic user `source` and password = the stream key. Wrong key,
 *   unknown or ended stream → 401; a `Content-Type` of another codec than the stream's → 415 and
 *   `stream.error` `codec_mismatch`. Accepted: `100 Continue` (when expected) and `200 OK`, then
 *   the request body is the audio, for as long as the connection lasts.
 * - The body (MP3 frames, ADTS, Ogg Opus; chunked or not) goes through the native IcecastSource
 *   parser, which makes of it the audio messages an RTMP publisher would send, into the same
 *   `Publishing` (live on the first frame, reconnect window, newest publisher wins whichever
 *   protocol each uses, `ended`).
 * - `GET /admin/metadata?mount=/live/<id>&mode=updinfo&song=<Artist - Title>` (or `title=`,
 *   `artist=`) with the source's credentials sets the stream's now-playing title.
 *
 * Limits (PRODUCT.md §13): connections per IP and in total, the request head within 10 s and
 * 16 KiB, a body silent for 30 s ends the publish. Each hit is logged and counted; no key is ever
 * logged.
 */
import net from 'node:net';
import { lookup } from 'node:dns/promises';
import type { Logger } from '../log/logger.js';
import type { Limits } from '../limits/limits.js';
import { PerAddressCounter } from '../limits/limits.js';
import { IcecastSource, type IcecastCodec, type IcecastSourceEvent } from '../native/icecast.js';
import type { Publishing, PublishSink, Publisher } from './publishing.js';
import type { IngestPort } from './port.js';
import { basicCredentials, codecOfContentType, Dechunker, HeadReader, type RequestHead } from './icecast-http.js';

/** Icecast ingest settings. Times in ms, sizes in bytes. */
export interface IcecastServerOptions {
  maxConnections: number;
  maxConnectionsPerIp: number;
  /** The request head must be complete this long after connecting. */
  headTimeoutMs: number;
  /** A source whose body is silent this long is closed. */
  idleTimeoutMs: number;
  /** Largest audio frame taken (PRODUCT.md §13). */
  maxAudioFrameBytes: number;
}

/** Defaults (docs/decisions.md "Icecast ingest"). */
export const ICECAST_DEFAULTS: IcecastServerOptions = { maxConnections: 200, maxConnectionsPerIp: 10, headTimeoutMs: 10_000, idleTimeoutMs: 30_000, maxAudioFrameBytes: 8192 };

const STREAM_PATH = /^\/live\/(stm_[A-Za-z0-9]+)\/?$/;

/** `ip` of `ip:port` forms and IPv4-mapped IPv6 (`::ffff:a.b.c.d`). */
function ipOf(socket: net.Socket): string {
  const a = socket.remoteAddress ?? '';
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/** A plain response head (HTTP/1.0 like Icecast: the connection closes after it). */
function response(status: string, headers: Record<string, string> = {}, body = ''): string {
  let h = `HTTP/1.0 ${status}\r\nServer: Skylark\r\nConnection: Close\r\nCache-Control: no-cache, no-store\r\n`;
  for (const k in headers) h += `${k}: ${headers[k]}\r\n`;
  if (body) h += `${'Content-Type' in headers ? '' : 'Content-Type: text/plain; charset=utf-8\r\n'}Content-Length: ${Buffer.byteLength(body)}\r\n`;
  return `${h}\r\n${body}`;
}

const XML_OK = '<?xml version="1.0"?>\n<iceresponse><message>Metadata update successful</message><return>1</return></iceresponse>\n';
const xmlError = (m: string) => `<?xml version="1.0"?>\n<iceresponse><message>${m.replace(/[<&>]/g, '')}</message><return>0</return></iceresponse>\n`;

export class IcecastServer {
  private readonly server: net.Server;
  private readonly counter: PerAddressCounter;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly publishing: Publishing,
    private readonly port: Pick<IngestPort, 'authorizePublish' | 'onError'>,
    private readonly log: Logger,
    private readonly limits: Limits,
    private readonly opts: IcecastServerOptions = ICECAST_DEFAULTS,
  ) {
    this.counter = new PerAddressCounter(opts.maxConnections, opts.maxConnectionsPerIp);
    this.server = net.createServer({ noDelay: true }, (socket) => this.onConnection(socket));
    this.server.on('error', (e) => this.log.error('icecast listener error', { err: e.message }));
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
    if (slot !== 'ok') {
      this.limits.hit(slot === 'total' ? 'icecast_connections' : 'icecast_connections_per_ip', remote);
      socket.end(response('503 Service Unavailable', { 'Retry-After': '10' }, 'Too many source connections.\n'));
      socket.destroySoon();
      return;
    }
    this.sockets.add(socket);
    socket.on('error', () => {}); // reported by 'close'
    socket.once('close', () => {
      this.sockets.delete(socket);
      this.counter.release(ip);
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
        socket.end(response(r.status === 431 ? '431 Request Header Fields Too Large' : '400 Bad Request'));
        return;
      }
      try {
        this.onRequest(socket, remote, r.head, r.rest);
      } catch (e) {
        this.log.error('icecast request failed', { remote, err: e instanceof Error ? e.stack : String(e) });
        socket.destroy();
      }
    };
    socket.on('data', onHead);
  }

  private onRequest(socket: net.Socket, remote: string, head: RequestHead, rest: Buffer): void {
    const url = new URL(head.target, 'http://icecast.invalid');
    if (head.method === 'GET' && (url.pathname === '/admin/metadata' || url.pathname === '/admin/metadata.xsl')) return this.updinfo(socket, remote, head, url);
    if (head.method !== 'PUT' && head.method !== 'SOURCE') {
      socket.end(response('405 Method Not Allowed', { Allow: 'PUT, SOURCE' }, 'Send audio with PUT or SOURCE to /live/<stream id>.\n'));
      return;
    }
    const m = STREAM_PATH.exec(url.pathname);
    const creds = basicCredentials(head.headers.get('authorization'));
    const refuse = (reason: string) => {
      this.log.warn('icecast source refused', { remote, reason });
      socket.end(response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }, 'Authentication required: user "source", the stream key as password.\n'));
    };
    if (!m) return refuse(`unknown mount '${url.pathname.slice(0, 80)}'`);
    if (!creds || creds.user !== 'source') return refuse('no source credentials');
    const streamId = m[1]!;
    const granted = this.port.authorizePublish(streamId, creds.password);
    if (!granted.ok) return refuse(granted.reason);
    const want = granted.grant.codec;
    const sent = codecOfContentType(head.headers.get('content-type'));
    if (sent !== want) {
      const received = sent ?? (head.headers.get('content-type') || 'none').slice(0, 60);
      this.port.onError(streamId, { code: 'codec_mismatch', message: `The stream accepts ${want} audio but received ${received}.`, expected: want, received });
      this.log.warn('icecast source refused: codec mismatch', { remote, streamId, expected: want, received });
      socket.end(response('415 Unsupported Media Type', {}, `This stream takes ${want} audio.\n`));
      return;
    }
    this.startSource(socket, remote, streamId, creds.password, want, head, rest);
  }

  private startSource(socket: net.Socket, remote: string, streamId: string, key: string, codec: IcecastCodec, head: RequestHead, rest: Buffer): void {
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
      socket.end(response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }));
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

  /** Icecast's admin metadata call, as DJ software makes it (`mode=updinfo`). */
  private updinfo(socket: net.Socket, remote: string, head: RequestHead, url: URL): void {
    const reply = (status: string, body: string): void => {
      socket.end(response(status, { 'Content-Type': 'text/xml' }, body));
    };
    const m = STREAM_PATH.exec(url.searchParams.get('mount') ?? '');
    const creds = basicCredentials(head.headers.get('authorization'));
    if (!m || !creds) return void socket.end(response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }));
    const granted = this.port.authorizePublish(m[1]!, creds.password);
    if (!granted.ok) {
      this.log.warn('icecast metadata refused', { remote, reason: granted.reason });
      return void socket.end(response('401 Unauthorized', { 'WWW-Authenticate': 'Basic realm="Icecast2 Server"' }));
    }
    if (url.searchParams.get('mode') !== 'updinfo') return reply('400 Bad Request', xmlError('Only mode=updinfo is supported'));
    const song = url.searchParams.get('song');
    let title = url.searchParams.get('title');
    let artist = url.searchParams.get('artist');
    if (song && !title) {
      const dash = song.indexOf(' - ');
      if (dash > 0 && !artist) {
        artist = song.slice(0, dash);
        title = song.slice(dash + 3);
      } else title = song;
    }
    if (!title) return reply('400 Bad Request', xmlError('No song or title given'));
    this.publishing.nowPlaying(m[1]!, { title: title.slice(0, 256), artist: artist ? artist.slice(0, 256) : null });
    reply('200 OK', XML_OK);
  }
}

/** The value of a Vorbis comment `KEY=value` (key compared without case), or undefined. */
function tagValue(comments: string[], key: string): string | undefined {
  const prefix = `${key.toLowerCase()}=`;
  const c = comments.find((x) => x.slice(0, prefix.length).toLowerCase() === prefix);
  return c ? c.slice(prefix.length) : undefined;
}

