/**
 * Configuration (docs/behaviour.md §1, §9): environment variables `SKYLARK_*`, overridden by flags of the
 * same name in kebab case (`--http-port 0`), validated with valibot. Public URLs default to the
 * addresses actually bound (resolved after listening; see `resolvePublicUrls`).
 */
import * as v from 'valibot';
import path from 'node:path';
import { availableParallelism } from 'node:os';
import { trustedProxies } from './http/client-address.js';

/** Validated configuration. Ports are numbers (0 = pick a free port); durations in ms unless named. */
export interface Config {
  httpHost: string;
  httpPort: number;
  rtmpHost: string;
  rtmpPort: number;
  /** The Icecast source ingest listener (docs/behaviour.md §10). */
  icecastHost: string;
  icecastPort: number;
  dataDir: string;
  baseUrl?: string | undefined;
  authUrl?: string | undefined;
  ingestUrl?: string | undefined;
  /** `host[:port]` of the Icecast ingest in `http://{icecast_url}/live/…`. */
  icecastUrl?: string | undefined;
  cdnUrl?: string | undefined;
  webhooksAllowPrivate: boolean;
  trustedProxies: string[];
  /**
   * The edge log receiver (docs/behaviour.md §12): UDP syslog lines from nginx edges, accepted only from
   * `trustedProxies`. Both set (either setting turns it on; the other takes its default,
   * 127.0.0.1 / 5514), or both undefined (off). Port 0 = a free port.
   */
  edgeLogHost?: string | undefined;
  edgeLogPort?: number | undefined;
  /**
   * The secret every edge log line must carry (`SKYLARK_EDGE_LOG_SECRET`, 16-128 characters of
   * A-Z a-z 0-9 _ -); undefined: derived from the node secret in the data dir (src/delivery/listeners/edge-log.ts).
   */
  edgeLogSecret?: string | undefined;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** HLS segment target duration (ms). */
  segmentDurationMs: number;
  /** LL-HLS part target (ms) for fMP4 layers; 0 = classic HLS only. */
  partDurationMs: number;
  /** Whether streams get the ABR ladder's encoded layers (an FFmpeg codec process per live stream). */
  abrLadder: boolean;
  /** The HTTP/1.0 front (docs/http.md "HTTP/1.0"): HTTP/1.0 requests answered like HTTP/1.1 ones; off, they are closed unanswered. */
  http10: boolean;
  /**
   * LL-HLS parts of public streams answered by the native HTTP front without JavaScript per request
   * (docs/http.md "Media objects answered in native code"); needs the HTTP/1.0 front's hooks (`http10`).
   */
  hlsNativeParts: boolean;
  /**
   * LL-HLS blocking playlist reloads of public streams held and answered by the native HTTP front
   * (docs/http.md "Blocking reloads held in native code"); needs `hlsNativeParts`.
   */
  hlsNativeReloads: boolean;
  /**
   * A busy HTTP thread goes to wait for its connections at most once per this many µs (docs/http.md
   * "Fewer wake-ups under load"); 0 = as often as the loop likes. Needs the HTTP front's hooks (`http10`).
   */
  httpWakeIntervalUs: number;
  /** …only while at least this many HTTP connections are open (the front's count). */
  httpWakeMinConnections: number;
  /**
   * A WHIP publisher's RTP read, decrypted, ordered and segmented in native code once its peer is
   * connected (docs/behaviour.md "Go live over WHIP"); false keeps the JavaScript receive path.
   */
  whipNativeReceive: boolean;
  /** With the native receive: the publisher's SRTCP read and the receiver reports sent natively, and its consent checks answered without werift (docs/decisions.md "WHIP receive in native code"). */
  whipNativeRtcp: boolean;
  /**
   * Merged ingest reads (ms): a live publisher's socket is read every this often instead of on
   * every message while no LL-HLS part or segment is about to close (0 = read as bytes arrive).
   */
  ingestMergeMs: number;
  /** Segments kept in the live window. */
  liveWindowSegments: number;
  /** Largest JSON body accepted (bytes). */
  maxJsonBodyBytes: number;
  /** Largest episode audio upload accepted (bytes; default 500 MB). */
  maxUploadBytes: number;
  /** Podcast download counting (docs/podcasts.md "Download counting"); `SKYLARK_DOWNLOAD_COUNTING=0` turns it off. */
  downloadCounting: boolean;
  /**
   * Threads serving HTTP, the main thread included (docs/scaling.md): each runs its own uWS App on
   * the same host:port and the kernel spreads connections over them. Worker threads serve HLS and
   * progressive listening themselves and forward every other request to the main thread. 1 = the
   * main thread alone. Default: the number of cores (`os.availableParallelism()`).
   */
  httpThreads: number;
  /**
   * V8's young generation (docs/configuration.md `SKYLARK_YOUNG_GENERATION`; docs/benchmarks.md
   * "Where a listener's memory goes"): `small` keeps its semi-spaces at 1 MB (the main thread: V8's
   * semi-space growth factor 1, set by bin/skylark.js before the server loads, which holds in most
   * runs, node's `--max-semi-space-size=1` always; HTTP worker threads: a hard maximum,
   * `resourceLimits.maxYoungGenerationSizeMb`), `v8` lets them grow to V8's default maximum (16 MB).
   */
  youngGeneration: 'small' | 'v8';
  /**
   * STUN/TURN servers WebRTC (WHEP) may use (docs/listeners.md "WebRTC"), from
   * `SKYLARK_ICE_SERVERS`: empty by default, so no outside address is contacted.
   */
  iceServers: IceServer[];
  /** The WebSub hub named in every feed and pinged on every feed change (`SKYLARK_WEBSUB_HUB`; docs/podcasts.md "Feed-update notifications"). */
  websubHub?: string | undefined;
  /** Podping-style notifiers called on publish, live and live end (`SKYLARK_FEED_NOTIFY_URLS`). */
  feedNotifyUrls: FeedNotifyUrl[];
  /** `GET /metrics` from outside loopback needs `Authorization: Bearer <token>` (`SKYLARK_METRICS_TOKEN`, docs/metrics.md); undefined: loopback only. */
  metricsToken?: string | undefined;
  /** Streams with their own `stream` label in `GET /metrics` (`SKYLARK_METRICS_MAX_STREAMS`); the rest are summed as `stream="other"`. */
  metricsMaxStreams: number;
  /** Limits that protect the node (docs/behaviour.md §13); each is logged and counted when hit (src/limits). */
  limits: LimitSettings;
}

