-- A stream's own Icecast mount (docs/icecast.md "Mounts"), e.g. `/stream` or `/radio.mp3`, besides
-- `/live/<stream id>`; null for none. One stream per mount on a node: the unique index says so (NULLs
-- are distinct in SQLite, so any number of streams have none). Sources are told apart from strangers
-- on an unknown mount by their stream key: the key hash is indexed for that lookup.
ALTER TABLE streams ADD COLUMN icecast_mount TEXT;
CREATE UNIQUE INDEX streams_icecast_mount ON streams (icecast_mount) WHERE icecast_mount IS NOT NULL;
CREATE INDEX streams_stream_key_hash ON streams (stream_key_hash);
