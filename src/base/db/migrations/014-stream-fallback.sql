-- A stream's fallback (docs/streams.md "Fallback"): JSON {episodeIds, order, silenceSeconds}, or
-- null; and where its audio comes from now: 'live', 'fallback' or null (nothing plays).
ALTER TABLE streams ADD COLUMN fallback TEXT;
ALTER TABLE streams ADD COLUMN source TEXT;
