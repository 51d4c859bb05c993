-- Streams go live again and again (docs/streams.md): there is no terminal state any more, so a
-- stream an earlier version stored as `ended` is `idle` (ready for its next broadcast). Each
-- stretch from `live` to the end of the reconnect window is a broadcast. Times in ms since the
-- epoch; `listener_ms` sums the time each listener of the broadcast listened during it;
-- `countries` is JSON [{country, listeners}] (distinct listeners per country; null = unknown).
UPDATE streams SET status = 'idle' WHERE status = 'ended';
CREATE TABLE broadcasts (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  stream_id TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  peak_listeners INTEGER NOT NULL DEFAULT 0,
  total_listeners INTEGER NOT NULL DEFAULT 0,
  listener_ms INTEGER NOT NULL DEFAULT 0,
  countries TEXT NOT NULL DEFAULT '[]',
  episode_id TEXT
);
CREATE INDEX broadcasts_stream ON broadcasts(stream_id, seq);
CREATE INDEX broadcasts_open ON broadcasts(stream_id) WHERE ended_at IS NULL;
-- A stream that went live before this version had one broadcast: from its `started_at` to its
-- `ended_at` (still running when it is live), with the stream's listener totals and the episode
-- its recording became.
INSERT INTO broadcasts (id, account_id, stream_id, started_at, ended_at, peak_listeners, total_listeners, listener_ms, episode_id)
  SELECT 'brd_' || lower(hex(randomblob(12))), s.account_id, s.id, s.started_at,
         CASE WHEN s.status = 'live' THEN NULL ELSE COALESCE(s.ended_at, s.started_at) END,
         COALESCE(l.peak_listeners, 0), COALESCE(l.total_listeners, 0), COALESCE(l.left_duration_ms, 0),
         (SELECT e.id FROM episodes e WHERE e.source_stream_id = s.id ORDER BY e.seq DESC LIMIT 1)
  FROM streams s LEFT JOIN stream_listener_stats l ON l.stream_id = s.id
  WHERE s.started_at IS NOT NULL
  ORDER BY s.seq;
