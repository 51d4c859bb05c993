-- listener sessions gain the `icecast` protocol (progressive listening, docs/behaviour.md §10): SQLite
-- cannot change a CHECK constraint, so the table is rebuilt with the same rows and indexes.
CREATE TABLE listeners_new (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  stream_id TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (protocol IN ('hls','webrtc','icecast')),
  country TEXT,
  user_agent TEXT,
  connected_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  left_at INTEGER
);
INSERT INTO listeners_new (seq, id, account_id, stream_id, protocol, country, user_agent, connected_at, last_seen_at, left_at)
  SELECT seq, id, account_id, stream_id, protocol, country, user_agent, connected_at, last_seen_at, left_at FROM listeners;
DROP TABLE listeners;
ALTER TABLE listeners_new RENAME TO listeners;
CREATE INDEX listeners_stream ON listeners(stream_id, seq);
CREATE INDEX listeners_open ON listeners(left_at) WHERE left_at IS NULL;
