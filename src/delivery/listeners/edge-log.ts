/**
 * The edge log receiver (docs/edges.md): listeners behind caching nginx edges are counted from
 * the access log lines the edges send, because a shared blocking reload reaches the origin once
 * per edge, not once per listener.
 *
 * - UDP syslog (RFC 3164 framing, as nginx's `access_log syslog:server=…,tag=skylark` sends it:
 *   `<PRI>Mmm dd hh:mm:ss [host ]skylark: <message>`), one line per datagram. The message is the
 *   JSON object of the `skylark_edge` log format that `skylark edge-config` writes:
 *   `{"v":1,"k":"<edge-log secret>","t":<msec>,"s":<status>,"a":"<client address>","u":"<path>","sid":"<sid>","ua":"<user agent>","c":"<cache status>"}`.
 * - Only datagrams whose source address is in `SKYLARK_TRUSTED_PROXIES` are read; others are
 *   dropped and counted (`edge_log_untrusted`, src/base/limits/limits.ts).
 * - Only lines that carry the node's edge-log secret (`k`: `SKYLARK_EDGE_LOG_SECRET`, or derived
 *   from the node secret in the data dir, `edgeLogSecretOf`) count anyone: UDP source addresses
 *   are easy to spoof, so a datagram from a trusted address without the secret is dropped and
 *   counted (`edge_log_unsigned`). The secret is compared in constant time (SHA-256 digests,
 *   `timingSafeEqual`). `skylark edge-config --log-to` writes it into the edge's log format.
 * - A client address may start at most `SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE` sessions a minute,
 *   counted with the direct requests (`ListenerRegistry.admitHls`): a line over it counts nobody.
 * - A line of a media playlist (`/hls/<stream>/<layer>/index.m3u8`) answered 2xx/304, with a
 *   session id this node minted for that stream, touches or joins that session exactly as a
 *   direct request would: the country of the client address in the line, the user agent of the
 *   line, the layer's listener timeout. A listener whose requests come through an edge, straight
 *   to the origin, or both is one session (its sid), counted once. Token streams are never cached
 *   by an edge (every request reaches the origin and is counted there), so their lines, which
 *   carry no sid, are ignored.
 * - Bounded: a datagram over `MAX_DATAGRAM_BYTES` is dropped unread; a line costs one regex, one
 *   `JSON.parse` of ≤ 4 KiB, one SHA-256 of a ≤ 256-character secret and one registry touch (a
 *   join checks the sid's HMAC once); no state per sender. The kernel's socket buffer bounds what waits to be read.
 */
import dgram from 'node:dgram';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { isIP, type BlockList } from 'node:net';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import { countryOf, normalizeIp } from './geo.js';
import type { HlsListenerAccess } from './hls-access.js';
import { type ListenerRegistry, TooManyListenersError } from './registry.js';

/** Largest datagram read (bytes): a log line with a 256-character user agent fits 4 times over. */
export const MAX_DATAGRAM_BYTES = 4096;
/** How often a malformed-line warning may be logged (ms). */
const WARN_EVERY_MS = 60_000;

/** RFC 3164 header as nginx writes it (with or without a hostname), up to and including the tag `skylark: `. */
const FRAME = /^<\d{1,3}>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?:\S+ )?skylark: /;
/** A media playlist path: stream id and layer name. */
const MEDIA_PLAYLIST = /^\/hls\/([A-Za-z0-9_]{1,64})\/([A-Za-z0-9_-]{1,32})\/index\.m3u8$/;

/** What an edge-log secret may hold: it is written into nginx's `log_format` between quotes. */
export const EDGE_LOG_SECRET_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * The edge-log secret of a node that sets no `SKYLARK_EDGE_LOG_SECRET`: derived from the node
 * secret (`<dataDir>/secret.key`, made at first start), so the server and `skylark edge-config`
 * run on the same data dir agree on it without another file. 43 base64url characters
 * (HMAC-SHA-256, RFC 2104).
 */
export function edgeLogSecretOf(nodeSecret: Buffer): string {
  return createHmac('sha256', nodeSecret).update('skylark edge log secret v1').digest('base64url');
}

/** What became of one datagram. */
export type EdgeLogOutcome = 'untrusted' | 'unsigned' | 'malformed' | 'ignored' | 'touched' | 'joined' | 'refused';

/** Counts of outcomes since start. */
export type EdgeLogStats = Record<EdgeLogOutcome, number>;

export interface EdgeLogDeps {
  registry: ListenerRegistry;
  /** Stream policy (account, playback) and the sid check. */
  access: Pick<HlsListenerAccess, 'policy' | 'validSid'>;
  /** `SKYLARK_TRUSTED_PROXIES`: the edges allowed to send lines. */
  trusted: BlockList;
  /** The edge-log secret every line must carry (`k`; `EDGE_LOG_SECRET_PATTERN`). */
  secret: string;
  limits: Limits;
  log: Logger;
  /**
   * The inactivity timeout (ms: 3 target durations) of a listener of this stream's layer, or null
   * when the node serves no such layer (a line for it joins nobody).
   */
  layerTimeoutMs(streamId: string, layer: string): number | null;
  now?: () => number;
}

/** Receives edge log lines over UDP and counts the listeners they describe (see the module comment). */
export class EdgeLogReceiver {
  private socket: dgram.Socket | null = null;
  private readonly counts: EdgeLogStats = { untrusted: 0, unsigned: 0, malformed: 0, ignored: 0, touched: 0, joined: 0, refused: 0 };
  private warnedAt = -Infinity;
  private readonly now: () => number;
  /** SHA-256 of the secret: lines are compared digest to digest, in constant time. */
  private readonly secretDigest: Buffer;

