/** Renders a stream row as the API's stream object (spec "Stream", docs/behaviour.md §2, §9). */
import type { StreamRow } from '../../base/db/streams-repo.js';
import type { PublicUrls } from '../../base/config.js';
import type { NowPlaying } from '../../live/ports.js';

/** The stream object. `streamKey` only for secret keys (and never in events). */
export interface StreamObject {
  id: string;
  object: 'stream';
  title: string;
  title_en: string | null;
  title_ru: string | null;
  title_de: string | null;
  title_fr: string | null;
  /** `live` during a broadcast, else `idle` (no terminal state: docs/streams.md). */
  status: 'idle' | 'live';
  quality: string;
  codec: string;
  region: string;
  rtmpUrl: string;
  streamKey?: string;
  hlsUrl: string;
  /** Icecast-style progressive listening of the passthrough layer (docs/behaviour.md §10). */
  listenUrl: string;
  /** Where an Icecast source client publishes (PUT/SOURCE, user `source`, the stream key as password). */
  icecastUrl: string;
  /** Where a WHIP client (a browser, OBS 30+) publishes (RFC 9725; the stream key or a publish token as bearer). */
  whipUrl: string;
  /** What plays now (docs/behaviour.md §11), or null. */
  nowPlaying: NowPlayingObject | null;
  listenerCount: number;
  reconnectWindow: number;
  /** The podcast each broadcast becomes an episode of, and `publish` as set: `auto` publishes it when the broadcast ends, `draft` or absent keeps it a draft (docs/streams.md "Listen again"). */
  recording: { podcastId: string; publish?: 'draft' | 'auto' } | null;
  /** `"public"`, `"token"`, or, for a token stream that admits listener tokens minted with a publishable key, the object form (docs/behaviour.md §13). */
  playback: 'public' | 'token' | { mode: 'token'; publishableKeyTokens: true };
  /** `standard` (classic HLS) or `low` (LL-HLS: parts, blocking reload, preload hints). */
  latencyMode: 'standard' | 'low';
  createdAt: string;
  /** When the current (or last) broadcast started; null before the first. */
  startedAt: string | null;
  /** When the last broadcast ended (null before the first one ended); kept while the next one runs. */
  endedAt: string | null;
  metadata: Record<string, string>;
  /** What plays while no live audio does (docs/streams.md "Fallback"), or null. */
  fallback: StreamFallback | null;
  /** Where the audio comes from now: `live`, `fallback`, or null (nothing plays). */
  source: 'live' | 'fallback' | null;
  /** The stream's own Icecast mount (`/stream`), besides `/live/<id>`, or null (docs/icecast.md "Mounts"). */
  icecastMount: string | null;
  /** IANA time zone (`UTC` by default): the date in the titles of its broadcasts' episodes (docs/streams.md "Listen again"). */
  timeZone: string;
  /** Catch-up radio (docs/behaviour.md "Catch-up radio"): hours of the window kept, 0 = off. */
  catchUp: { hours: number };
}

/** A stream's fallback (docs/streams.md "Fallback"): episodes of the account, their order, the silence that switches to it (s, or null). */
export interface StreamFallback {
  episodeIds: string[];
  order: 'sequential' | 'shuffle';
  silenceSeconds: number | null;
}

/** A title's fields as the API shows them (docs/behaviour.md §11): unknown ones null. */
export interface TitleFields {
  title: string;
  artist: string | null;
  album: string | null;
  url: string | null;
  artworkUrl: string | null;
}

/** The stream object's `nowPlaying` (docs/behaviour.md §11), also stored as JSON in the stream row. `startedAt` ISO 8601. */
export interface NowPlayingObject extends TitleFields {
  startedAt: string;
}

/**
 * The stream object's `nowPlaying` for `np` (what the live port carries) started at `atMs` (ms
 * since the epoch); absent fields become null. Its keys in the API's order.
 */
export function nowPlayingObject(np: NowPlaying, atMs: number): NowPlayingObject {
  return { ...fieldsOf(np), startedAt: new Date(atMs).toISOString() };
}

/** The title fields of `np` alone (absent ones null), in the API's order. */
export function fieldsOf(np: NowPlaying): TitleFields {
  return { title: np.title, artist: np.artist ?? null, album: np.album ?? null, url: np.url ?? null, artworkUrl: np.artworkUrl ?? null };
}

