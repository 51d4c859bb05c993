/** Streams: rows, state moves, and list pages. */
import type { Database } from './database.js';
import { paginator, type Page, type PageQuery } from './paginate.js';

/**
 * A stream is `idle` between broadcasts and `live` during one; it has no terminal state
 * (docs/streams.md). `ended` was written by versions before migration 013, which made every such
 * row `idle`: it is never stored any more (the type keeps it for readers of older rows' meaning).
 */
export type StreamStatus = 'idle' | 'live' | 'ended';

export interface StreamRow {
  id: string;
  account_id: string;
  title: string;
  titles: string; // JSON object of title_en, title_ru, title_de, title_fr
  status: StreamStatus;
  quality: string;
  codec: string;
  region: string;
  stream_key_hash: Buffer;
  stream_key_enc: Buffer;
  metadata: string; // JSON object
  reconnect_window: number; // seconds
  recording: string | null; // JSON {podcastId, publish?}
  playback: 'public' | 'token';
  /** 1 when a token stream admits listener tokens minted with a publishable key (migration 018); 0 or absent otherwise. */
  playback_publishable_tokens?: number;
  /** `standard` (classic HLS) or `low` (LL-HLS), docs/behaviour.md §3. */
  latency_mode: 'standard' | 'low';
  created_at: number; // ms
  started_at: number | null;
  /** When the stream's last broadcast ended (ms), or null. */
  ended_at: number | null;
  /** JSON NowPlaying, or null (docs/behaviour.md §11). */
  now_playing?: string | null;
  /** JSON {episodeIds, order, silenceSeconds}, or null (docs/streams.md "Fallback", migration 014). */
  fallback?: string | null;
  /** Where the audio comes from now: 'live', 'fallback', or null (docs/streams.md "Fallback"). */
  source?: string | null;
  /** The stream's own Icecast mount (`/stream`), or null: docs/icecast.md "Mounts", migration 019. */
  icecast_mount?: string | null;
  /** Sample rate (Hz) and channels of the stream's last live source, or null (docs/streams.md "Fallback", migration 024). */
  live_sample_rate?: number | null;
  live_channels?: number | null;
  /** IANA time zone of the stream (migration 022, docs/streams.md "Listen again"); 'UTC' by default. */
  time_zone?: string;
  /** Hours of catch-up kept (0 = off): docs/behaviour.md "Catch-up radio", migration 020. */
  catch_up_hours?: number;
}

/** Prepared statements over `streams`. */
export class StreamsRepo {
  private readonly insertStmt;
  private readonly byId;
  private readonly byIdAnyAccount;
  private readonly updateStmt;
  private readonly deleteStmt;
  private readonly setKey;
  private readonly toLive;
  private readonly toIdle;
  private readonly liveAll;
  private readonly page;
  private readonly stamp;
  private readonly setNp;
  private readonly changeListeners = new Set<(id: string) => void>();

  constructor(readonly db: Database) {
    this.insertStmt = db.prepare(`INSERT INTO streams (id, account_id, title, titles, status, quality, codec, region, stream_key_hash,
      stream_key_enc, metadata, reconnect_window, recording, playback, latency_mode, created_at, started_at, ended_at, fallback,
      playback_publishable_tokens)
      VALUES (@id, @account_id, @title, @titles, @status, @quality, @codec, @region, @stream_key_hash, @stream_key_enc, @metadata,
      @reconnect_window, @recording, @playback, @latency_mode, @created_at, @started_at, @ended_at, @fallback, @playback_publishable_tokens)`);
    this.byId = db.prepare('SELECT * FROM streams WHERE id = ? AND account_id = ?');
    this.byIdAnyAccount = db.prepare('SELECT * FROM streams WHERE id = ?');
    this.updateStmt = db.prepare(`UPDATE streams SET title = @title, titles = @titles, quality = @quality, metadata = @metadata,
      reconnect_window = @reconnect_window, recording = @recording, playback = @playback, latency_mode = @latency_mode,
      fallback = @fallback, playback_publishable_tokens = @playback_publishable_tokens WHERE id = @id`);
    this.deleteStmt = db.prepare('DELETE FROM streams WHERE id = ?');
    this.setKey = db.prepare('UPDATE streams SET stream_key_hash = ?, stream_key_enc = ? WHERE id = ?');
    this.toLive = db.prepare("UPDATE streams SET status = 'live', started_at = ? WHERE id = ? AND status = 'idle'");
    this.toIdle = db.prepare("UPDATE streams SET status = 'idle', ended_at = ? WHERE id = ? AND status = 'live'");
    this.liveAll = db.prepare("SELECT * FROM streams WHERE status = 'live'");
    this.page = paginator<StreamRow>(db, 'streams', 'account_id = @accountId AND (@status IS NULL OR status = @status)');
    this.setNp = db.prepare('UPDATE streams SET now_playing = ? WHERE id = ?');
    this.stamp = db.prepare('SELECT total_changes() * 4294967296 + (SELECT data_version FROM pragma_data_version)').pluck();
  }