/** One ICE server as RTCPeerConnection takes it (W3C WebRTC `RTCIceServer`). */
export interface IceServer {
  /** `stun:host:port` or `turn:host:port`. */
  urls: string;
  username?: string;
  credential?: string;
}

/**
 * Parses `SKYLARK_ICE_SERVERS`: comma-separated `stun:host[:port]` and `turn:user:pass@host[:port]`
 * (host a name, an IPv4 address or a bracketed IPv6 one; port 1–65535, default 3478). Empty → [].
 * @throws ConfigError naming the entry that is not one of these forms
 */
export function parseIceServers(text: string): IceServer[] {
  const out: IceServer[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const m = /^(stun|turn):(?:([^:@\s]+):([^@\s]+)@)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/.exec(entry);
    const port = m?.[5] === undefined ? 3478 : Number(m[5]);
    if (!m || port < 1 || port > 65535 || (m[1] === 'turn') !== (m[2] !== undefined)) {
      throw new ConfigError(`invalid SKYLARK_ICE_SERVERS / --ice-servers: '${entry.replace(/:[^:@]*@/, ':***@')}' is not stun:host[:port] or turn:user:pass@host[:port]`);
    }
    const urls = `${m[1]}:${m[4]}:${port}`;
    out.push(m[1] === 'turn' ? { urls, username: decodeURIComponent(m[2]!), credential: decodeURIComponent(m[3]!) } : { urls });
  }
  return out;
}

