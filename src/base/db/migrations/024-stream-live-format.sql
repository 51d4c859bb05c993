-- The sample rate (Hz) and channel count of a stream's last live source (docs/streams.md
-- "Fallback"): the fallback is encoded at them, so that a switch between live audio and the
-- fallback never changes the format listeners decode. Null until a source has published.
ALTER TABLE streams ADD COLUMN live_sample_rate INTEGER;
ALTER TABLE streams ADD COLUMN live_channels INTEGER;
