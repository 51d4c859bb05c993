-- Episode transcripts, the Podcasting 2.0 feed tags of podcasts and episodes, and feed-update
-- pings (docs/podcasts.md "Transcripts", "Feed completeness", "Feed-update notifications").
-- JSON columns hold arrays as the API gives them; '[]' = none.
ALTER TABLE episodes ADD COLUMN transcript TEXT;          -- the document as served (UTF-8), or NULL
ALTER TABLE episodes ADD COLUMN transcript_type TEXT;     -- text/vtt | application/x-subrip | application/json
ALTER TABLE episodes ADD COLUMN persons TEXT NOT NULL DEFAULT '[]';
ALTER TABLE episodes ADD COLUMN soundbites TEXT NOT NULL DEFAULT '[]';
ALTER TABLE podcasts ADD COLUMN persons TEXT NOT NULL DEFAULT '[]';
ALTER TABLE podcasts ADD COLUMN txt TEXT NOT NULL DEFAULT '[]';
ALTER TABLE podcasts ADD COLUMN podroll TEXT NOT NULL DEFAULT '[]';

-- A feed change to announce: the "event" of the internal deliveries (WebSub hub, notify URLs) that
-- the webhook engine delivers from `webhook_deliveries` (event_id = feed_pings.id) with the same
-- durable schedule as webhooks.
CREATE TABLE feed_pings (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  podcast_id TEXT NOT NULL,
  feed_url TEXT NOT NULL,
  reason TEXT NOT NULL CHECK (reason IN ('update','live','liveEnd')),
  created_at INTEGER NOT NULL
);
