-- listener sessions (HLS sessions, WebRTC peers) and per-stream listener totals (docs/behaviour.md §4)
-- No IP address is stored: the country is resolved at join and the address dropped.
CREATE TABLE listeners (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  stream_id TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (protocol IN ('hls','webrtc')),
  country TEXT,
  user_agent TEXT,
  connected_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  left_at INTEGER
);
CREATE INDEX listeners_stream ON listeners(stream_id, seq);
CREATE INDEX listeners_open ON listeners(left_at) WHERE left_at IS NULL;
CREATE TABLE stream_listener_stats (
  stream_id TEXT PRIMARY KEY,
  peak_listeners INTEGER NOT NULL DEFAULT 0,
  total_listeners INTEGER NOT NULL DEFAULT 0,
  -- summed durations (ms) of the sessions that have left
  left_duration_ms INTEGER NOT NULL DEFAULT 0,
  left_sessions INTEGER NOT NULL DEFAULT 0
);
