/**
 * The Streams resource (spec "Streams", docs/behaviour.md §2, §9, §11): create, read, list, update,
 * delete, reset the stream key, set what plays now, read the play log and the broadcasts
 * (docs/streams.md). Knows no HTTP and no SQL text.
 */
import { mergeMetadata } from './metadata.js';
import { ApiError, notFound, paramInvalid } from '../../base/errors/errors.js';
import { newId, randomBase62 } from '../../base/ids.js';
import type { StreamRow, StreamsRepo, StreamStatus } from '../../base/db/streams-repo.js';
import type { Page, PageQuery } from '../../base/db/paginate.js';
import { UnknownCursorError } from '../../base/db/paginate.js';
import type { PublicUrls } from '../../base/config.js';
import { decryptSecret, encryptSecret, hashToken } from '../../base/auth/secrets.js';
import { PUBLISH_TOKEN_TTL_SECONDS, PublishTokens } from '../../base/auth/publish-tokens.js';
import { REGIONS, type Region } from './accounts.js';
import type { AccountsRepo } from '../../base/db/accounts-repo.js';
import { nowPlayingObject, sameNowPlaying, toStreamObject, whipUrlOf, type StreamFallback, type StreamObject } from './stream-object.js';
import type { PlayLog, TrackObject } from './play-log.js';
import type { NowPlaying } from '../../live/ports.js';
import type { BroadcastLog, BroadcastObject, LiveLoudness } from './broadcasts.js';

/** The language titles a stream may carry besides `title` (docs/behaviour.md §2). */
export const LANGUAGE_TITLES = ['title_en', 'title_ru', 'title_de', 'title_fr'] as const;
/** Metadata: at most this many keys after a merge (docs/behaviour.md §2). */
export const METADATA_MAX_KEYS = 16;
/** Longest Icecast mount, `/` included (docs/icecast.md "Mounts"). */
export const ICECAST_MOUNT_MAX = 64;
/** An Icecast mount's shape: `/`, then 1–63 of `A-Z a-z 0-9 . _ - /` (the reserved ones: `icecastMountProblem`). */
export const ICECAST_MOUNT_PATTERN = /^\/[A-Za-z0-9._/-]{1,63}$/;

/** A new publish token (`POST /streams/{id}/publish_tokens`). `expiresAt` ISO 8601. */
export interface PublishTokenObject {
  object: 'publish_token';
  token: string;
  streamId: string;
  whipUrl: string;
  expiresAt: string;
}

/** A stream's `recording`: the podcast its broadcasts become episodes of, and `publish` (`draft` | `auto`; docs/streams.md "Listen again"). */
export interface RecordingSetting {
  podcastId: string;
  publish?: 'draft' | 'auto';
}

/**
 * The canonical spelling of IANA time zone `name` as this runtime's ICU knows it (`europe/paris`
 * → `Europe/Paris`, `utc` → `UTC`), or null when it names no zone. Offsets such as `+02:00` are
 * refused: a station's clock follows its zone's daylight-saving rules.
 */
