/**
 * The Icecast port's listening side (docs/icecast.md "Listeners"): what src/live/ingest/icecast-server.ts
 * answers to a listener's `GET|HEAD /live/<stream_id>[.<ext>]` and to `GET /status-json.xsl`.
 *
 * - A listener is served by the very handler of `/listen/<stream_id>.<ext>` (src/delivery/progressive/routes.ts):
 *   the same checks (idle → 404, `playback: "token"` → `?token=`), the same per-address and total
 *   listening caps, the same shared mounts, bursts and ICY metadata, the same registry session
 *   (`protocol: "icecast"`). `keepProgressive` keeps that handler when the routes are registered;
 *   `icecastListening` calls it with the request the Icecast socket carried. `.ogg` names the
 *   `opus` output (Ogg Opus); the bare mount names the stream's own codec.
 * - Station identity (`stationHeaders`): `icy-name` is the stream's `title`; `icy-description`,
 *   `icy-genre`, `icy-url` are the stream's `metadata` keys `description`, `genre`, `url` when set.
 * - `/status-json.xsl`: Icecast 2.4's status document for the `public` streams whose audio can be
 *   listened to now — live, or playing their fallback (docs/streams.md "Fallback"), with what plays
 *   as `title` — (token streams are never listed), cached for STATUS_TTL_MS; a stream with its own
 *   mount (`icecastMount`) is listed under it (`listenurl`).
 * - A listener at a stream's own mount (`/stream`) comes here as the bare mount of its stream (the
 *   Icecast server looks the mount up): the stream's own codec.
 */
import type { HttpServer, ProgressiveHandler, ProgressiveRequest } from '../../base/http/server.js';
import type { IcecastListenAnswer, IcecastListenRequest, IcecastListening } from '../../live/ports.js';
import { newRequestId } from '../../base/ids.js';

/** What the Icecast port reads of a stream row. Times in ms since the epoch. */
export interface StationRow {
  id: string;
  title: string;
  /** The stream's `metadata` (a JSON object). */
  metadata: string;
  /** JSON `{ title, artist, … }` or null. */
  now_playing?: string | null;
  started_at: number | null;
  playback: 'public' | 'token';
  codec: string;
  /** The stream's own Icecast mount (`/stream`), or null: its `listenurl` (docs/icecast.md "Mounts"). */
  icecast_mount?: string | null;
}

/** What the Icecast port needs of the node to serve listeners. */
export interface IcecastListeningDeps {
  /** The `/listen/:file` handler (known once the listening routes are registered). */
  handler(): ProgressiveHandler;
  row(streamId: string): StationRow | undefined;
  /** Every stream of the node listeners can hear now: `live`, or playing its fallback. */
  onAir(): StationRow[];
  /** The stream's passthrough layer as listening sees it, or null when it has no audio (yet, or any more). */
  layer(streamId: string): { kbps: number } | null;
  /** Listeners now and the stream's peak (every protocol). */
  stats(streamId: string): { listeners: number; peak: number };
  /** `host[:port]` of the Icecast port as the public knows it. */
  icecastUrl(): string;
  now?: () => number;
}

/** How long `/status-json.xsl` is reused (ms): a poller in a loop costs one build per interval. */
export const STATUS_TTL_MS = 1000;

const CONTENT_TYPES: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };
/** Longest identity header value taken from a stream's metadata. */
const MAX_IDENTITY = 256;
const headerSafe = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, ' ');
/** A header name, value or status line as text (the HTTP layer may hold them as bytes). */
const latin1 = (v: string | Uint8Array) => (typeof v === 'string' ? v : Buffer.from(v).toString('latin1'));

/**
 * The station identity headers of a stream: `icy-name` (its `title`) and, when its `metadata`
 * JSON object has them as non-empty strings, `icy-description` (`description`), `icy-genre`
 * (`genre`) and `icy-url` (`url`) — control characters as spaces, at most 256 characters each.
 * Malformed metadata gives `icy-name` alone.
 */
export function stationHeaders(title: string, metadataJson: string | null | undefined): Array<readonly [string, string]> {
  const out: Array<readonly [string, string]> = [['icy-name', headerSafe(title.slice(0, MAX_IDENTITY))]];
  const m = stationMetadata(metadataJson);
  if (m.description) out.push(['icy-description', m.description]);
  if (m.genre) out.push(['icy-genre', m.genre]);
  if (m.url) out.push(['icy-url', m.url]);
  return out;
}

/** `description`, `genre`, `url` of a stream's metadata JSON (header-safe, ≤ 256 characters), when set. */
function stationMetadata(json: string | null | undefined): { description?: string; genre?: string; url?: string } {
  let o: unknown;
  try {
    o = json ? JSON.parse(json) : null;
  } catch {
    return {};
  }
  if (!o || typeof o !== 'object' || Array.isArray(o)) return {};
  const r = o as Record<string, unknown>;
  const pick = (k: string) => (typeof r[k] === 'string' && (r[k] as string).trim() !== '' ? headerSafe((r[k] as string).trim().slice(0, MAX_IDENTITY)) : undefined);
  const out: { description?: string; genre?: string; url?: string } = {};
  const description = pick('description');
  const genre = pick('genre');
  const url = pick('url');
  if (description) out.description = description;
  if (genre) out.genre = genre;
  if (url) out.url = url;
  return out;
}

/**
 * `http` as it is, except that the handlers of its progressive routes are also kept, by pattern:
 * register the listening routes through `http` and call `handler('/listen/:file')` afterwards.
 */
