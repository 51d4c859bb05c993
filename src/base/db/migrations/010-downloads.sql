-- Podcast download counting (docs/podcasts.md "Download counting"). No IP address or User-Agent
-- is stored: clients are keyed by a keyed hash under a per-day secret, kept only while the day lasts.

-- Bytes of an episode's audio file that make one minute: the bytes before the audio (ID3v2 tag,
-- container headers) plus 60 s at the file's average bitrate, capped at the file's size. Set at
-- upload; NULL for audio uploaded before this release (computed on first request, then stored).
ALTER TABLE episodes ADD COLUMN audio_minute_bytes INTEGER;

-- The current UTC day's secret (HMAC key of the client hashes); rows of closed days are deleted.
CREATE TABLE download_secrets (
  day TEXT PRIMARY KEY,           -- YYYY-MM-DD (UTC)
  secret BLOB NOT NULL
);

-- Per client and episode, the current day's progress: bytes sent so far and whether it counted.
-- Kept so a restart the same day neither counts a client twice nor forgets its bytes; rows of
-- closed days are deleted.
CREATE TABLE download_clients (
  day TEXT NOT NULL,
  client TEXT NOT NULL,           -- base64url of HMAC-SHA-256(day secret, address group, User-Agent, day)
  episode_id TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  counted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (day, client, episode_id)
) WITHOUT ROWID;

-- Downloads per day × episode × app × device × OS × country ('' = unknown).
CREATE TABLE download_counts (
  podcast_id TEXT NOT NULL,
  day TEXT NOT NULL,
  episode_id TEXT NOT NULL,
  app TEXT NOT NULL,
  device TEXT NOT NULL,
  os TEXT NOT NULL,
  country TEXT NOT NULL,
  downloads INTEGER NOT NULL,
  PRIMARY KEY (podcast_id, day, episode_id, app, device, os, country)
) WITHOUT ROWID;

-- Requests for episode audio from known bots (and Skylark itself), per day × episode.
CREATE TABLE download_bot_requests (
  podcast_id TEXT NOT NULL,
  day TEXT NOT NULL,
  episode_id TEXT NOT NULL,
  requests INTEGER NOT NULL,
  PRIMARY KEY (podcast_id, day, episode_id)
) WITHOUT ROWID;
