-- podcasts and episodes (docs/behaviour.md §5); scheduled publication is the episode row itself
-- (status 'scheduled' + publish_at), found by the scheduler through episodes_due.
CREATE TABLE podcasts (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  title TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  author TEXT,
  language TEXT NOT NULL DEFAULT 'en',
  category TEXT,
  explicit INTEGER NOT NULL DEFAULT 0,
  image_url TEXT,
  owner_email TEXT,
  owner_name TEXT,
  link TEXT,
  type TEXT NOT NULL DEFAULT 'episodic' CHECK (type IN ('episodic','serial')),
  locked INTEGER NOT NULL DEFAULT 0,
  metadata TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL CHECK (status IN ('draft','published','archived')),
  podcast_guid TEXT NOT NULL,
  feed_url TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX podcasts_account ON podcasts(account_id, seq);
CREATE INDEX podcasts_account_status ON podcasts(account_id, status, seq);

CREATE TABLE episodes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  podcast_id TEXT NOT NULL REFERENCES podcasts(id),
  title TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('draft','scheduled','published')),
  audio_file TEXT UNIQUE,
  audio_mime TEXT,
  audio_size INTEGER,
  audio_duration REAL,
  audio_updated_at INTEGER,
  guid TEXT,
  season INTEGER,
  episode_number INTEGER,
  episode_type TEXT NOT NULL DEFAULT 'full' CHECK (episode_type IN ('full','trailer','bonus')),
  explicit INTEGER NOT NULL DEFAULT 0,
  publish_at INTEGER,
  published_at INTEGER,
  source_stream_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX episodes_podcast ON episodes(podcast_id, seq);
CREATE INDEX episodes_podcast_published ON episodes(podcast_id, status, published_at);
CREATE INDEX episodes_due ON episodes(status, publish_at);

-- podcasts with their live episode count (every episode row that exists: deletion removes the row)
CREATE VIEW podcasts_v AS
  SELECT p.*, (SELECT COUNT(*) FROM episodes e WHERE e.podcast_id = p.id) AS episode_count FROM podcasts p;
