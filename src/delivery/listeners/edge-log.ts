/**
 * The edge log receiver (docs/edges.md): listeners behind caching nginx edges are counted from
 * the access log lines the edges send, because a shared blocking reload reaches the origin once
 * per edge, not once per listener.
 *
 * - UDP syslog (RFC 3164 framing, as nginx's `access_log syslog:server=…,tag=skylark` sends it:
 *   `<PRI>Mmm dd hh:mm:ss [host ]skylark: <message>`), one line per datagram. The message is the
 *   JSON object of the `skylark_edge` log format that `skylark edge-config` writes:
 *   `{"v":2,"t":<msec>,"n":"<request id>","s":<status>,"a":"<client address>","u":"<path>","sid":"<sid>","ua":"<user agent>","c":"<cache status>","m":"<mac>"}`.
 * - Only datagrams whose source address is in `SKYLARK_TRUSTED_PROXIES` are read; others are
 *   dropped and counted (`edge_log_untrusted`, src/base/limits/limits.ts).
 * - Each line is authenticated on its own (docs/behaviour.md §13): `m` is the hex HMAC-SHA-256
 *   (RFC 2104) under the node's edge-log secret (`SKYLARK_EDGE_LOG_SECRET`, or derived from the
 *   node secret in the data dir, `edgeLogSecretOf`) of the line's fields and its time
 *   (`edgeLineMac`), which the edge computes per line (nginx's perl module, as `skylark
 *   edge-config --log-to` writes it). The secret never travels. UDP source addresses are easy to
 *   spoof, so a line without a valid MAC is dropped and counted (`edge_log_unsigned`, compared in
 *   constant time); a line whose time `t` is more than 60 s old (or 10 s ahead) is dropped
 *   (`stale`); a line seen before (its MAC, kept for `FRESH_MS + AHEAD_MS` in a bounded table,
 *   src/delivery/listeners/replay-cache.ts) is dropped (`replayed`): a captured line can be
 *   neither altered nor replayed.
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
 *   `JSON.parse` of ≤ 4 KiB, one HMAC of ≤ 4 KiB, a replay-table lookup and one registry touch (a
 *   join checks the sid's HMAC once); no state per sender; the replay table is allocated once
 *   (2 × 16 MiB) and a line arriving while it is full is dropped (`refused`). The kernel's socket
 *   buffer bounds what waits to be read.
 */
import dgram from 'node:dgram';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isIP, type BlockList } from 'node:net';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import { normalizeIp } from '../../base/http/client-address.js';
import { countryOf } from '../../base/geo.js';
import type { HlsListenerAccess } from './hls-access.js';
import type { ListenerRegistry } from './registry.js';
import { TooManyListenersError } from './session.js';
import { ReplayCache } from './replay-cache.js';

/** Largest datagram read (bytes): a log line with a 256-character user agent fits 4 times over. */
export const MAX_DATAGRAM_BYTES = 4096;
/** A line whose time is older than this (ms) is dropped (docs/behaviour.md §13). */
export const FRESH_MS = 60_000;
/** A line whose time is this far (ms) ahead of the node's clock is dropped too (the edge's clock is wrong). */
export const AHEAD_MS = 10_000;
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

/**
 * The MAC of one edge log line (lowercase hex HMAC-SHA-256 under the edge-log secret, RFC 2104):
 * of `skylark-edge-v2` and the fields `t` (the time, nginx's `$msec` text), `n` (`$request_id`),
 * `s`, `a`, `u`, `sid`, `ua`, `c`, joined by newlines, as UTF-8. The edge's perl computes the same
 * (src/cli/edge-config.ts).
 */
export function edgeLineMac(secret: string, f: { t: string; n: string; s: string; a: string; u: string; sid: string; ua: string; c: string }): Buffer {
  return createHmac('sha256', secret).update(['skylark-edge-v2', f.t, f.n, f.s, f.a, f.u, f.sid, f.ua, f.c].join('\n')).digest();
}

