/**
 * The catch-up index (migration 020, docs/behaviour.md "Catch-up radio"): per stream and layer, the
 * HLS segments kept on disk, by media sequence number and by time, and each stream's
 * `catch_up_hours`. The only SQL of the feature. Times are Unix milliseconds; every query is
 * answered from an index (a range or a point), never a scan of the table.
 */
import type { Database } from './database.js';

/** One kept segment. `discontinuity` is 1 when it follows an `EXT-X-DISCONTINUITY`. */
export interface CatchUpSegmentRow {
  stream_id: string;
  layer: string;
  sequence: number;
  start_ms: number;
  duration_ms: number;
  discontinuity: number;
  discontinuity_sequence: number;
  init_id: string;
  ext: 'm4s' | 'ts';
  broadcast_id: string | null;
  bytes: number;
}

/** A title of the play log as catch-up playlists show it (`startMs`: when it aired). */
export interface CatchUpTitle {
  id: string;
  startMs: number;
  title: string;
  artist: string | null;
  album: string | null;
  url: string | null;
}

/** Segments one answer lists at most (a week of 2 s segments is 302 400: a playlist never holds more). */
export const MAX_ROWS = 400_000;

/** Prepared statements over `catch_up_segments` and `streams.catch_up_hours`. */
export class CatchUpRepo {
  private readonly s;

  constructor(readonly db: Database) {
    this.s = {
      insert: db.prepare(`INSERT OR IGNORE INTO catch_up_segments (stream_id, layer, sequence, start_ms, duration_ms, discontinuity,
        discontinuity_sequence, init_id, ext, broadcast_id, bytes)
        SELECT @stream_id, @layer, @sequence, @start_ms, @duration_ms, @discontinuity, @discontinuity_sequence, @init_id, @ext,
          @broadcast_id, @bytes WHERE EXISTS (SELECT 1 FROM streams WHERE id = @stream_id)`),
      hours: db.prepare('SELECT catch_up_hours FROM streams WHERE id = ?').pluck(),
      setHours: db.prepare('UPDATE streams SET catch_up_hours = ? WHERE id = ?'),
      on: db.prepare('SELECT id, catch_up_hours AS hours FROM streams WHERE catch_up_hours > 0'),
      // Skip-scans of the primary key (one seek per distinct value), not a read of every row.
      layers: db.prepare(`WITH RECURSIVE l(layer) AS (
          SELECT MIN(layer) FROM catch_up_segments WHERE stream_id = @id
          UNION ALL SELECT (SELECT MIN(layer) FROM catch_up_segments WHERE stream_id = @id AND layer > l.layer) FROM l WHERE l.layer IS NOT NULL)
        SELECT layer FROM l WHERE layer IS NOT NULL`).pluck(),
      streams: db.prepare(`WITH RECURSIVE s(id) AS (
          SELECT MIN(stream_id) FROM catch_up_segments
          UNION ALL SELECT (SELECT MIN(stream_id) FROM catch_up_segments WHERE stream_id > s.id) FROM s WHERE s.id IS NOT NULL)
        SELECT id FROM s WHERE id IS NOT NULL`).pluck(),
      // From the segment that holds `from` (or the first after it) to the first that starts at or after `to`.
      span: db.prepare(`SELECT * FROM catch_up_segments WHERE stream_id = @streamId AND layer = @layer
        AND start_ms >= (SELECT COALESCE(MAX(start_ms), 0) FROM catch_up_segments WHERE stream_id = @streamId AND layer = @layer AND start_ms <= @from)
        AND start_ms < @to ORDER BY start_ms, sequence LIMIT ${MAX_ROWS}`),
      broadcast: db.prepare(`SELECT * FROM catch_up_segments WHERE broadcast_id = ? AND layer = ? ORDER BY sequence LIMIT ${MAX_ROWS}`),
      broadcastHas: db.prepare('SELECT 1 FROM catch_up_segments WHERE broadcast_id = ? LIMIT 1').pluck(),
      one: db.prepare('SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND sequence = ?'),
      initUsed: db.prepare('SELECT 1 FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND init_id = ? LIMIT 1').pluck(),
      older: db.prepare('SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND start_ms < ? ORDER BY start_ms LIMIT ?'),
      oldest: db.prepare('SELECT * FROM catch_up_segments WHERE start_ms < ? ORDER BY start_ms LIMIT ?'),
      delete: db.prepare('DELETE FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND sequence = ?'),
      bytes: db.prepare('SELECT COALESCE(SUM(bytes), 0) FROM catch_up_segments WHERE stream_id = ?').pluck(),
      forget: db.prepare('DELETE FROM catch_up_segments WHERE stream_id = ?'),
      firstFrom: db.prepare('SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND start_ms >= ? ORDER BY start_ms, sequence LIMIT 1'),
      newest: db.prepare('SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? ORDER BY start_ms DESC, sequence DESC LIMIT 1'),
      count: db.prepare('SELECT COUNT(*) FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND start_ms >= ? AND start_ms < ?').pluck(),
      from: db.prepare(`SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND start_ms >= ? ORDER BY start_ms, sequence LIMIT ${MAX_ROWS}`),
      titles: db.prepare(`SELECT id, started_at AS startMs, title, artist, album, url FROM tracks WHERE stream_id = @streamId AND started_at < @to
        AND started_at >= COALESCE((SELECT MAX(started_at) FROM tracks WHERE stream_id = @streamId AND started_at <= @from), @from)
        ORDER BY started_at, seq LIMIT 5000`),
    };
  }

