-- The play log (docs/behaviour.md §11): one row per now-playing change of a stream, from the change to the
-- next one or the stream's end. `countries` is JSON [{country, listeners}] (distinct listeners per
-- country heard during the track; country null = unknown). Times in ms since the epoch.
CREATE TABLE tracks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  stream_id TEXT NOT NULL,
  title TEXT NOT NULL,
  artist TEXT,
  album TEXT,
  url TEXT,
  artwork_url TEXT,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  listeners_at_start INTEGER NOT NULL DEFAULT 0,
  peak_listeners INTEGER NOT NULL DEFAULT 0,
  countries TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX tracks_stream ON tracks(stream_id, seq);
CREATE INDEX tracks_open ON tracks(stream_id) WHERE ended_at IS NULL;
-- A recorded stream's draft episode carries Podcasting 2.0 JSON chapters, one per track (the
-- document as served, or NULL when the stream had no track).
ALTER TABLE episodes ADD COLUMN chapters TEXT;
