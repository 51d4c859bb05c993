-- Publication that waits for its audio (docs/podcasts.md "Publishing while the audio is processed"):
-- an episode asked to be published while its audio is still being finished (a recording's hand-over)
-- or loudness-normalised keeps status 'draft' with publish_pending = 1 (the API says `processing`),
-- and is published once the audio is final. Listen again (docs/streams.md "Listen again"): a
-- stream's time zone (IANA name) dates the titles of its broadcasts' episodes.
ALTER TABLE episodes ADD COLUMN publish_pending INTEGER NOT NULL DEFAULT 0; -- 0 | 1
CREATE INDEX episodes_publish_pending ON episodes(publish_pending) WHERE publish_pending = 1;
ALTER TABLE streams ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