/**
 * Parses `SKYLARK_TRUSTED_PROXIES`: comma-separated CIDRs or bare addresses (blank entries are
 * skipped), each checked by the one parser of the node (src/base/http/client-address.ts).
 * @throws ConfigError naming the first entry that is not an IP address or CIDR
 */
export function parseTrustedProxyList(text: string): string[] {
  const list = text.split(',').map((s) => s.trim()).filter(Boolean);
  try {
    trustedProxies(list);
  } catch (e) {
    throw new ConfigError(`invalid SKYLARK_TRUSTED_PROXIES / --trusted-proxies: ${(e as Error).message}`);
  }
  return list;
}

/** One entry of `SKYLARK_FEED_NOTIFY_URLS`: the URL called and the bearer token sent with it, if any. */
export interface FeedNotifyUrl {
  url: string;
  token?: string;
}

/**
 * Parses `SKYLARK_FEED_NOTIFY_URLS`: comma-separated entries, each an http(s) URL optionally
 * followed by `|` and a bearer token (RFC 6750 token characters: A-Z a-z 0-9 - . _ ~ + / and
 * trailing =), e.g. `https://podping.example/?medium=podcast|s3cret,https://other.example/ping`.
 * Empty → [].
 * @throws ConfigError naming the entry (its token masked) that is not of this form
 */
export function parseFeedNotifyUrls(text: string): FeedNotifyUrl[] {
  const out: FeedNotifyUrl[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const bar = entry.indexOf('|');
    const url = bar < 0 ? entry : entry.slice(0, bar);
    const token = bar < 0 ? undefined : entry.slice(bar + 1);
    let ok = /^https?:\/\/[^\s|]+$/.test(url) && (token === undefined || /^[A-Za-z0-9\-._~+/]+=*$/.test(token));
    if (ok) {
      try {
        const u = new URL(url);
        ok = u.username === '' && u.password === '' && u.hash === '';
      } catch {
        ok = false;
      }
    }
    if (!ok) throw new ConfigError(`invalid SKYLARK_FEED_NOTIFY_URLS / --feed-notify-urls: '${url}${token === undefined ? '' : '|***'}' is not <http(s) URL> or <http(s) URL>|<bearer token>`);
    out.push(token === undefined ? { url } : { url, token });
  }
  return out;
}

/**
 * Caps on what a client can make the node hold (docs/behaviour.md §13). Every field has an environment
 * variable and a flag (`LIMIT_ENV_NAMES`); hitting a cap is logged once per cause per minute and
 * counted (src/base/limits/limits.ts). Bytes, ms and counts as named.
 */
