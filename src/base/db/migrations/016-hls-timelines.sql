-- Where each stream's HLS timeline may continue after a restart (docs/streams.md "One timeline"),
-- per layer (rendition, e.g. `a128`): a media sequence number and a discontinuity sequence number
-- above any a cache or player can have seen under the stream's playlist URIs (RFC 8216 §6.2.1).
-- The node reserves numbers in blocks and writes the end of the block here before it hands them
-- out, so a new run starts at these numbers. They only ever rise; a deleted stream's rows go with it
-- (stream ids are never reused).
CREATE TABLE hls_timelines (
  stream_id TEXT NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
  layer TEXT NOT NULL,
  next_sequence INTEGER NOT NULL CHECK (next_sequence >= 0),
  next_discontinuity INTEGER NOT NULL CHECK (next_discontinuity >= 0),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (stream_id, layer)
) WITHOUT ROWID;
