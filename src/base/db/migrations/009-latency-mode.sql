-- Latency is a per-stream choice (docs/behaviour.md §3, as Mux's latency_mode): 'standard' (classic HLS,
-- the default for new streams) or 'low' (LL-HLS parts, blocking reload, preload hints). Streams made
-- before this release served LL-HLS: they keep it.
ALTER TABLE streams ADD COLUMN latency_mode TEXT NOT NULL DEFAULT 'standard' CHECK (latency_mode IN ('standard', 'low'));
UPDATE streams SET latency_mode = 'low';