export interface LimitSettings {
  /** RTMP connections open at once, in total. */
  rtmpMaxConnections: number;
  /** RTMP connections open at once from one IP address. */
  rtmpMaxConnectionsPerIp: number;
  /** A connection must be publishing this long after it was accepted (absolute; ms). */
  rtmpPublishTimeoutMs: number;
  /** Bytes a connection may make the server buffer before it publishes. */
  rtmpPrePublishBytes: number;
  /** Largest audio frame accepted (bytes), per message, any codec (AAC also ≤ 8184: what ADTS carries). */
  maxAudioFrameBytes: number;
  /** A segment may hold at most this many times the bytes of its nominal bitrate × duration. */
  segmentBytesFactor: number;
  /** WHEP offers answered but not yet connected, in total. */
  whepMaxPending: number;
  /** WHEP offers answered but not yet connected, per client IP address. */
  whepMaxPendingPerIp: number;
  /** An answered WHEP offer that has not connected after this long is dropped (ms). */
  whepOfferTimeoutMs: number;
  /** HTTP requests held open at once (blocking playlist reloads, part waits, progressive listeners). */
  httpMaxHeld: number;
  /** HTTP requests held open at once per client IP address. */
  httpMaxHeldPerIp: number;
  /** Icecast source connections open at once, in total. */
  icecastMaxConnections: number;
  /** Icecast source connections open at once from one IP address. */
  icecastMaxConnectionsPerIp: number;
  /** Progressive (Icecast-style) listening connections open at once, in total. */
  listenMaxConnections: number;
  /** Progressive listening connections open at once per client IP address. */
  listenMaxConnectionsPerIp: number;
  /** An HTTP/1.0 request head must be complete this long after its first byte (ms; src/base/http/http10.ts). */
  http10HeadTimeoutMs: number;
  /** An idle kept-alive HTTP/1.0 connection is closed after this long (ms). */
  http10IdleTimeoutMs: number;
  /** Kernel send buffer of a progressive listening connection (bytes; 0 = the kernel's own sizing), so "10 s behind" is measured on what was sent. */
  listenSendBufferBytes: number;
  /** New HLS listener sessions (minted session ids) counted per client IP address (IPv6: /64) per minute. */
  hlsSessionsPerIpPerMinute: number;
  /** Uploads and recordings stop before the data volume's free space falls under this (bytes). */
  minFreeDiskBytes: number;
  /** A graceful stop (SIGTERM) that takes longer than this exits anyway (ms). */
  shutdownTimeoutMs: number;
  /** Title changes per stream: at most one per this long (ms); more coalesce into the newest (0 = no cap). */
  nowPlayingMinIntervalMs: number;
  /** FFmpeg processes measuring or normalising episode loudness at once (docs/podcasts.md "Loudness"). */
  loudnessConcurrency: number;
  /** A publish request waits this long for the episode's loudness work before it answers `processing` (ms; 0 = not at all): docs/podcasts.md "Publishing while the audio is processed". */
  publishWaitMs: number;
  /** Podcast download clients (client × episode) tracked per UTC day, shared fairly per podcast (docs/podcasts.md "Download counting"). */
  downloadClientsPerDay: number;
}

/** Environment variable of each limit (flags: the field name in kebab case, e.g. `--rtmp-max-connections`). */
export const LIMIT_ENV_NAMES = {
  rtmpMaxConnections: 'SKYLARK_RTMP_MAX_CONNECTIONS',
  rtmpMaxConnectionsPerIp: 'SKYLARK_RTMP_MAX_CONNECTIONS_PER_IP',
  rtmpPublishTimeoutMs: 'SKYLARK_RTMP_PUBLISH_TIMEOUT_MS',
  rtmpPrePublishBytes: 'SKYLARK_RTMP_PREPUBLISH_BYTES',
  maxAudioFrameBytes: 'SKYLARK_MAX_AUDIO_FRAME_BYTES',
  segmentBytesFactor: 'SKYLARK_SEGMENT_BYTES_FACTOR',
  whepMaxPending: 'SKYLARK_WHEP_MAX_PENDING',
  whepMaxPendingPerIp: 'SKYLARK_WHEP_MAX_PENDING_PER_IP',
  whepOfferTimeoutMs: 'SKYLARK_WHEP_OFFER_TIMEOUT_MS',
  httpMaxHeld: 'SKYLARK_HTTP_MAX_HELD',
  httpMaxHeldPerIp: 'SKYLARK_HTTP_MAX_HELD_PER_IP',
  icecastMaxConnections: 'SKYLARK_ICECAST_MAX_CONNECTIONS',
  icecastMaxConnectionsPerIp: 'SKYLARK_ICECAST_MAX_CONNECTIONS_PER_IP',
  listenMaxConnections: 'SKYLARK_LISTEN_MAX_CONNECTIONS',
  listenMaxConnectionsPerIp: 'SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP',
  http10HeadTimeoutMs: 'SKYLARK_HTTP10_HEAD_TIMEOUT_MS',
  http10IdleTimeoutMs: 'SKYLARK_HTTP10_IDLE_TIMEOUT_MS',
  listenSendBufferBytes: 'SKYLARK_LISTEN_SEND_BUFFER_BYTES',
  hlsSessionsPerIpPerMinute: 'SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE',
  minFreeDiskBytes: 'SKYLARK_MIN_FREE_DISK_BYTES',
  shutdownTimeoutMs: 'SKYLARK_SHUTDOWN_TIMEOUT_MS',
  nowPlayingMinIntervalMs: 'SKYLARK_NOW_PLAYING_MIN_INTERVAL_MS',
  loudnessConcurrency: 'SKYLARK_LOUDNESS_CONCURRENCY',
  publishWaitMs: 'SKYLARK_PUBLISH_WAIT_MS',
  downloadClientsPerDay: 'SKYLARK_DOWNLOAD_CLIENTS_PER_DAY',
} as const satisfies Record<keyof LimitSettings, string>;

