-- Token streams and publishable keys (docs/behaviour.md §13): listener tokens minted with a
-- publishable key open a `playback: "token"` stream only when the stream allows them
-- (`playback: {mode: "token", publishableKeyTokens: true}`); 1 = allowed. Existing streams refuse them.
ALTER TABLE streams ADD COLUMN playback_publishable_tokens INTEGER NOT NULL DEFAULT 0;