  /** Indexes segments whose files are written, in one transaction (a repeat changes nothing; a deleted stream's: nothing). @throws SqliteError when SQLite cannot write now */
  insertMany(rows: readonly CatchUpSegmentRow[]): void {
    this.db.transaction(() => {
      for (const row of rows) this.s.insert.run(row);
    })();
  }

  /** Indexes a segment whose file is written (a repeat changes nothing; a deleted stream's: nothing). @throws SqliteError when SQLite cannot write now */
  insert(row: CatchUpSegmentRow): void {
    this.s.insert.run(row);
  }

  /** The stream's catch-up window (hours; 0 = off, also for a stream that does not exist). */
  hours(streamId: string): number {
    return (this.s.hours.get(streamId) as number | undefined) ?? 0;
  }

  /** Sets the stream's catch-up window (hours, 0–168: the column's CHECK). */
  setHours(streamId: string, hours: number): void {
    this.s.setHours.run(hours, streamId);
  }

  /** The streams with catch-up on, and their windows (hours). */
  enabled(): Array<{ id: string; hours: number }> {
    return this.s.on.all() as Array<{ id: string; hours: number }>;
  }

  /** The layers the stream has segments of. */
  layers(streamId: string): string[] {
    return this.s.layers.all({ id: streamId }) as string[];
  }

  /**
   * The layer's segments that overlap [`fromMs`, `toMs`): from the one that starts at or before
   * `fromMs` (the one playing then), in time order (at most MAX_ROWS).
   */
  span(streamId: string, layer: string, fromMs: number, toMs: number): CatchUpSegmentRow[] {
    return this.s.span.all({ streamId, layer, from: fromMs, to: toMs }) as CatchUpSegmentRow[];
  }

  /** The layer's segments of broadcast `broadcastId`, in order. */
  ofBroadcast(broadcastId: string, layer: string): CatchUpSegmentRow[] {
    return this.s.broadcast.all(broadcastId, layer) as CatchUpSegmentRow[];
  }

  /** Whether any segment of broadcast `broadcastId` is kept. */
  hasBroadcast(broadcastId: string): boolean {
    return this.s.broadcastHas.get(broadcastId) !== undefined;
  }

  /** One kept segment, or undefined. */
  get(streamId: string, layer: string, sequence: number): CatchUpSegmentRow | undefined {
    return this.s.one.get(streamId, layer, sequence) as CatchUpSegmentRow | undefined;
  }

  /** Whether a kept segment of the layer needs init section `initId`. */
  initUsed(streamId: string, layer: string, initId: string): boolean {
    return this.s.initUsed.get(streamId, layer, initId) !== undefined;
  }

  /** Up to `limit` of the layer's segments that start before `beforeMs`, oldest first. */
  olderThan(streamId: string, layer: string, beforeMs: number, limit: number): CatchUpSegmentRow[] {
    return this.s.older.all(streamId, layer, beforeMs, limit) as CatchUpSegmentRow[];
  }

  /** Up to `limit` of all streams' segments that start before `beforeMs`, oldest first. */
  oldest(beforeMs: number, limit: number): CatchUpSegmentRow[] {
    return this.s.oldest.all(beforeMs, limit) as CatchUpSegmentRow[];
  }

  /** Removes one segment from the index. */
  delete(streamId: string, layer: string, sequence: number): void {
    this.s.delete.run(streamId, layer, sequence);
  }

  /** Bytes of the stream's kept segments. */
  bytes(streamId: string): number {
    return this.s.bytes.get(streamId) as number;
  }

  /** Streams with kept segments whose catch-up is off now (or that were deleted). */
  orphans(): string[] {
    const on = new Set(this.enabled().map((e) => e.id));
    return (this.s.streams.all() as string[]).filter((id) => !on.has(id));
  }

  /** The layer's first segment that starts at or after `fromMs`, or undefined. */
  firstFrom(streamId: string, layer: string, fromMs: number): CatchUpSegmentRow | undefined {
    return this.s.firstFrom.get(streamId, layer, fromMs) as CatchUpSegmentRow | undefined;
  }

  /** The layer's newest segment, or undefined. */
  newest(streamId: string, layer: string): CatchUpSegmentRow | undefined {
    return this.s.newest.get(streamId, layer) as CatchUpSegmentRow | undefined;
  }

  /** How many of the layer's segments start in [`fromMs`, `toMs`). */
  count(streamId: string, layer: string, fromMs: number, toMs: number): number {
    return this.s.count.get(streamId, layer, fromMs, toMs) as number;
  }

  /** The layer's segments that start at or after `fromMs`, in time order (at most MAX_ROWS). */
  from(streamId: string, layer: string, fromMs: number): CatchUpSegmentRow[] {
    return this.s.from.all(streamId, layer, fromMs) as CatchUpSegmentRow[];
  }

  /**
   * The play log's titles (docs/behaviour.md §11) that aired in [`fromMs`, `toMs`): the one playing
   * at `fromMs`, then those that started later (at most 5000).
   */
  titles(streamId: string, fromMs: number, toMs: number): CatchUpTitle[] {
    return this.s.titles.all({ streamId, from: fromMs, to: toMs }) as CatchUpTitle[];
  }

  /** Removes every segment of the stream from the index. */
  forget(streamId: string): void {
    this.s.forget.run(streamId);
  }
}