export function keepProgressive(http: HttpServer): { http: HttpServer; handler(pattern: string): ProgressiveHandler | undefined } {
  const kept = new Map<string, ProgressiveHandler>();
  const proxy = new Proxy(http, {
    get(target, prop) {
      if (prop === 'progressive') {
        return (pattern: string, handler: ProgressiveHandler) => {
          kept.set(pattern, handler);
          target.progressive(pattern, handler);
        };
      }
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { http: proxy, handler: (pattern) => kept.get(pattern) };
}

/** `2026-11-27T13:04:43+0000`: Icecast's `*_iso8601` form. */
function iso8601(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+0000');
}

/** `Fri, 27 Nov 2026 13:04:43 +0000`: Icecast's `stream_start` form (RFC 5322 §3.3). */
function rfc822(ms: number): string {
  return new Date(ms).toUTCString().replace(/GMT$/, '+0000');
}

/** The listening side of the Icecast port (see the file comment). */
export function icecastListening(d: IcecastListeningDeps): IcecastListening {
  const now = d.now ?? Date.now;
  const startedAt = now();
  let cached: { body: string; until: number } | null = null;
  return {
    listen: (req) => icecastListen(d, req),
    /** The body of `GET /status-json.xsl` (JSON, UTF-8), rebuilt at most once per STATUS_TTL_MS. */
    statusJson(): string {
      const t = now();
      if (cached && cached.until > t) return cached.body;
      cached = { body: statusDocument(d, startedAt, now), until: t + STATUS_TTL_MS };
      return cached.body;
    },
  };
}

/**
 * A listener on the Icecast port: the `/listen/<id>.<ext>` handler's answer to the same request,
 * its station identity headers replaced by the stream's own (`stationHeaders`).
 */
function icecastListen(d: IcecastListeningDeps, req: IcecastListenRequest): IcecastListenAnswer {
  const row = d.row(req.streamId);
  const ext = req.ext === 'ogg' ? 'opus' : (req.ext ?? row?.codec ?? 'none');
  const preq: ProgressiveRequest = {
    method: req.method,
    params: [`${req.streamId}.${ext}`],
    query: req.query,
    header: (name) => req.header(name),
    remoteAddress: req.remoteAddress,
    requestId: newRequestId(),
  };
  const a = d.handler()(preq);
  if ('yield' in a) throw new Error('the /listen handler left an Icecast port request to another route');
  if (!('stream' in a)) {
    const headers: Array<readonly [string, string]> = [];
    for (const [k, v] of a.headers) headers.push([latin1(k), latin1(v)]);
    return { refuse: { status: latin1(a.status), headers, body: a.body instanceof ArrayBuffer ? new Uint8Array(a.body) : a.body } };
  }
  const identity = stationHeaders(row?.title ?? '', row?.metadata);
  const headers: Array<readonly [string, string]> = [];
  for (const [k, v] of a.stream.headers) {
    const name = latin1(k);
    const lower = name.toLowerCase();
    if (lower === 'icy-name' || lower === 'icy-description' || lower === 'icy-genre' || lower === 'icy-url') continue;
    if (lower === 'access-control-expose-headers') continue;
    headers.push([name, latin1(v)]);
  }
  headers.push(...identity, ['Access-Control-Expose-Headers', 'icy-name, icy-description, icy-genre, icy-url, icy-br, icy-metaint']);
  return { stream: { headers, open: (sink) => a.stream.open(sink) } };
}

/** Icecast 2.4's `/status-json.xsl` document: the `public` streams on air (live or fallback) with audio now. */
function statusDocument(d: IcecastListeningDeps, startedAt: number, now: () => number): string {
  const host = d.icecastUrl();
  const source: Array<Record<string, string | number>> = [];
  for (const row of d.onAir()) {
    if (row.playback !== 'public') continue;
    const layer = d.layer(row.id);
    if (layer) source.push(statusSource(d, row, layer, host, now));
  }
  const hostname = host.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  return JSON.stringify({
    icestats: {
      admin: 'icemaster@localhost',
      host: hostname,
      location: 'Skylark',
      server_id: 'Icecast 2.4 compatible (Skylark)',
      server_start: rfc822(startedAt),
      server_start_iso8601: iso8601(startedAt),
      source,
    },
  });
}

/** One stream's `source` entry of the status document. */
function statusSource(d: IcecastListeningDeps, row: StationRow, layer: { kbps: number }, host: string, now: () => number): Record<string, string | number> {
  let np: { title?: unknown; artist?: unknown } | null = null;
  try {
    np = row.now_playing ? (JSON.parse(row.now_playing) as { title?: unknown; artist?: unknown }) : null;
  } catch {
    np = null;
  }
  const meta = stationMetadata(row.metadata);
  const stats = d.stats(row.id);
  const start = row.started_at ?? now();
  const s: Record<string, string | number> = {
    audio_info: `bitrate=${layer.kbps}`,
    bitrate: layer.kbps,
    listener_peak: Math.max(stats.peak, stats.listeners),
    listeners: stats.listeners,
    listenurl: `http://${host}${row.icecast_mount ?? `/live/${row.id}`}`,
    server_name: row.title,
    server_type: CONTENT_TYPES[row.codec] ?? 'application/octet-stream',
    stream_start: rfc822(start),
    stream_start_iso8601: iso8601(start),
  };
  if (meta.description) s.server_description = meta.description;
  if (meta.genre) s.genre = meta.genre;
  if (meta.url) s.server_url = meta.url;
  if (np && typeof np.title === 'string') s.title = np.title;
  if (np && typeof np.artist === 'string' && np.artist !== '') s.artist = np.artist;
  return s;
}
