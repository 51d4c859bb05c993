-- Catch-up radio (docs/behaviour.md "Catch-up radio"): a stream keeps the last `catch_up_hours` of
-- every layer's HLS segments on disk (0 = off, the default; at most a week).
ALTER TABLE streams ADD COLUMN catch_up_hours INTEGER NOT NULL DEFAULT 0 CHECK (catch_up_hours BETWEEN 0 AND 168);
-- The index by time of the segments kept: one row per segment of a layer, named by its media
-- sequence number (unique per stream and layer for ever: docs/streams.md "One timeline").
-- `start_ms` is its EXT-X-PROGRAM-DATE-TIME (ms since the epoch), `duration_ms` its EXTINF;
-- `discontinuity` = 1 when it follows an EXT-X-DISCONTINUITY, `discontinuity_sequence` its
-- discontinuity sequence number (RFC 8216 §4.3.3.3); `init_id` names its fMP4 init section ('' for
-- MPEG-TS); `broadcast_id` the broadcast it aired in (null: none known). The file lives at
-- `<dataDir>/catch-up/<stream_id>/<layer>/<sequence>.<m4s|ts>`; `bytes` is its size.
CREATE TABLE catch_up_segments (
  stream_id TEXT NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
  layer TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  start_ms INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  discontinuity INTEGER NOT NULL,
  discontinuity_sequence INTEGER NOT NULL,
  init_id TEXT NOT NULL,
  ext TEXT NOT NULL CHECK (ext IN ('m4s', 'ts')),
  broadcast_id TEXT,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (stream_id, layer, sequence)
) WITHOUT ROWID;
-- Searched by time (from/<t>, archive/<t>-<s>, the sweep) and by broadcast, never scanned.
CREATE INDEX catch_up_segments_time ON catch_up_segments (stream_id, layer, start_ms);
CREATE INDEX catch_up_segments_broadcast ON catch_up_segments (broadcast_id, layer, sequence) WHERE broadcast_id IS NOT NULL;
CREATE INDEX catch_up_segments_age ON catch_up_segments (start_ms);
-- A listener of catch-up playlists is recorded with mode 'catch_up' (docs/behaviour.md §17).
ALTER TABLE listeners ADD COLUMN mode TEXT NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'catch_up'));
-- Catch-up playlists list the titles that aired in their span (EXT-X-DATERANGE): the play log by time.
CREATE INDEX tracks_stream_time ON tracks (stream_id, started_at);