/** Defaults of the limits: sized for one box serving thousands of listeners and tens of publishers. */
export const LIMIT_DEFAULTS: LimitSettings = {
  rtmpMaxConnections: 1000,
  rtmpMaxConnectionsPerIp: 10,
  rtmpPublishTimeoutMs: 15_000,
  rtmpPrePublishBytes: 64 * 1024,
  maxAudioFrameBytes: 8192,
  segmentBytesFactor: 8,
  whepMaxPending: 200,
  whepMaxPendingPerIp: 8,
  whepOfferTimeoutMs: 10_000,
  httpMaxHeld: 50_000,
  httpMaxHeldPerIp: 200,
  icecastMaxConnections: 200,
  icecastMaxConnectionsPerIp: 10,
  listenMaxConnections: 20_000,
  listenMaxConnectionsPerIp: 100,
  http10HeadTimeoutMs: 10_000,
  http10IdleTimeoutMs: 60_000,
  listenSendBufferBytes: 256 * 1024,
  hlsSessionsPerIpPerMinute: 60,
  minFreeDiskBytes: 256 * 1024 * 1024,
  shutdownTimeoutMs: 10_000,
  nowPlayingMinIntervalMs: 2000,
  loudnessConcurrency: 1,
  publishWaitMs: 10_000,
  downloadClientsPerDay: 500_000,
};

/** Smallest value of each limit that still lets the node work (a lower setting is refused). */
const LIMIT_MINIMUMS: LimitSettings = {
  rtmpMaxConnections: 1,
  rtmpMaxConnectionsPerIp: 1,
  rtmpPublishTimeoutMs: 1000,
  rtmpPrePublishBytes: 4096,
  maxAudioFrameBytes: 1024,
  segmentBytesFactor: 2,
  whepMaxPending: 1,
  whepMaxPendingPerIp: 1,
  whepOfferTimeoutMs: 1000,
  httpMaxHeld: 1,
  httpMaxHeldPerIp: 1,
  icecastMaxConnections: 1,
  icecastMaxConnectionsPerIp: 1,
  listenMaxConnections: 1,
  listenMaxConnectionsPerIp: 1,
  http10HeadTimeoutMs: 1000,
  http10IdleTimeoutMs: 1000,
  listenSendBufferBytes: 0,
  hlsSessionsPerIpPerMinute: 1,
  minFreeDiskBytes: 0,
  shutdownTimeoutMs: 1000,
  nowPlayingMinIntervalMs: 0,
  loudnessConcurrency: 1,
  publishWaitMs: 0,
  downloadClientsPerDay: 1,
};

