/**
 * Catch-up radio's SQL (docs/behaviour.md "Catch-up radio"): each stream's `catch_up_hours`
 * (migration 020), the play log's titles by time for the catch-up playlists, and the index of the
 * earlier storage layout — a row of `catch_up_segments` per segment file — read once at start to
 * convert it to layer-hour files (src/delivery/catch-up/legacy.ts) and then emptied. The kept
 * segments themselves are indexed in the layer-hours' sidecars, not here. Times are Unix
 * milliseconds; every query is answered from an index (a range or a point), never a scan.
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

/** Rows of the earlier layout read per batch. */
const LEGACY_BATCH = 2000;

/** Prepared statements over `streams.catch_up_hours`, `tracks` and the earlier layout's `catch_up_segments`. */
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
      rows: db.prepare(`SELECT * FROM catch_up_segments WHERE stream_id = ? AND layer = ? AND sequence > ? ORDER BY sequence LIMIT ${LEGACY_BATCH}`),
      forget: db.prepare('DELETE FROM catch_up_segments WHERE stream_id = ? AND layer = ?'),
      titles: db.prepare(`SELECT id, started_at AS startMs, title, artist, album, url FROM tracks WHERE stream_id = @streamId AND started_at < @to
        AND started_at >= COALESCE((SELECT MAX(started_at) FROM tracks WHERE stream_id = @streamId AND started_at <= @from), @from)
        ORDER BY started_at, seq LIMIT 5000`),
    };
  }

  /** Indexes a segment file of the earlier layout (tests and benchmarks make such a data directory). @throws SqliteError when SQLite cannot write now */
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

  /** Streams with segments in the earlier layout's index. */
  legacyStreams(): string[] {
    return this.s.streams.all() as string[];
  }

  /** The layers of a stream in the earlier layout's index. */
  legacyLayers(streamId: string): string[] {
    return this.s.layers.all({ id: streamId }) as string[];
  }

  /** Up to LEGACY_BATCH rows of the layer in the earlier layout's index above media sequence number `after`, in order. */
  legacyRows(streamId: string, layer: string, after: number): CatchUpSegmentRow[] {
    return this.s.rows.all(streamId, layer, after) as CatchUpSegmentRow[];
  }

  /** Removes the layer's rows from the earlier layout's index. */
  forgetLegacy(streamId: string, layer: string): void {
    this.s.forget.run(streamId, layer);
  }

  /**
   * The play log's titles (docs/behaviour.md §11) that aired in [`fromMs`, `toMs`): the one playing
   * at `fromMs`, then those that started later (at most 5000).
   */
  titles(streamId: string, fromMs: number, toMs: number): CatchUpTitle[] {
    return this.s.titles.all({ streamId, from: fromMs, to: toMs }) as CatchUpTitle[];
  }
}