/** What became of one datagram. */
export type EdgeLogOutcome = 'untrusted' | 'unsigned' | 'stale' | 'replayed' | 'malformed' | 'ignored' | 'touched' | 'joined' | 'refused';

/** Counts of outcomes since start. */
export type EdgeLogStats = Record<EdgeLogOutcome, number>;

export interface EdgeLogDeps {
  registry: ListenerRegistry;
  /** Stream policy (account, playback) and the sid check. */
  access: Pick<HlsListenerAccess, 'policy' | 'validSid'>;
  /** `SKYLARK_TRUSTED_PROXIES`: the edges allowed to send lines. */
  trusted: BlockList;
  /** The edge-log secret every line's MAC is made with (`EDGE_LOG_SECRET_PATTERN`). */
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
  private readonly counts: EdgeLogStats = { untrusted: 0, unsigned: 0, stale: 0, replayed: 0, malformed: 0, ignored: 0, touched: 0, joined: 0, refused: 0 };
  private warnedAt = -Infinity;
  private readonly now: () => number;
  /** The MACs of the lines accepted lately (a line is remembered for at least `FRESH_MS + AHEAD_MS`). */
  private readonly seen = new ReplayCache(FRESH_MS + AHEAD_MS);
  private fullWarnedAt = -Infinity;

  /** @throws Error when `d.secret` does not match `EDGE_LOG_SECRET_PATTERN` */
  constructor(private readonly d: EdgeLogDeps) {
    this.now = d.now ?? Date.now;
    if (!EDGE_LOG_SECRET_PATTERN.test(d.secret)) throw new Error('the edge-log secret must be 16-128 characters of A-Z a-z 0-9 _ -');
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
    const checked = this.authentic(line, text.slice(frame[0].length), sender);
    if (checked !== null) return checked;
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

  /**
   * Null when `line` carries a valid MAC of its fields, is fresh and was not seen before (it is
   * then remembered); else what became of it.
   */
  private authentic(line: unknown, json: string, sender: string): EdgeLogOutcome | null {
    const o = typeof line === 'object' && line !== null ? (line as Record<string, unknown>) : {};
    const m = o.m;
    const t = /"t":(\d{1,12}(?:\.\d{1,3})?),/.exec(json)?.[1]; // the time as the edge wrote it, not as a JS number prints
    const fields = [o.n, o.s, o.a, o.u, o.sid, o.ua, o.c];
    if (o.v !== 2 || typeof m !== 'string' || m.length !== 64 || t === undefined || !fields.every((x) => typeof x === 'string' || typeof x === 'number')) {
      this.d.limits.hit('edge_log_unsigned', sender, { setting: 'SKYLARK_EDGE_LOG_SECRET' });
      return 'unsigned';
    }
    const [n, s, a, u, sid, ua, c] = fields.map(String) as [string, string, string, string, string, string, string];
    const mac = edgeLineMac(this.d.secret, { t, n, s, a, u, sid, ua, c });
    const given = Buffer.from(m, 'hex');
    if (given.length !== mac.length || !timingSafeEqual(given, mac)) {
      this.d.limits.hit('edge_log_unsigned', sender, { setting: 'SKYLARK_EDGE_LOG_SECRET' });
      return 'unsigned';
    }
    const now = this.now();
    const at = Number(t) * 1000;
    if (!(at >= now - FRESH_MS && at <= now + AHEAD_MS)) return 'stale';
    const r = this.seen.add(mac, now);
    if (r === 'seen') return 'replayed';
    if (r === 'full') {
      if (now - this.fullWarnedAt >= WARN_EVERY_MS) {
        this.fullWarnedAt = now;
        this.d.log.warn('edge log: more lines a minute than the replay table holds; lines dropped', { capacity: this.seen.capacity });
      }
      return 'refused';
    }
    return null;
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
  return o.v === 2 && typeof o.s === 'number' && typeof o.a === 'string' && typeof o.u === 'string' && typeof o.sid === 'string' && o.sid.length <= 64 && typeof o.ua === 'string';
}
