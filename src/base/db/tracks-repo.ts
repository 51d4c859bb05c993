/**
 * The play log (docs/behaviour.md §11, migration 008): one `tracks` row per now-playing change of a
 * stream, ended by the next change or the stream's end, with its listener figures. Times in ms
 * since the epoch. The only SQL of the play log.
 */
import type { Database } from './database.js';
import { paginator, UnknownCursorError, type Page, type PageQuery } from './paginate.js';

/** A `tracks` row. `countries`: JSON `[{country, listeners}]` (country null = unknown). */
export interface TrackRow {
  id: string;
  account_id: string;
  stream_id: string;
  title: string;
  artist: string | null;
  album: string | null;
  url: string | null;
  artwork_url: string | null;
  started_at: number;
  ended_at: number | null;
  listeners_at_start: number;
  peak_listeners: number;
  countries: string;
  /** The broadcast whose audio the track names; null outside every broadcast (migration 023). */
  broadcast_id: string | null;
  /** 1 for a fallback episode's title (never a broadcast's), else 0. */
  fallback: number;
}

/** Prepared statements over `tracks`. */
export class TracksRepo {
  private readonly insertStmt;
  private readonly openStmt;
  private readonly allOpenStmt;
  private readonly endStmt;
  private readonly listenersStmt;
  private readonly ofStreamStmt;
  private readonly inStreamStmt;
  private readonly ofBroadcastStmt;
  private readonly countStmt;
  private readonly adoptStmt;
  private readonly page;

  constructor(readonly db: Database) {
    this.insertStmt = db.prepare(`INSERT INTO tracks (id, account_id, stream_id, title, artist, album, url, artwork_url, started_at, ended_at,
      listeners_at_start, peak_listeners, countries, broadcast_id, fallback) VALUES (@id, @account_id, @stream_id, @title, @artist, @album, @url, @artwork_url,
      @started_at, @ended_at, @listeners_at_start, @peak_listeners, @countries, @broadcast_id, @fallback)`);
    this.openStmt = db.prepare('SELECT * FROM tracks WHERE stream_id = ? AND ended_at IS NULL ORDER BY seq DESC LIMIT 1');
    this.allOpenStmt = db.prepare('SELECT * FROM tracks WHERE ended_at IS NULL ORDER BY seq');
    this.endStmt = db.prepare('UPDATE tracks SET ended_at = ?, peak_listeners = ?, countries = ? WHERE id = ? AND ended_at IS NULL');
    this.listenersStmt = db.prepare('UPDATE tracks SET peak_listeners = ?, countries = ? WHERE id = ? AND ended_at IS NULL');
    this.ofStreamStmt = db.prepare('SELECT * FROM tracks WHERE stream_id = ? ORDER BY started_at, seq');
    this.inStreamStmt = db.prepare('SELECT 1 FROM tracks WHERE id = ? AND stream_id = ?').pluck();
    this.ofBroadcastStmt = db.prepare('SELECT * FROM tracks WHERE broadcast_id = ? ORDER BY started_at, seq');
    this.countStmt = db.prepare('SELECT COUNT(*) FROM tracks WHERE broadcast_id = ?').pluck();
    this.adoptStmt = db.prepare(
      'UPDATE tracks SET broadcast_id = @broadcastId, started_at = MAX(started_at, @at) WHERE stream_id = @streamId AND ended_at IS NULL AND broadcast_id IS NULL AND fallback = 0',
    );
    this.page = paginator<TrackRow>(db, 'tracks', 'account_id = @accountId AND stream_id = @streamId');
  }

  insert(row: TrackRow): void {
    this.insertStmt.run(row);
  }

  /** The stream's running track (not ended), or undefined. */
  open(streamId: string): TrackRow | undefined {
    return this.openStmt.get(streamId) as TrackRow | undefined;
  }

  /** Every running track (at start: what an earlier run left running). */
  allOpen(): TrackRow[] {
    return this.allOpenStmt.all() as TrackRow[];
  }

  /** Ends a running track at `endedAt` with its final listener figures; false when it had ended. */
  end(id: string, endedAt: number, peak: number, countries: string): boolean {
    return this.endStmt.run(endedAt, peak, countries, id).changes === 1;
  }

  /** Stores a running track's listener figures so far (an ended track keeps its final ones). */
  setListeners(id: string, peak: number, countries: string): void {
    this.listenersStmt.run(peak, countries, id);
  }

  /** Every track of a stream, oldest first (the chapters of its recording). */
  ofStream(streamId: string): TrackRow[] {
    return this.ofStreamStmt.all(streamId) as TrackRow[];
  }

  /**
   * A page of a stream's tracks, newest first.
   * @throws UnknownCursorError when the cursor is not a track of this stream
   */
  list(accountId: string, streamId: string, q: PageQuery): Page<TrackRow> {
    for (const param of ['after', 'before'] as const) {
      const id = q[param];
      if (id !== undefined && this.inStreamStmt.get(id, streamId) === undefined) throw new UnknownCursorError(param, id);
    }
    return this.page({ accountId, streamId }, q);
  }

  /**
   * A page of the tracks of broadcast `broadcastId` of a stream, newest first (docs/streams.md).
   * @throws UnknownCursorError when the cursor is not a track of this stream
   */
  listOfBroadcast(accountId: string, streamId: string, broadcastId: string, q: PageQuery): Page<TrackRow> {
    for (const param of ['after', 'before'] as const) {
      const id = q[param];
      if (id !== undefined && this.inStreamStmt.get(id, streamId) === undefined) throw new UnknownCursorError(param, id);
    }
    this.pageOfBroadcast ??= paginator<TrackRow>(this.db, 'tracks', 'account_id = @accountId AND stream_id = @streamId AND broadcast_id = @broadcastId');
    return this.pageOfBroadcast({ accountId, streamId, broadcastId }, q);
  }
  private pageOfBroadcast: ReturnType<typeof paginator<TrackRow>> | undefined;

  /** Every track of broadcast `broadcastId`, oldest first (the chapters of its recording). */
  ofBroadcast(broadcastId: string): TrackRow[] {
    return this.ofBroadcastStmt.all(broadcastId) as TrackRow[];
  }

  /** How many tracks broadcast `broadcastId` has. */
  countOfBroadcast(broadcastId: string): number {
    return this.countStmt.get(broadcastId) as number;
  }

  /**
   * Broadcast `broadcastId` of the stream started at `at` (ms): the stream's running track, when it
   * is a source's title that belongs to no broadcast yet (set before the first audio), becomes the
   * broadcast's, starting no earlier than `at`. False when there was none.
   */
  adopt(streamId: string, broadcastId: string, at: number): boolean {
    return this.adoptStmt.run({ streamId, broadcastId, at }).changes > 0;
  }
}
