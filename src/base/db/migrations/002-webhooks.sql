-- webhooks: endpoints, the durable delivery queue with its schedule, the attempt history, and the
-- dispatch cursor over `events` (docs/webhooks.md). Times are Unix milliseconds.
CREATE TABLE webhooks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  url TEXT NOT NULL,
  events TEXT NOT NULL,                -- JSON array of event types, or ["*"]
  description TEXT,
  status TEXT NOT NULL CHECK (status IN ('active','disabled')),
  secret_enc BLOB NOT NULL,            -- AES-256-GCM(node secret, 'whsec_…')
  from_event_seq INTEGER NOT NULL,     -- events.seq at creation: only later events are delivered
  created_at INTEGER NOT NULL,
  deleted_at INTEGER                   -- soft delete: the delivery history keeps its webhookId
);
CREATE INDEX webhooks_account ON webhooks(account_id, seq) WHERE deleted_at IS NULL;

-- One row per (event, endpoint). `attempt_count` counts the attempts of the current series (a
-- redeliver starts a new series); it decides the next wait. `next_attempt_at` is NULL unless pending.
CREATE TABLE webhook_deliveries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  webhook_id TEXT NOT NULL,
  account_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','delivered','undelivered')),
  attempt_count INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  created_at INTEGER NOT NULL,
  UNIQUE (event_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(webhook_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_due_all ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries(seq) ON DELETE CASCADE,
  attempted_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  response_status INTEGER,
  duration_ms INTEGER NOT NULL,
  error TEXT,
  response_body TEXT                   -- first bytes only (capped, docs/webhooks.md)
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_seq, seq);

-- The highest events.seq already fanned out into deliveries (a single row).
CREATE TABLE webhook_dispatch (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last_event_seq INTEGER NOT NULL
);
INSERT INTO webhook_dispatch (id, last_event_seq) VALUES (1, 0);

-- GET /events?type=…
CREATE INDEX events_account_type ON events(account_id, type, seq);
