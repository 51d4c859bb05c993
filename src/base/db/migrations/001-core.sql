-- accounts, api keys, streams, events
CREATE TABLE accounts (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  plan TEXT NOT NULL CHECK (plan IN ('free','paid')),
  default_region TEXT NOT NULL,
  owner_email TEXT UNIQUE,
  password_hash TEXT,
  created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  type TEXT NOT NULL CHECK (type IN ('secret','publishable')),
  key_hash BLOB NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  last4 TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX api_keys_account ON api_keys(account_id, seq);
CREATE TABLE streams (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  title TEXT NOT NULL,
  titles TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL CHECK (status IN ('idle','live','ended')),
  quality TEXT NOT NULL,
  codec TEXT NOT NULL,
  region TEXT NOT NULL,
  stream_key_hash BLOB NOT NULL,
  stream_key_enc BLOB NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{}',
  reconnect_window INTEGER NOT NULL,
  recording TEXT,
  playback TEXT NOT NULL DEFAULT 'public',
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  ended_at INTEGER
);
CREATE INDEX streams_account ON streams(account_id, seq);
CREATE INDEX streams_account_status ON streams(account_id, status, seq);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  type TEXT NOT NULL,
  created INTEGER NOT NULL,
  livemode INTEGER NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX events_account ON events(account_id, seq);