/** Whether a stored now-playing JSON value says the same as `np` (its `startedAt` aside). */
export function sameNowPlaying(stored: string | null | undefined, np: TitleFields): boolean {
  if (!stored) return false;
  try {
    const o = JSON.parse(stored) as Partial<NowPlayingObject>;
    return o.title === np.title && (o.artist ?? null) === np.artist && (o.album ?? null) === np.album && (o.url ?? null) === np.url && (o.artworkUrl ?? null) === np.artworkUrl;
  } catch {
    return false;
  }
}

/** The listening file extension of a codec (docs/behaviour.md §10). */
export const LISTEN_EXT: Record<string, string> = { mp3: 'mp3', aac: 'aac', opus: 'opus' };

/** The stream's WHIP endpoint (docs/behaviour.md "Go live over WHIP"): on the node's own HTTP origin, the API's without `/v2`. */
export function whipUrlOf(urls: PublicUrls, streamId: string): string {
  return `${urls.baseUrl.replace(/\/v2\/?$/, '')}/whip/${streamId}`;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Builds the object; `streamKey` is included when given. */
export function toStreamObject(row: StreamRow, urls: PublicUrls, listenerCount: number, streamKey?: string): StreamObject {
  const titles = JSON.parse(row.titles) as Record<string, string>;
  return {
    id: row.id,
    object: 'stream',
    title: row.title,
    title_en: titles.title_en ?? null,
    title_ru: titles.title_ru ?? null,
    title_de: titles.title_de ?? null,
    title_fr: titles.title_fr ?? null,
    status: row.status === 'live' ? 'live' : 'idle',
    quality: row.quality,
    codec: row.codec,
    region: row.region,
    rtmpUrl: `rtmp://${urls.ingestUrl}/live/${row.id}`,
    ...(streamKey !== undefined ? { streamKey } : {}),
    hlsUrl: `${urls.cdnUrl}/hls/${row.id}/index.m3u8`,
    listenUrl: `${urls.cdnUrl}/listen/${row.id}.${LISTEN_EXT[row.codec] ?? row.codec}`,
    icecastUrl: `http://${urls.icecastUrl}/live/${row.id}`,
    whipUrl: whipUrlOf(urls, row.id),
    nowPlaying: row.now_playing ? (JSON.parse(row.now_playing) as NowPlayingObject) : null,
    listenerCount,
    reconnectWindow: row.reconnect_window,
    recording: recordingOf(row.recording),
    playback: row.playback === 'token' && row.playback_publishable_tokens === 1 ? { mode: 'token', publishableKeyTokens: true } : row.playback,
    latencyMode: row.latency_mode,
    createdAt: new Date(row.created_at).toISOString(),
    startedAt: iso(row.started_at),
    endedAt: iso(row.ended_at),
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    fallback: row.fallback ? (JSON.parse(row.fallback) as StreamFallback) : null,
    source: row.source === 'live' || row.source === 'fallback' ? row.source : null,
    icecastMount: row.icecast_mount ?? null,
    timeZone: row.time_zone ?? 'UTC',
    catchUp: { hours: row.catch_up_hours ?? 0 },
  };
}

/** The `recording` JSON column as the stream object shows it: `podcastId`, and `publish` when it was set (absent means `draft`). */
export function recordingOf(json: string | null): { podcastId: string; publish?: 'draft' | 'auto' } | null {
  if (json === null) return null;
  const r = JSON.parse(json) as { podcastId: string; publish?: 'draft' | 'auto' };
  return { podcastId: r.podcastId, ...(r.publish === 'auto' || r.publish === 'draft' ? { publish: r.publish } : {}) };
}

/**
 * The ABR ladder (kbps), top first (docs/behaviour.md §9 "HLS"): the layers at and below the ingest
 * quality — high: 256 (passthrough), 128, 64; medium: 128, 64; low: 64; opus high: 320, 128, 64.
 */
export function ladderKbps(quality: string, codec: string): number[] {
  const top = nominalKbps(quality, codec);
  return [top, ...[128, 64].filter((k) => k < top)];
}

/** Nominal ingest bitrate (kbps) of quality × codec (docs/behaviour.md §2: opus+high = 320). */
export function nominalKbps(quality: string, codec: string): number {
  if (quality === 'high') return codec === 'opus' ? 320 : 256;
  if (quality === 'low') return 64;
  return 128;
}
