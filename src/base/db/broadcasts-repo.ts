/**
 * Broadcasts (migrations 013, 015 and 023, docs/streams.md): one row per stretch of a stream from `live`
 * to the end of its reconnect window, with its listener figures, its integrated loudness and the
 * episode its recording became. Times in ms since the epoch.
 */
import type { Database } from './database.js';
import { paginator, type Page, type PageQuery } from './paginate.js';

/** One broadcast row. `countries` is JSON [{country, listeners}]. */
export interface BroadcastRow {
  id: string;
  account_id: string;
  stream_id: string;
  started_at: number;
  /** Null while the broadcast runs. */
  ended_at: number | null;
  peak_listeners: number;
  total_listeners: number;
  /** Summed listening time of the broadcast's listeners (ms). */
  listener_ms: number;
  countries: string;
  episode_id: string | null;
  /** Integrated loudness (LUFS, ITU-R BS.1770-4) so far or in the end; null when not measured. */
  integrated_lufs: number | null;
}

/** The listener figures of a broadcast, as they are written. */
export interface BroadcastFigures {
  peak: number;
  total: number;
  listenerMs: number;
  /** JSON [{country, listeners}]. */
  countries: string;
  /** Integrated loudness (LUFS), or null when not measured. */
  integratedLufs: number | null;
}

/** Prepared statements over `broadcasts`. */
export class BroadcastsRepo {
  private readonly insertStmt;
  private readonly byId;
  private readonly openOf;
  private readonly openAll;
  private readonly latestOf;
  private readonly endStmt;
  private readonly figuresStmt;
  private readonly episodeStmt;
  private readonly forRecordingStmt;
  private readonly trackCountStmt;
  private readonly page;

  constructor(readonly db: Database) {
    this.insertStmt = db.prepare(`INSERT INTO broadcasts (id, account_id, stream_id, started_at, ended_at, peak_listeners, total_listeners, listener_ms, countries, episode_id, integrated_lufs)
      VALUES (@id, @account_id, @stream_id, @started_at, @ended_at, @peak_listeners, @total_listeners, @listener_ms, @countries, @episode_id, @integrated_lufs)`);
    this.byId = db.prepare('SELECT * FROM broadcasts WHERE id = ? AND stream_id = ? AND account_id = ?');
    this.openOf = db.prepare('SELECT * FROM broadcasts WHERE stream_id = ? AND ended_at IS NULL ORDER BY seq DESC LIMIT 1');
    this.openAll = db.prepare('SELECT * FROM broadcasts WHERE ended_at IS NULL ORDER BY seq');
    this.latestOf = db.prepare('SELECT * FROM broadcasts WHERE stream_id = ? ORDER BY seq DESC LIMIT 1');
    this.endStmt = db.prepare('UPDATE broadcasts SET ended_at = @at, peak_listeners = @peak, total_listeners = @total, listener_ms = @listenerMs, countries = @countries, integrated_lufs = @integratedLufs WHERE id = @id AND ended_at IS NULL');
    this.figuresStmt = db.prepare('UPDATE broadcasts SET peak_listeners = @peak, total_listeners = @total, listener_ms = @listenerMs, countries = @countries, integrated_lufs = @integratedLufs WHERE id = @id');
    this.episodeStmt = db.prepare('UPDATE broadcasts SET episode_id = ? WHERE id = ?');
    this.forRecordingStmt = db.prepare('SELECT * FROM broadcasts WHERE stream_id = ? AND started_at >= ? ORDER BY seq ASC LIMIT 1');
    this.trackCountStmt = db.prepare('SELECT COUNT(*) FROM tracks WHERE broadcast_id = ?').pluck();
    this.page = paginator<BroadcastRow>(db, 'broadcasts', 'account_id = @accountId AND stream_id = @streamId');
  }

  insert(row: BroadcastRow): void {
    this.insertStmt.run(row);
  }
  /** Broadcast `id` of stream `streamId` of `accountId`, or undefined. */
  get(id: string, streamId: string, accountId: string): BroadcastRow | undefined {
    return this.byId.get(id, streamId, accountId) as BroadcastRow | undefined;
  }
  /** The stream's running broadcast (not ended), or undefined. */
  open(streamId: string): BroadcastRow | undefined {
    return this.openOf.get(streamId) as BroadcastRow | undefined;
  }
  /** Every running broadcast (at start-up: an earlier run left them running), oldest first. */
  allOpen(): BroadcastRow[] {
    return this.openAll.all() as BroadcastRow[];
  }
  /** The stream's newest broadcast, or undefined when it never went live. */
  latest(streamId: string): BroadcastRow | undefined {
    return this.latestOf.get(streamId) as BroadcastRow | undefined;
  }
  /** Ends running broadcast `id` at `at` with its final figures; false when it was not running. */
  end(id: string, at: number, f: BroadcastFigures): boolean {
    return this.endStmt.run({ id, at, ...f }).changes === 1;
  }
  /** Writes a running broadcast's listener figures and loudness so far. */
  setFigures(id: string, f: BroadcastFigures): void {
    this.figuresStmt.run({ id, ...f });
  }
  /** Links the episode the broadcast's recording became. */
  setEpisode(id: string, episodeId: string): void {
    this.episodeStmt.run(episodeId, id);
  }
  /** The first broadcast of the stream that started at or after `startedAt` (a recording opened then belongs to it). */
  firstSince(streamId: string, startedAt: number): BroadcastRow | undefined {
    return this.forRecordingStmt.get(streamId, startedAt) as BroadcastRow | undefined;
  }
  /** Tracks of broadcast `id` (docs/behaviour.md §11: the tracks whose audio it carried). */
  trackCount(id: string): number {
    return this.trackCountStmt.get(id) as number;
  }
  /** A page of the stream's broadcasts, newest first. @throws UnknownCursorError */
  list(accountId: string, streamId: string, q: PageQuery): Page<BroadcastRow> {
    return this.page({ accountId, streamId }, q);
  }
}