/** The names that docs/behaviour.md §1 makes a contract, with their defaults. */
export const ENV_NAMES = {
  httpHost: 'SKYLARK_HTTP_HOST',
  httpPort: 'SKYLARK_HTTP_PORT',
  rtmpHost: 'SKYLARK_RTMP_HOST',
  rtmpPort: 'SKYLARK_RTMP_PORT',
  icecastHost: 'SKYLARK_ICECAST_HOST',
  icecastPort: 'SKYLARK_ICECAST_PORT',
  dataDir: 'SKYLARK_DATA_DIR',
  baseUrl: 'SKYLARK_BASE_URL',
  authUrl: 'SKYLARK_AUTH_URL',
  ingestUrl: 'SKYLARK_INGEST_URL',
  icecastUrl: 'SKYLARK_ICECAST_URL',
  cdnUrl: 'SKYLARK_CDN_URL',
  webhooksAllowPrivate: 'SKYLARK_WEBHOOKS_ALLOW_PRIVATE',
  trustedProxies: 'SKYLARK_TRUSTED_PROXIES',
  edgeLogHost: 'SKYLARK_EDGE_LOG_HOST',
  edgeLogPort: 'SKYLARK_EDGE_LOG_PORT',
  edgeLogSecret: 'SKYLARK_EDGE_LOG_SECRET',
  logLevel: 'SKYLARK_LOG_LEVEL',
  segmentDurationMs: 'SKYLARK_SEGMENT_DURATION_MS',
  partDurationMs: 'SKYLARK_PART_DURATION_MS',
  abrLadder: 'SKYLARK_ABR_LADDER',
  http10: 'SKYLARK_HTTP10',
  hlsNativeParts: 'SKYLARK_HLS_NATIVE_PARTS',
  hlsNativeReloads: 'SKYLARK_HLS_NATIVE_RELOADS',
  httpWakeIntervalUs: 'SKYLARK_HTTP_WAKE_INTERVAL_US',
  httpWakeMinConnections: 'SKYLARK_HTTP_WAKE_MIN_CONNECTIONS',
  whipNativeReceive: 'SKYLARK_WHIP_NATIVE_RECEIVE',
  whipNativeRtcp: 'SKYLARK_WHIP_NATIVE_RTCP',
  ingestMergeMs: 'SKYLARK_INGEST_MERGE_MS',
  liveWindowSegments: 'SKYLARK_LIVE_WINDOW_SEGMENTS',
  maxUploadBytes: 'SKYLARK_MAX_UPLOAD_BYTES',
  downloadCounting: 'SKYLARK_DOWNLOAD_COUNTING',
  httpThreads: 'SKYLARK_HTTP_THREADS',
  youngGeneration: 'SKYLARK_YOUNG_GENERATION',
  iceServers: 'SKYLARK_ICE_SERVERS',
  websubHub: 'SKYLARK_WEBSUB_HUB',
  feedNotifyUrls: 'SKYLARK_FEED_NOTIFY_URLS',
  metricsToken: 'SKYLARK_METRICS_TOKEN',
  metricsMaxStreams: 'SKYLARK_METRICS_MAX_STREAMS',
} as const satisfies Partial<Record<keyof Config, string>>;

const port = v.pipe(v.string(), v.regex(/^\d{1,5}$/, 'must be a port number 0-65535'), v.transform(Number), v.maxValue(65535));
const httpUrl = v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s):// URL'), v.transform((s) => s.replace(/\/+$/, '')));

