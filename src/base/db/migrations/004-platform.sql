-- API platform: owner sessions, OAuth 2.0 authorization server, JWT signing keys, idempotency keys.

-- Owner login sessions (consent page now, dashboard later). The cookie value is never stored: only its SHA-256.
-- account_id is NULL for a pre-login session (it carries the CSRF token of the login form).
CREATE TABLE sessions (
  id_hash BLOB PRIMARY KEY,
  account_id TEXT REFERENCES accounts(id),
  csrf_token TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL
);
CREATE INDEX sessions_expires ON sessions(expires_at);

CREATE TABLE oauth_clients (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  secret_hash BLOB,                 -- NULL for public clients
  redirect_uris TEXT NOT NULL,      -- JSON array, compared by exact string match
  is_public INTEGER NOT NULL CHECK (is_public IN (0, 1)),
  account_id TEXT REFERENCES accounts(id),
  created_at INTEGER NOT NULL,
  deleted_at INTEGER
);

-- One grant per authorization code: the family of every refresh and access token it led to.
CREATE TABLE oauth_grants (
  id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  scope TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER,
  revoked_reason TEXT
);
CREATE INDEX oauth_grants_account ON oauth_grants(account_id);

CREATE TABLE oauth_codes (
  code_hash BLOB PRIMARY KEY,
  grant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  account_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  redirect_uri_given INTEGER NOT NULL,
  scope TEXT NOT NULL,
  code_challenge TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
);
CREATE INDEX oauth_codes_expires ON oauth_codes(expires_at);

CREATE TABLE oauth_refresh_tokens (
  token_hash BLOB PRIMARY KEY,
  grant_id TEXT NOT NULL REFERENCES oauth_grants(id),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
);
CREATE INDEX oauth_refresh_grant ON oauth_refresh_tokens(grant_id);

-- Access tokens revoked one by one (RFC 7009) before they expire.
CREATE TABLE oauth_revoked_jtis (
  jti TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);

-- JWT signing keys; the private JWK is AES-256-GCM-encrypted under the node secret.
CREATE TABLE signing_keys (
  kid TEXT PRIMARY KEY,
  alg TEXT NOT NULL,
  public_jwk TEXT NOT NULL,
  private_enc BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  retired_at INTEGER
);

-- Idempotency-Key on POST (docs/behaviour.md §7): 24 h. status NULL = in flight. The stored response is encrypted.
CREATE TABLE idempotency_keys (
  actor TEXT NOT NULL,
  key TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  body_hash BLOB NOT NULL,
  owner TEXT NOT NULL,
  status INTEGER,
  response_enc BLOB,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (actor, key)
);
CREATE INDEX idempotency_created ON idempotency_keys(created_at);
