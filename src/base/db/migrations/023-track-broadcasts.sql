-- Each track of the play log belongs to the broadcast whose audio it names (docs/behaviour.md §11):
-- `broadcast_id` is that broadcast, or NULL for a track that played outside every broadcast (the
-- fallback while the stream is idle). `fallback` is 1 for a fallback episode's title: it belongs to
-- no broadcast, also when the fallback plays within one (a reconnect window, a silence). Tracks
-- stored before this version belong to the broadcast that ran when they started.
ALTER TABLE tracks ADD COLUMN broadcast_id TEXT;
ALTER TABLE tracks ADD COLUMN fallback INTEGER NOT NULL DEFAULT 0;
UPDATE tracks SET broadcast_id = (
  SELECT b.id FROM broadcasts b
  WHERE b.stream_id = tracks.stream_id AND tracks.started_at >= b.started_at AND (b.ended_at IS NULL OR tracks.started_at <= b.ended_at)
  ORDER BY b.seq DESC LIMIT 1
);
CREATE INDEX tracks_broadcast ON tracks(broadcast_id, seq) WHERE broadcast_id IS NOT NULL;