  /** @throws Error when `d.secret` does not match `EDGE_LOG_SECRET_PATTERN` */
  constructor(private readonly d: EdgeLogDeps) {
    this.now = d.now ?? Date.now;
    if (!EDGE_LOG_SECRET_PATTERN.test(d.secret)) throw new Error('the edge-log secret must be 16-128 characters of A-Z a-z 0-9 _ -');
    this.secretDigest = createHash('sha256').update(d.secret).digest();
  }

  /**
   * Binds the UDP socket on `host`:`port` (0 = a free port). Resolves to the port bound.
   * @throws Error when the address cannot be bound
   */
  listen(host: string, port: number): Promise<number> {
    const socket = dgram.createSocket({ type: isIP(host) === 6 ? 'udp6' : 'udp4' });
    this.socket = socket;
    socket.on('message', (msg, rinfo) => {
      try {
        this.handle(msg, rinfo.address);
      } catch (e) {
        this.d.log.error('edge log line failed', { err: (e as Error).message });
      }
    });
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, host, () => {
        socket.off('error', reject);
        socket.on('error', (e) => this.d.log.warn('edge log socket error', { err: e.message }));
        resolve(socket.address().port);
      });
    });
  }

  /** Stops receiving. */
  close(): Promise<void> {
    const s = this.socket;
    this.socket = null;
    if (!s) return Promise.resolve();
    return new Promise((resolve) => s.close(() => resolve()));
  }

  /** Outcomes since start (tests, diagnostics). */
  stats(): EdgeLogStats {
    return { ...this.counts };
  }

  /** Reads one datagram from `from` (the sender's address). */
  handle(msg: Buffer, from: string): EdgeLogOutcome {
    const outcome = this.read(msg, from);
    this.counts[outcome]++;
    return outcome;
  }

  private read(msg: Buffer, from: string): EdgeLogOutcome {
    const sender = normalizeIp(from);
    if (sender === '' || !this.d.trusted.check(sender, isIP(sender) === 6 ? 'ipv6' : 'ipv4')) {
      this.d.limits.hit('edge_log_untrusted', sender, { setting: 'SKYLARK_TRUSTED_PROXIES' });
      return 'untrusted';
    }
    if (msg.length > MAX_DATAGRAM_BYTES) return this.malformed(sender, 'datagram too large');
    const text = msg.toString('utf8');
    const frame = FRAME.exec(text);
    if (!frame) return this.malformed(sender, 'not an RFC 3164 line tagged skylark');
    let line: unknown;
    try {
      line = JSON.parse(text.slice(frame[0].length));
    } catch {
      return this.malformed(sender, 'the message is not the skylark_edge JSON log format');
    }
    if (!this.signed(line)) {
      this.d.limits.hit('edge_log_unsigned', sender, { setting: 'SKYLARK_EDGE_LOG_SECRET' });
      return 'unsigned';
    }
    if (!isLine(line)) return this.malformed(sender, 'the message lacks a field of the skylark_edge log format');
    if (!((line.s >= 200 && line.s < 300) || line.s === 304) || line.sid === '') return 'ignored';
    const path = MEDIA_PLAYLIST.exec(line.u);
    if (!path) return 'ignored';
    const streamId = path[1]!;
    const { registry } = this.d;
    if (registry.touch(streamId, line.sid)) return 'touched';
    const pol = this.d.access.policy(streamId);
    if (!pol || pol.playback !== 'public' || !this.d.access.validSid(streamId, line.sid)) return 'ignored';
    const timeoutMs = this.d.layerTimeoutMs(streamId, path[2]!);
    if (timeoutMs === null) return 'ignored';
    if (!registry.admitHls(normalizeIp(line.a))) return 'refused';
    try {
      registry.join({
        streamId,
        accountId: pol.accountId,
        key: line.sid,
        protocol: 'hls',
        country: countryOf(normalizeIp(line.a)),
        userAgent: line.ua || null,
        timeoutMs,
      });
    } catch (e) {
      if (e instanceof TooManyListenersError) return 'refused';
      throw e;
    }
    return 'joined';
  }

  /** Whether the parsed line carries the edge-log secret (`k`), compared in constant time. */
  private signed(line: unknown): boolean {
    const k = typeof line === 'object' && line !== null ? (line as Record<string, unknown>).k : undefined;
    if (typeof k !== 'string' || k.length > 256) return false;
    return timingSafeEqual(createHash('sha256').update(k).digest(), this.secretDigest);
  }

  /** Counts a malformed line; warns about it at most once a minute (the edge's log format is likely wrong). */
  private malformed(sender: string, why: string): EdgeLogOutcome {
    const now = this.now();
    if (now - this.warnedAt >= WARN_EVERY_MS) {
      this.warnedAt = now;
      this.d.log.warn('edge log line not understood: is the edge running the config of `skylark edge-config`?', { from: sender, why });
    }
    return 'malformed';
  }
}

/** The fields of a `skylark_edge` line that the receiver reads. */
interface Line {
  s: number;
  a: string;
  u: string;
  sid: string;
  ua: string;
}

function isLine(v: unknown): v is Line {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return o.v === 1 && typeof o.s === 'number' && typeof o.a === 'string' && typeof o.u === 'string' && typeof o.sid === 'string' && o.sid.length <= 64 && typeof o.ua === 'string';
}
