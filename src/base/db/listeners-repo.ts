/**
 * Listener sessions and per-stream listener totals (migration 005). Written in batches by the
 * listener registry (joins, leaves, last-seen updates), never per HLS request.
 */
import type { Database } from './database.js';

/** One listener session row. Times in ms since the epoch. No IP address is kept. */
export interface ListenerRow {
  id: string;
  account_id: string;
  stream_id: string;
  protocol: 'hls' | 'webrtc' | 'icecast';
  country: string | null;
  user_agent: string | null;
  connected_at: number;
  last_seen_at: number;
  left_at: number | null;
  /** `catch_up` for a listener of the catch-up playlists (migration 020); absent or `live` otherwise. */
  mode?: 'live' | 'catch_up';
}

/** Totals of one stream: peak concurrent, sessions ever, summed duration of sessions that left (ms). */
export interface ListenerTotals {
  peak: number;
  total: number;
  leftDurationMs: number;
  leftSessions: number;
}

/** Prepared statements over `listeners` and `stream_listener_stats`. */
export class ListenersRepo {
  private readonly insertStmt;
  private readonly seenStmt;
  private readonly leftStmt;
  private readonly ensureStats;
  private readonly joinStats;
  private readonly leftStats;
  private readonly peakStmt;
  private readonly totalsStmt;
  private readonly openStmt;

  constructor(readonly db: Database) {
    this.insertStmt = db.prepare(`INSERT INTO listeners (id, account_id, stream_id, protocol, country, user_agent, connected_at, last_seen_at, left_at)
      VALUES (@id, @account_id, @stream_id, @protocol, @country, @user_agent, @connected_at, @last_seen_at, NULL)`);
    this.seenStmt = db.prepare('UPDATE listeners SET last_seen_at = ? WHERE id = ? AND left_at IS NULL');
    this.leftStmt = db.prepare('UPDATE listeners SET last_seen_at = ?, left_at = ? WHERE id = ? AND left_at IS NULL');
    this.ensureStats = db.prepare('INSERT OR IGNORE INTO stream_listener_stats (stream_id) VALUES (?)');
    this.joinStats = db.prepare('UPDATE stream_listener_stats SET total_listeners = total_listeners + 1, peak_listeners = MAX(peak_listeners, ?) WHERE stream_id = ?');
    this.leftStats = db.prepare('UPDATE stream_listener_stats SET left_duration_ms = left_duration_ms + ?, left_sessions = left_sessions + 1 WHERE stream_id = ?');
    this.peakStmt = db.prepare('UPDATE stream_listener_stats SET peak_listeners = MAX(peak_listeners, ?) WHERE stream_id = ?');
    this.totalsStmt = db.prepare('SELECT peak_listeners AS peak, total_listeners AS total, left_duration_ms AS leftDurationMs, left_sessions AS leftSessions FROM stream_listener_stats WHERE stream_id = ?');
    this.openStmt = db.prepare('SELECT * FROM listeners WHERE left_at IS NULL ORDER BY seq');
  }

  /** Records a joined session and counts it (`concurrent` = listeners of the stream now, for the peak). */
  join(row: Omit<ListenerRow, 'left_at'>, concurrent: number): void {
    const { mode, ...fields } = row;
    this.insertStmt.run(fields);
    if (mode === 'catch_up') this.db.prepare("UPDATE listeners SET mode = 'catch_up' WHERE id = ?").run(row.id);
    this.ensureStats.run(row.stream_id);
    this.joinStats.run(concurrent, row.stream_id);
  }

  /** Records a leave: the session's last request at `lastSeenAt` (its duration runs to it). */
  leave(id: string, streamId: string, connectedAt: number, lastSeenAt: number, leftAt: number): void {
    if (this.leftStmt.run(lastSeenAt, leftAt, id).changes === 1) {
      this.ensureStats.run(streamId);
      this.leftStats.run(Math.max(0, lastSeenAt - connectedAt), streamId);
    }
  }

  /** Persists the last-seen time of an active session. */
  seen(id: string, lastSeenAt: number): void {
    this.seenStmt.run(lastSeenAt, id);
  }

  /** Raises the stored peak. */
  raisePeak(streamId: string, concurrent: number): void {
    this.ensureStats.run(streamId);
    this.peakStmt.run(concurrent, streamId);
  }

  /** Totals of a stream (zeros when it never had a listener). */
  totals(streamId: string): ListenerTotals {
    return (this.totalsStmt.get(streamId) as ListenerTotals | undefined) ?? { peak: 0, total: 0, leftDurationMs: 0, leftSessions: 0 };
  }

  /** Sessions never closed (left open by a crash or a kill), oldest first. */
  open(): ListenerRow[] {
    return this.openStmt.all() as ListenerRow[];
  }
}