const RawConfig = v.object({
  httpHost: v.optional(v.pipe(v.string(), v.minLength(1)), '127.0.0.1'),
  httpPort: v.optional(port, '8080'),
  rtmpHost: v.optional(v.pipe(v.string(), v.minLength(1)), '127.0.0.1'),
  rtmpPort: v.optional(port, '1935'),
  icecastHost: v.optional(v.pipe(v.string(), v.minLength(1)), '127.0.0.1'),
  icecastPort: v.optional(port, '8000'),
  dataDir: v.optional(v.pipe(v.string(), v.minLength(1)), './data'),
  baseUrl: v.optional(httpUrl),
  authUrl: v.optional(httpUrl),
  ingestUrl: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9.\-[\]:]+$/, 'must be host[:port]'))),
  icecastUrl: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9.\-[\]:]+$/, 'must be host[:port]'))),
  cdnUrl: v.optional(httpUrl),
  webhooksAllowPrivate: v.optional(v.picklist(['0', '1', 'true', 'false']), '0'),
  trustedProxies: v.optional(v.string(), ''),
  edgeLogHost: v.optional(v.pipe(v.string(), v.minLength(1))),
  edgeLogPort: v.optional(port),
  edgeLogSecret: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{16,128}$/, 'must be 16-128 characters of A-Z a-z 0-9 _ -'))),
  logLevel: v.optional(v.picklist(['debug', 'info', 'warn', 'error']), 'info'),
  segmentDurationMs: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.minValue(500), v.maxValue(10000)), '2000'),
  partDurationMs: v.optional(
    v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.check((n) => n === 0 || (n >= 100 && n <= 2000), 'must be 0 or 100-2000')),
    '500',
  ),
  abrLadder: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  http10: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  hlsNativeParts: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  hlsNativeReloads: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  httpWakeIntervalUs: v.optional(v.pipe(v.string(), v.regex(/^\d{1,6}$/, 'must be 0-100000 (µs)'), v.transform(Number), v.maxValue(100_000)), '1000'),
  httpWakeMinConnections: v.optional(v.pipe(v.string(), v.regex(/^\d{1,9}$/, 'must be a number of connections'), v.transform(Number)), '256'),
  whipNativeReceive: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  whipNativeRtcp: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  ingestMergeMs: v.optional(v.pipe(v.string(), v.regex(/^\d+$/, 'must be 0-200 (ms)'), v.transform(Number), v.maxValue(200)), '100'),
  liveWindowSegments: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.minValue(3), v.maxValue(100)), '6'),
  maxUploadBytes: v.optional(v.pipe(v.string(), v.regex(/^\d{1,15}$/, 'must be a positive integer of bytes'), v.transform(Number), v.minValue(1)), '500000000'),
  downloadCounting: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  httpThreads: v.optional(v.pipe(v.string(), v.regex(/^\d{1,3}$/, 'must be a number of threads 1-256'), v.transform(Number), v.minValue(1), v.maxValue(256))),
  youngGeneration: v.optional(v.picklist(['small', 'v8']), 'small'),
  iceServers: v.optional(v.string(), ''),
  websubHub: v.optional(v.pipe(v.string(), v.url('must be a URL'), v.regex(/^https?:\/\//, 'must be an http(s):// URL'))),
  feedNotifyUrls: v.optional(v.string(), ''),
  metricsToken: v.optional(v.pipe(v.string(), v.regex(/^[\x21-\x7e]{16,256}$/, 'must be 16-256 printable ASCII characters without spaces'))),
  metricsMaxStreams: v.optional(v.pipe(v.string(), v.regex(/^\d{1,5}$/, 'must be a number of streams 1-10000'), v.transform(Number), v.minValue(1), v.maxValue(10000)), '100'),
});

/** The edge log receiver's address when only one of its two settings is given. */
export const EDGE_LOG_DEFAULTS = { host: '127.0.0.1', port: 5514 } as const;

/** One limit's value: a non-negative integer, at least `min`. */
const limitValue = (min: number) =>
  v.pipe(v.string(), v.regex(/^\d{1,15}$/, 'must be a non-negative integer'), v.transform(Number), v.minValue(min, `must be at least ${min}`));

/** Every setting's environment variable, by field name (docs/behaviour.md §1 names, then the limits of §13). */
export const ALL_ENV_NAMES: Record<string, string> = { ...ENV_NAMES, ...LIMIT_ENV_NAMES };

/** `rtmpPort` → `rtmp-port`. */
const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Thrown when configuration is invalid; the message names the variable or flag. */
export class ConfigError extends Error {}

/**
 * Builds the configuration from `env` and `flags` (flags win). Flags are the kebab-case names
 * (`http-port`) already parsed into strings.
 * @throws ConfigError naming the offending setting.
 */
export function loadConfig(env: NodeJS.ProcessEnv, flags: Record<string, string | undefined> = {}): Config {
  const gather = (names: Record<string, string>) => {
    const raw: Record<string, string> = {};
    for (const [key, envName] of Object.entries(names)) {
      const value = flags[kebab(key)] ?? env[envName];
      if (value !== undefined && value !== '') raw[key] = value;
    }
    return raw;
  };
  const fail = (issues: [v.BaseIssue<unknown>, ...v.BaseIssue<unknown>[]]): never => {
    const issue = issues[0];
    const key = issue.path?.[0]?.key as string | undefined;
    const name = key ? `${ALL_ENV_NAMES[key]} / --${kebab(key)}` : 'configuration';
    throw new ConfigError(`invalid ${name}: ${issue.message}`);
  };
  const res = v.safeParse(RawConfig, gather(ENV_NAMES));
  if (!res.success) return fail(res.issues);
  const limits = { ...LIMIT_DEFAULTS };
  for (const [key, value] of Object.entries(gather(LIMIT_ENV_NAMES)) as Array<[keyof LimitSettings, string]>) {
    const r = v.safeParse(limitValue(LIMIT_MINIMUMS[key]), value);
    if (!r.success) throw new ConfigError(`invalid ${LIMIT_ENV_NAMES[key]} / --${kebab(key)}: ${r.issues[0].message}`);
    limits[key] = r.output;
  }
  const o = res.output;
  const edgeLog = o.edgeLogHost !== undefined || o.edgeLogPort !== undefined;
  return {
    limits,
    ...o,
    dataDir: path.resolve(o.dataDir),
    webhooksAllowPrivate: o.webhooksAllowPrivate === '1' || o.webhooksAllowPrivate === 'true',
    abrLadder: o.abrLadder === '1' || o.abrLadder === 'true',
    http10: o.http10 === '1' || o.http10 === 'true',
    hlsNativeParts: o.hlsNativeParts === '1' || o.hlsNativeParts === 'true',
    hlsNativeReloads: o.hlsNativeReloads === '1' || o.hlsNativeReloads === 'true',
    whipNativeReceive: o.whipNativeReceive === '1' || o.whipNativeReceive === 'true',
    whipNativeRtcp: o.whipNativeRtcp === '1' || o.whipNativeRtcp === 'true',
    downloadCounting: o.downloadCounting === '1' || o.downloadCounting === 'true',
    trustedProxies: parseTrustedProxyList(o.trustedProxies),
    edgeLogHost: edgeLog ? (o.edgeLogHost ?? EDGE_LOG_DEFAULTS.host) : undefined,
    edgeLogPort: edgeLog ? (o.edgeLogPort ?? EDGE_LOG_DEFAULTS.port) : undefined,
    maxJsonBodyBytes: 1024 * 1024,
    httpThreads: o.httpThreads ?? Math.min(256, Math.max(1, availableParallelism())),
    youngGeneration: o.youngGeneration,
    iceServers: parseIceServers(o.iceServers),
    feedNotifyUrls: parseFeedNotifyUrls(o.feedNotifyUrls),
  };
}

/** The four public addresses of docs/behaviour.md §9, after listening. */
export interface PublicUrls {
  /** `{base_url}`, ends in `/v2`. */
  baseUrl: string;
  authUrl: string;
  /** `host[:port]` inside `rtmp://{ingest_url}/live/…`. */
  ingestUrl: string;
  /** `host[:port]` inside `http://{icecast_url}/live/…` (the Icecast source ingest). */
  icecastUrl: string;
  cdnUrl: string;
}

/** Fills unset public URLs from the bound addresses (ports as actually bound when 0 was asked). */
export function resolvePublicUrls(config: Config, httpPort: number, rtmpPort: number, icecastPort = config.icecastPort): PublicUrls {
  const host = (h: string) => (h.includes(':') ? `[${h}]` : h === '0.0.0.0' ? '127.0.0.1' : h);
  const http = `http://${host(config.httpHost)}:${httpPort}`;
  return {
    baseUrl: config.baseUrl ?? `${http}/v2`,
    authUrl: config.authUrl ?? http,
    ingestUrl: config.ingestUrl ?? `${host(config.rtmpHost)}:${rtmpPort}`,
    icecastUrl: config.icecastUrl ?? `${host(config.icecastHost)}:${icecastPort}`,
    cdnUrl: config.cdnUrl ?? http,
  };
}