  /**
   * A number that changes whenever this connection wrote or another committed (`total_changes()`
   * and `PRAGMA data_version`): read caches compare it to know they are stale.
   */
  changeStamp(): number {
    return this.stamp.get() as number;
  }

  /**
   * Calls `fn(id)` synchronously after each `update` or `delete` of stream `id` (its playback, its
   * account or its existence may have changed), so caches of what a stream allows drop it at once
   * (docs/behaviour.md §13). A throwing `fn` is not the writer's failure: it is skipped.
   * @returns a function that stops the calls
   */
  onChange(fn: (id: string) => void): () => void {
    this.changeListeners.add(fn);
    return () => this.changeListeners.delete(fn);
  }

  private changed(id: string): void {
    for (const fn of this.changeListeners) {
      try {
        fn(id);
      } catch {
        // A cache that cannot drop an entry catches up by its own expiry.
      }
    }
  }

  /** @throws SqliteError SQLITE_CONSTRAINT_UNIQUE when another stream has `icecast_mount` (nothing is inserted) */
  insert(row: StreamRow): void {
    this.db.transaction(() => {
      this.insertStmt.run({ ...row, fallback: row.fallback ?? null, playback_publishable_tokens: row.playback_publishable_tokens ?? 0 });
      if (row.icecast_mount != null) this.setIcecastMount(row.id, row.icecast_mount);
      if (row.time_zone !== undefined) this.setTimeZone(row.id, row.time_zone);
      if (row.catch_up_hours) this.setCatchUpHours(row.id, row.catch_up_hours);
    })();
  }
  /** The stream `id` of `accountId`, or undefined. */
  get(id: string, accountId: string): StreamRow | undefined {
    return this.byId.get(id, accountId) as StreamRow | undefined;
  }
  /** The stream `id` of any account (ingest looks streams up by the id in the RTMP app path). */
  getAny(id: string): StreamRow | undefined {
    return this.byIdAnyAccount.get(id) as StreamRow | undefined;
  }
  /** @throws SqliteError SQLITE_CONSTRAINT_UNIQUE when another stream has `icecast_mount` (nothing is changed) */
  update(row: StreamRow): void {
    this.db.transaction(() => {
      this.updateStmt.run({ ...row, fallback: row.fallback ?? null, playback_publishable_tokens: row.playback_publishable_tokens ?? 0 });
      if (row.icecast_mount !== undefined) this.setIcecastMount(row.id, row.icecast_mount);
      if (row.time_zone !== undefined) this.setTimeZone(row.id, row.time_zone);
      if (row.catch_up_hours !== undefined) this.setCatchUpHours(row.id, row.catch_up_hours);
    })();
    this.changed(row.id);
  }
  /** Sets the stream's IANA time zone (canonical name). */
  setTimeZone(id: string, timeZone: string): void {
    this.db.prepare('UPDATE streams SET time_zone = ? WHERE id = ?').run(timeZone, id);
  }
  /** Sets (null: removes) the stream's own Icecast mount. @throws SqliteError SQLITE_CONSTRAINT_UNIQUE when another stream has it */
  setIcecastMount(id: string, mount: string | null): void {
    this.db.prepare('UPDATE streams SET icecast_mount = ? WHERE id = ?').run(mount, id);
  }
  /** Sets the stream's catch-up window (hours, 0–168; docs/behaviour.md "Catch-up radio"). */
  setCatchUpHours(id: string, hours: number): void {
    this.db.prepare('UPDATE streams SET catch_up_hours = ? WHERE id = ?').run(hours, id);
  }
  /** The stream whose Icecast mount is `mount` (exactly, case-sensitive), or undefined (docs/icecast.md "Mounts"). */
  byIcecastMount(mount: string): StreamRow | undefined {
    return this.db.prepare('SELECT * FROM streams WHERE icecast_mount = ?').get(mount) as StreamRow | undefined;
  }
  /** Whether some stream's key hashes to `hash` (SHA-256 of the key; indexed, migration 019). */
  hasKeyHash(hash: Buffer): boolean {
    return this.db.prepare('SELECT 1 FROM streams WHERE stream_key_hash = ? LIMIT 1').get(hash) !== undefined;
  }
  /** Sets where the stream's audio comes from now (docs/streams.md "Fallback"); false when there is no such stream. */
  setSource(id: string, source: string | null): boolean {
    return this.db.prepare('UPDATE streams SET source = ? WHERE id = ?').run(source, id).changes === 1;
  }
  /** At start-up: forgets every stored `source` (nothing plays yet) and answers the ids of the streams with a fallback. */
  resetSources(): string[] {
    this.db.prepare('UPDATE streams SET source = NULL WHERE source IS NOT NULL').run();
    return this.db.prepare('SELECT id FROM streams WHERE fallback IS NOT NULL ORDER BY seq').pluck().all() as string[];
  }
  /** The ids of the streams with a fallback, in creation order (nothing changed). */
  withFallback(): string[] {
    return this.db.prepare('SELECT id FROM streams WHERE fallback IS NOT NULL ORDER BY seq').pluck().all() as string[];
  }
  delete(id: string): void {
    this.deleteStmt.run(id);
    this.changed(id);
  }
  setStreamKey(id: string, hash: Buffer, enc: Buffer): void {
    this.setKey.run(hash, enc, id);
  }
  /** Sets the stream's now-playing JSON (null clears it); false when there is no such stream. */
  setNowPlaying(id: string, json: string | null): boolean {
    return this.setNp.run(json, id).changes === 1;
  }
  /** idle → live (a broadcast starts; `started_at` is its start); false when the stream was not idle. */
  markLive(id: string, at: number): boolean {
    return this.toLive.run(at, id).changes === 1;
  }
  /** live → idle (the broadcast ended at `at`, stored as `ended_at`); false when the stream was not live. */
  markIdle(id: string, at: number): boolean {
    return this.toIdle.run(at, id).changes === 1;
  }
  /** Stores the sample rate (Hz) and channels of the stream's last live source (migration 024). */
  setLiveFormat(id: string, sampleRate: number, channels: number): void {
    this.db.prepare('UPDATE streams SET live_sample_rate = ?, live_channels = ? WHERE id = ?').run(sampleRate, channels, id);
  }
  /** Every stream listeners can hear now: `live`, or playing its fallback (docs/icecast.md "Listeners"). */
  allOnAir(): StreamRow[] {
    return this.db.prepare("SELECT * FROM streams WHERE status = 'live' OR source = 'fallback' ORDER BY seq").all() as StreamRow[];
  }
  /** Every stream left `live` (at start-up: publishers are gone after a restart). */
  allLive(): StreamRow[] {
    return this.liveAll.all() as StreamRow[];
  }
  list(accountId: string, status: StreamStatus | undefined, q: PageQuery): Page<StreamRow> {
    return this.page({ accountId, status: status ?? null }, q);
  }

  /**
   * Streams recording into podcast `podcastId` (`recording.podcastId`), newest first, at most
   * `limit` (the feed's `podcast:liveItem`s). Appended for the podcasts feature.
   */
  recordingInto(podcastId: string, limit = 20): StreamRow[] {
    return this.db
      .prepare("SELECT * FROM streams WHERE recording IS NOT NULL AND json_extract(recording, '$.podcastId') = ? ORDER BY seq DESC LIMIT ?")
      .all(podcastId, limit) as StreamRow[];
  }
}
