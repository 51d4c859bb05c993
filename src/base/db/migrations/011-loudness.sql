-- Episode loudness (docs/podcasts.md "Loudness"): the podcast's normalisation target, each
-- episode's measurement (JSON, as the episode object shows it), the work still to do, and the
-- original upload kept beside a normalised copy.
ALTER TABLE podcasts ADD COLUMN loudness_target REAL DEFAULT -16; -- LUFS, NULL = off; new podcasts: -16
UPDATE podcasts SET loudness_target = NULL;                          -- podcasts made before: off
ALTER TABLE episodes ADD COLUMN loudness TEXT;                   -- JSON measurement, NULL until measured
ALTER TABLE episodes ADD COLUMN loudness_state TEXT
  CHECK (loudness_state IN ('measure','normalize','done','failed')); -- NULL = no audio
ALTER TABLE episodes ADD COLUMN original_audio_file TEXT;        -- the upload, when audio_file is its normalised copy
ALTER TABLE episodes ADD COLUMN original_audio_size INTEGER;
CREATE UNIQUE INDEX episodes_original_audio_file ON episodes(original_audio_file);
CREATE INDEX episodes_loudness_pending ON episodes(loudness_state) WHERE loudness_state IN ('measure','normalize');
-- audio uploaded before: measured at the next start, never re-encoded
UPDATE episodes SET loudness_state = 'measure' WHERE audio_file IS NOT NULL;
