-- A broadcast's integrated loudness (docs/streams.md "Live loudness"): ITU-R BS.1770-4 over the
-- publisher's audio as the ladder's codec process measured it, in LUFS; null when not measured
-- (a stream without a codec process, or a broadcast before this version).
ALTER TABLE broadcasts ADD COLUMN integrated_lufs REAL;