export function canonicalTimeZone(name: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/.test(name)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/**
 * Why `mount` cannot be a stream's Icecast mount (docs/icecast.md "Mounts"), or null when it can:
 * the shape of ICECAST_MOUNT_PATTERN, a clean path (no `//`, no `.` or `..` segment, no `/` at the
 * end), and none of the Icecast port's own paths — `/live` and `/live/…` (every stream's
 * `/live/<stream id>`), `/admin…` (Icecast's admin calls), `/status-json.xsl`.
 */
export function icecastMountProblem(mount: string): string | null {
  if (!ICECAST_MOUNT_PATTERN.test(mount)) return `must start with / and be at most ${ICECAST_MOUNT_MAX} characters of A-Z a-z 0-9 . _ - /`;
  if (mount.endsWith('/') || mount.includes('//')) return 'must not end with / or contain //';
  if (mount.split('/').some((seg) => seg === '.' || seg === '..')) return 'must not contain . or .. segments';
  if (/^\/live(?:\/|$)/.test(mount)) return 'must not be /live or under /live/ (every stream has /live/<stream id> already)';
  if (mount.startsWith('/admin')) return 'must not start with /admin (the Icecast admin calls)';
  if (mount === '/status-json.xsl') return 'must not be /status-json.xsl (the status document)';
  return null;
}

type LanguageTitles<V> = { [K in (typeof LANGUAGE_TITLES)[number]]?: V };

/** `playback` as given: the string form, or `{mode, publishableKeyTokens}` (docs/behaviour.md §13). */
export type PlaybackInput = 'public' | 'token' | { mode: 'public' | 'token'; publishableKeyTokens?: boolean | undefined };

/** The row's `playback` and `playback_publishable_tokens` for `p` (the string form admits no publishable-key tokens). */
function playbackRow(p: PlaybackInput): { playback: 'public' | 'token'; playback_publishable_tokens: number } {
  if (typeof p === 'string') return { playback: p, playback_publishable_tokens: 0 };
  return { playback: p.mode, playback_publishable_tokens: p.mode === 'token' && p.publishableKeyTokens === true ? 1 : 0 };
}

/** A validated `POST /streams` body (api/streams/schemas.ts validates it). Bitrate quality names; window in s. */
export interface CreateStreamInput extends LanguageTitles<string> {
  title: string;
  /** `ultra_low` is the deprecated alias of `low`. */
  quality?: 'low' | 'medium' | 'high' | 'ultra_low';
  codec?: 'aac' | 'opus' | 'mp3';
  region?: Region;
  metadata?: Record<string, string>;
  reconnectWindow?: number;
  recording?: RecordingSetting | null;
  playback?: PlaybackInput;
  /** IANA time zone (canonical; default UTC): the date in the titles of its broadcasts' episodes. */
  timeZone?: string;
  /** `standard` (classic HLS; the default) or `low` (LL-HLS). */
  latencyMode?: 'standard' | 'low';
  /** What plays while no live audio does (docs/streams.md "Fallback"); null: nothing. */
  fallback?: StreamFallback | null;
  /** The stream's own Icecast mount (valid by `icecastMountProblem`); null or absent: none. */
  icecastMount?: string | null;
  /** Hours of catch-up kept (0–168; docs/behaviour.md "Catch-up radio"); absent: 0. */
  catchUp?: { hours: number };
}

/** A validated `PATCH /streams/{id}` body: `null` clears a language title or removes a metadata key. */
export interface UpdateStreamInput extends LanguageTitles<string | null> {
  title?: string;
  quality?: 'low' | 'medium' | 'high' | 'ultra_low';
  metadata?: Record<string, string | null>;
  reconnectWindow?: number;
  recording?: RecordingSetting | null;
  playback?: PlaybackInput;
  /** IANA time zone (canonical): applies to broadcasts that end from now on. */
  timeZone?: string;
  /** Takes effect when the stream next starts a timeline (its next publish after being idle). */
  latencyMode?: 'standard' | 'low';
  /** Set, replaced or (null) removed at once (docs/streams.md "Fallback"). */
  fallback?: StreamFallback | null;
  /** Set, replaced or (null) removed; sources and listeners use it from their next connection. */
  icecastMount?: string | null;
  /** Takes effect at once: segments from now on are kept (0: the kept ones are deleted by the next sweep). */
  catchUp?: { hours: number };
}

/** What the live side offers the resource: counts and the power to stop a publisher. */
export interface LiveControl {
  listenerCount(streamId: string): number;
  /** Ends a live stream now (publisher disconnected, `stream.ended`), before deletion. */
  endNow(streamId: string): void;
  /** Disconnects the current publisher (after a key reset); the reconnect window applies. */
  disconnectPublisher(streamId: string): void;
  /**
   * What plays now changed (docs/behaviour.md §11): handed to ingest like a source's metadata (the media
   * hub, then the lifecycle: `nowPlaying`, a track, `stream.now_playing`). `startedAtMs`: the
   * moment the API answered with, which the lifecycle stores even when the title-change cap
   * applies the change later (docs/listeners.md "Title changes").
   */
  nowPlaying(streamId: string, np: NowPlaying): void;
  /** The stream's fallback was set, changed or removed, or the stream was deleted (docs/streams.md "Fallback"): ingest reads it again. */
  fallbackChanged?(streamId: string): void;
}

/** Result of a write whose input used a deprecated value. */
export interface WithDeprecation<T> {
  value: T;
  deprecated: string[];
}

export interface StreamsDeps {
  streams: StreamsRepo;
  accounts: AccountsRepo;
  nodeSecret: Buffer;
  urls: () => PublicUrls;
  live: LiveControl;
  /** Refuses a `recording.podcastId` that is not a live podcast of the account. @throws ApiError 400 */
  checkRecordingPodcast?: (accountId: string, podcastId: string) => void;
  /**
   * Refuses a fallback episode that is not an episode of the account with audio, naming it
   * (`fallback.episodeIds[i]`). @throws ApiError 400
   */
  checkFallbackEpisodes?: (accountId: string, episodeIds: string[]) => void;
  /** The play log (`GET /streams/{id}/tracks`). */
  playLog?: PlayLog;
  /** The broadcasts (`GET /streams/{id}/broadcasts`). */
  broadcasts?: BroadcastLog;
  now?: () => number;
}

const DEFAULT_RECONNECT_WINDOW = 30;
/** Most stream rows kept by the read cache (emptied when full: a cache, not a store). */
const ROW_CACHE_MAX = 10_000;

/**
 * A cached stream row and what was rendered from it: the decrypted stream key (lazily), and the
 * objects with and without the key, valid for the `urls` and `listenerCount` they were made with.
 */
interface CachedStream {
  row: StreamRow;
  key?: string;
  urls?: PublicUrls;
  listenerCount?: number;
  withKey?: StreamObject;
  withoutKey?: StreamObject;
}

export class StreamsService {
  private readonly now: () => number;
  /**
   * Stream id → row and renders, for `get` (the authenticated GET hot path: no SQLite read, no
   * AES-GCM decryption, no re-render while nothing changed). This service's own writes drop their
   * entry at once; every other change (ingest marking a stream live or ended, another process such
   * as the CLI) is caught by the database change stamp (`total_changes()` + `data_version`), read
   * once per event-loop turn like the Guard's: a change always commits in an earlier turn than any
   * request a client sends after learning of it, so nothing stale is observable.
   */
  private readonly cache = new Map<string, CachedStream>();
  private stamp = -1;
  private stampFresh = false;
  private readonly expireStamp = () => {
    this.stampFresh = false;
  };

  private readonly publishTokens: PublishTokens;

  constructor(private readonly d: StreamsDeps) {
    this.now = d.now ?? Date.now;
    this.publishTokens = new PublishTokens(d.nodeSecret, this.now);
  }

  /**
   * A publish token for the stream (docs/behaviour.md "Go live over WHIP"): a bearer for its WHIP
   * endpoint only, valid `ttlSeconds` (default 600, 60 – 86 400; checked by the caller's schema).
   * @throws ApiError 404
   */
  async createPublishToken(accountId: string, id: string, ttlSeconds = PUBLISH_TOKEN_TTL_SECONDS): Promise<PublishTokenObject> {
    this.row(accountId, id);
    const { token, expiresAt } = await this.publishTokens.sign(id, ttlSeconds);
    return { object: 'publish_token', token, streamId: id, whipUrl: whipUrlOf(this.d.urls(), id), expiresAt: new Date(expiresAt).toISOString() };
  }

  /**
   * Creates an `idle` stream with a new stream key (or `streamKey`, a key in the stream key format
   * that `skylark import-icecast --keep-passwords` carries over).
   * @throws ApiError 400, 409 `icecast_mount_taken`
   */
  create(accountId: string, input: CreateStreamInput, streamKey?: string): WithDeprecation<StreamObject> {
    const deprecated: string[] = [];
    if (input.icecastMount) this.checkMountFree(input.icecastMount, null);
    if (input.recording) this.d.checkRecordingPodcast?.(accountId, input.recording.podcastId);
    if (input.fallback) this.d.checkFallbackEpisodes?.(accountId, input.fallback.episodeIds);
    const quality = normalizeQuality(input.quality, deprecated) ?? 'medium';
    const account = this.d.accounts.get(accountId);
    const region = (input.region ?? account?.default_region ?? 'eu-west-1') as Region;
    const key = streamKey ?? makeStreamKey(region);
    const titles: Record<string, string> = {};
    for (const t of LANGUAGE_TITLES) if (input[t] !== undefined) titles[t] = input[t]!;
    const row: StreamRow = {
      id: newId('stm'),
      account_id: accountId,
      title: input.title,
      titles: JSON.stringify(titles),
      status: 'idle',
      quality,
      codec: input.codec ?? 'aac',
      region,
      stream_key_hash: hashToken(key),
      stream_key_enc: encryptSecret(this.d.nodeSecret, key),
      metadata: JSON.stringify(input.metadata ?? {}),
      reconnect_window: input.reconnectWindow ?? DEFAULT_RECONNECT_WINDOW,
      recording: input.recording ? JSON.stringify(input.recording) : null,
      ...playbackRow(input.playback ?? 'public'),
      latency_mode: input.latencyMode ?? 'standard',
      created_at: this.now(),
      started_at: null,
      ended_at: null,
      fallback: input.fallback ? JSON.stringify(fallbackOf(input.fallback)) : null,
      icecast_mount: input.icecastMount ?? null,
      time_zone: input.timeZone ?? 'UTC',
      catch_up_hours: input.catchUp?.hours ?? 0,
    };
    this.mountWrite(row.icecast_mount ?? null, () => this.d.streams.insert(row));
    if (row.fallback) this.d.live.fallbackChanged?.(row.id);
    return { value: this.render(this.d.streams.getAny(row.id) ?? row, true), deprecated };
  }

  /**
   * The stream object (`streamKey` when `withKey`). Served from the read cache while the row is
   * unchanged: the answer is shared and frozen (never mutate it).
   * @throws ApiError 404
   */
  get(accountId: string, id: string, withKey: boolean): StreamObject {
    const c = this.cached(accountId, id);
    const urls = this.d.urls();
    const listenerCount = this.d.live.listenerCount(id);
    if (c.urls !== urls || c.listenerCount !== listenerCount) {
      c.urls = urls;
      c.listenerCount = listenerCount;
      c.withKey = c.withoutKey = undefined;
    }
    if (withKey) return (c.withKey ??= freeze(toStreamObject(c.row, urls, listenerCount, (c.key ??= decryptSecret(this.d.nodeSecret, c.row.stream_key_enc)))));
    return (c.withoutKey ??= freeze(toStreamObject(c.row, urls, listenerCount)));
  }

  /** A page of the account's streams, newest first. @throws ApiError 400 for an unknown cursor */
  list(accountId: string, status: StreamStatus | undefined, q: PageQuery, withKey: boolean): { data: StreamObject[]; hasMore: boolean } {
    let page: Page<StreamRow>;
    try {
      page = this.d.streams.list(accountId, status, q);
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
    return { data: page.rows.map((r) => this.render(r, withKey)), hasMore: page.hasMore };
  }

  /** Applies a PATCH; metadata keys given as null are removed. @throws ApiError 400/404, 409 `icecast_mount_taken` */
  update(accountId: string, id: string, input: UpdateStreamInput, withKey: boolean): WithDeprecation<StreamObject> {
    const deprecated: string[] = [];
    const row = { ...this.row(accountId, id) };
    if (input.recording) this.d.checkRecordingPodcast?.(accountId, input.recording.podcastId);
    if (input.fallback) this.d.checkFallbackEpisodes?.(accountId, input.fallback.episodeIds);
    if (input.title !== undefined) row.title = input.title;
    const titles = JSON.parse(row.titles) as Record<string, string>;
    for (const t of LANGUAGE_TITLES) {
      const value = input[t];
      if (value === null) delete titles[t];
      else if (value !== undefined) titles[t] = value;
    }
    row.titles = JSON.stringify(titles);
    const quality = normalizeQuality(input.quality, deprecated);
    if (quality) row.quality = quality;
    if (input.metadata !== undefined) row.metadata = mergeMetadata(row.metadata, input.metadata, METADATA_MAX_KEYS);
    if (input.reconnectWindow !== undefined) row.reconnect_window = input.reconnectWindow;
    if (input.recording !== undefined) row.recording = input.recording === null ? null : JSON.stringify(input.recording);
    if (input.playback !== undefined) Object.assign(row, playbackRow(input.playback));
    if (input.timeZone !== undefined) row.time_zone = input.timeZone;
    if (input.latencyMode !== undefined) row.latency_mode = input.latencyMode;
    if (input.fallback !== undefined) row.fallback = input.fallback === null ? null : JSON.stringify(fallbackOf(input.fallback));
    if (input.icecastMount !== undefined) {
      if (input.icecastMount !== null) this.checkMountFree(input.icecastMount, id);
      row.icecast_mount = input.icecastMount;
    }
    if (input.catchUp !== undefined) row.catch_up_hours = input.catchUp.hours;
    this.mountWrite(input.icecastMount ?? null, () => this.d.streams.update(row));
    this.cache.delete(id);
    if (input.fallback !== undefined || input.quality !== undefined) this.d.live.fallbackChanged?.(id);
    // The fallback may have put the stream on air (or taken it off): its `source` and `nowPlaying` as they are now.
    return { value: this.render(this.d.streams.getAny(id) ?? row, withKey), deprecated };
  }

  /** Deletes a stream; a live one's broadcast is ended first (`stream.ended`). @throws ApiError 404 */
  delete(accountId: string, id: string): { id: string; object: 'stream'; deleted: true } {
    const row = this.row(accountId, id);
    if (row.status === 'live') this.d.live.endNow(id);
    this.d.streams.delete(id);
    this.cache.delete(id);
    if (row.fallback) this.d.live.fallbackChanged?.(id);
    return { id, object: 'stream', deleted: true };
  }

  /** Replaces the stream key; the current publisher is disconnected. @throws ApiError 404 */
  resetStreamKey(accountId: string, id: string): StreamObject {
    const row = this.row(accountId, id);
    const key = makeStreamKey(row.region as Region);
    const hash = hashToken(key);
    const enc = encryptSecret(this.d.nodeSecret, key);
    this.d.streams.setStreamKey(id, hash, enc);
    this.cache.delete(id);
    this.d.live.disconnectPublisher(id);
    return this.render({ ...row, stream_key_hash: hash, stream_key_enc: enc }, true);
  }

  /**
   * Sets what plays now on a live stream (docs/behaviour.md §11), through the same path as an ingest
   * source's metadata. Answers the stream with its `nowPlaying` (`startedAt` now; unchanged when the
   * values are those playing already) — the title asked even while the title-change cap holds it
   * back (docs/listeners.md "Title changes").
   * @throws ApiError 404, 409 `stream_not_live`
   */
  setNowPlaying(accountId: string, id: string, input: Omit<NowPlaying, 'startedAtMs' | 'fallback'>, withKey: boolean): StreamObject {
    const row = this.row(accountId, id);
    if (row.status !== 'live') throw new ApiError('stream_not_live', `The stream is ${row.status}: what plays now can be set while it is live.`);
    // An empty string is no value (null), as in the form.
    const np = { title: input.title, artist: input.artist || null, album: input.album || null, url: input.url || null, artworkUrl: input.artworkUrl || null };
    const atMs = this.now();
    const asked = nowPlayingObject(np, atMs);
    this.d.live.nowPlaying(id, { ...np, startedAtMs: atMs });
    this.cache.delete(id);
    const after = this.row(accountId, id);
    // A change the title cap holds back (or a write SQLite could not take at once, retried in
    // order) is applied later: answer what will be stored, the newest title asked.
    return this.render(sameNowPlaying(after.now_playing, np) ? after : { ...after, now_playing: JSON.stringify(asked) }, withKey);
  }

  /**
   * A page of the stream's play log, newest first; with `broadcastId`, only that broadcast's tracks
   * (docs/behaviour.md §11). @throws ApiError 400 (unknown cursor), 404 (stream, or a broadcast not of it)
   */
  tracks(accountId: string, id: string, q: PageQuery, broadcastId?: string): { data: TrackObject[]; hasMore: boolean } {
    this.row(accountId, id);
    const b = broadcastId !== undefined ? this.broadcastLog().row(accountId, id, broadcastId) : null;
    if (!this.d.playLog) return { data: [], hasMore: false };
    return this.d.playLog.list(accountId, id, q, b ? b.id : undefined);
  }

  /** A page of the stream's broadcasts, newest first. @throws ApiError 400 (unknown cursor), 404 */
  broadcasts(accountId: string, id: string, q: PageQuery): { data: BroadcastObject[]; hasMore: boolean } {
    this.row(accountId, id);
    return this.broadcastLog().list(accountId, id, q);
  }

  /** Broadcast `broadcastId` of the stream. @throws ApiError 404 */
  broadcast(accountId: string, id: string, broadcastId: string): BroadcastObject {
    this.row(accountId, id);
    return this.broadcastLog().get(accountId, id, broadcastId);
  }

  /** The stream's loudness now (docs/streams.md "Live loudness"), or null when not measured. @throws ApiError 404 */
  loudness(accountId: string, id: string): LiveLoudness | null {
    this.row(accountId, id);
    return this.d.broadcasts?.loudness(id) ?? null;
  }

  /** Refuses `mount` when a stream other than `selfId` has it. @throws ApiError 409 `icecast_mount_taken` */
  private checkMountFree(mount: string, selfId: string | null): void {
    const other = this.d.streams.byIcecastMount(mount);
    if (other && other.id !== selfId) throw mountTaken(mount);
  }

  /** Runs a write that sets `mount`: a race lost to another writer (the unique index) is the same 409. */
  private mountWrite(mount: string | null, write: () => void): void {
    try {
      write();
    } catch (e) {
      if (mount !== null && (e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw mountTaken(mount);
      throw e;
    }
  }

  private broadcastLog(): BroadcastLog {
    if (!this.d.broadcasts) throw new Error('the streams service has no broadcasts');
    return this.d.broadcasts;
  }

  private row(accountId: string, id: string): StreamRow {
    const row = this.d.streams.get(id, accountId);
    if (!row) throw notFound('stream', id);
    return row;
  }

  /** The cache entry of stream `id` of `accountId` (read from SQLite when absent). @throws ApiError 404 */
  private cached(accountId: string, id: string): CachedStream {
    if (!this.stampFresh) {
      const stamp = this.d.streams.changeStamp();
      if (stamp !== this.stamp) {
        this.cache.clear();
        this.stamp = stamp;
      }
      this.stampFresh = true;
      setImmediate(this.expireStamp);
    }
    const hit = this.cache.get(id);
    if (hit) {
      if (hit.row.account_id !== accountId) throw notFound('stream', id);
      return hit;
    }
    const row = this.row(accountId, id);
    if (this.cache.size >= ROW_CACHE_MAX) this.cache.clear();
    const entry: CachedStream = { row };
    this.cache.set(id, entry);
    return entry;
  }

  private render(row: StreamRow, withKey: boolean): StreamObject {
    const key = withKey ? decryptSecret(this.d.nodeSecret, row.stream_key_enc) : undefined;
    return toStreamObject(row, this.d.urls(), this.d.live.listenerCount(row.id), key);
  }
}

/** 409 `icecast_mount_taken`, naming the mount (not the other stream: it may be another account's). */
function mountTaken(mount: string): ApiError {
  return new ApiError('icecast_mount_taken', `The Icecast mount ${mount} is already used by another stream on this node.`, { param: 'icecastMount' });
}

/** Freezes a cached stream object (and its nested objects) so that no caller can alter what others are served. */
function freeze(o: StreamObject): StreamObject {
  Object.freeze(o.metadata);
  if (o.recording) Object.freeze(o.recording);
  return Object.freeze(o);
}

/** The stored form of a validated fallback: every field present, duplicates kept (an episode may play twice a round). */
function fallbackOf(f: StreamFallback): StreamFallback {
  return { episodeIds: [...f.episodeIds], order: f.order ?? 'sequential', silenceSeconds: f.silenceSeconds ?? null };
}

/** `sk_<region code>_<40 base62>` (docs/behaviour.md §2). */
export function makeStreamKey(region: Region): string {
  return `sk_${REGIONS[region]}_${randomBase62(40)}`;
}

function normalizeQuality(q: string | undefined, deprecated: string[]): string | undefined {
  if (q === 'ultra_low') {
    deprecated.push('quality=ultra_low');
    return 'low';
  }
  return q;
}
