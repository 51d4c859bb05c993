/**
 * Reserved HLS timeline positions (migration 016, docs/streams.md "One timeline"): per stream and
 * layer, the media sequence number and discontinuity sequence number a new run of the node starts
 * its next timeline at — above any number handed out before (RFC 8216 §6.2.1). The only SQL of
 * the feature. Times are Unix milliseconds.
 */
import type { Database } from './database.js';

/** One layer's reserved position: `sequence` and `discontinuity` are the first numbers not handed out. */
export interface TimelineRow {
  layer: string;
  sequence: number;
  discontinuity: number;
}

/** Prepared statements over `hls_timelines`. */
export class TimelinesRepo {
  private readonly s;

  constructor(readonly db: Database) {
    this.s = {
      load: db.prepare('SELECT layer, next_sequence AS sequence, next_discontinuity AS discontinuity FROM hls_timelines WHERE stream_id = ? ORDER BY layer'),
      // Only ever raised (a late or repeated write of a lower mark changes nothing), and only for a
      // stream that exists (a deleted stream's hub may still be finishing its last segments).
      reserve: db.prepare(`INSERT INTO hls_timelines (stream_id, layer, next_sequence, next_discontinuity, updated_at)
        SELECT @streamId, @layer, @sequence, @discontinuity, @now WHERE EXISTS (SELECT 1 FROM streams WHERE id = @streamId)
        ON CONFLICT (stream_id, layer) DO UPDATE SET next_sequence = MAX(next_sequence, excluded.next_sequence),
          next_discontinuity = MAX(next_discontinuity, excluded.next_discontinuity), updated_at = excluded.updated_at`),
    };
  }

  /** The reserved positions of stream `streamId`, by layer name (none: the stream never reserved any). */
  load(streamId: string): TimelineRow[] {
    return this.s.load.all(streamId) as TimelineRow[];
  }

  /**
   * Raises stream `streamId`'s layer `layer` to at least `sequence` / `discontinuity` (never
   * lowers). False when the stream does not exist (nothing written).
   * @throws SqliteError when SQLite cannot write now (busy, full: the caller retries)
   */
  reserve(streamId: string, layer: string, sequence: number, discontinuity: number, now: number): boolean {
    return this.s.reserve.run({ streamId, layer, sequence, discontinuity, now }).changes === 1;
  }
}
