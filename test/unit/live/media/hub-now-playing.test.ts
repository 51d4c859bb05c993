/**
 * StreamHub.setNowPlaying (docs/behaviour.md §11): what plays now reaches every layer's segmenter that
 * carries timed metadata (`pushMetadata`), at the latest ingest timestamp the hub saw; a change
 * before the publish's first audio waits for it; a segmenter without the method is left alone.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { StreamHub } from '../../../../src/live/media/hub.js';
import type { SegmenterRequest } from '../../../../src/live/media/hub-types.js';
import type { NowPlayingFields } from '../../../../src/live/media/layer-media.js';
import { Segmenter } from '../../../../src/native/segmenter.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));

/** A hub of a 2-layer ladder whose segmenters are native ones, with `pushMetadata` recorded when `withMetadata`. */
function hub(withMetadata: boolean) {
  const calls: Array<{ layer: number; ts: number; fields: NowPlayingFields }> = [];
  let n = 0;
  const h = new StreamHub('stm_np', {
    codec: 'aac',
    targetDurationMs: 2000,
    partTargetMs: 0,
    windowSegments: 3,
    ladder: [128, 64],
    createSegmenter: (o: SegmenterRequest) => {
      const seg = new Segmenter(o);
      const layer = n++;
      if (!withMetadata) return seg;
      return {
        pushAudio: (ts: number, d: Uint8Array) => seg.pushAudio(ts, d),
        flush: () => seg.flush(),
        discontinuity: () => seg.discontinuity(),
        pushMetadata: (ts: number, fields: NowPlayingFields) => calls.push({ layer, ts, fields: { ...fields } }),
      };
    },
  });
  return { h, calls };
}

describe('StreamHub.setNowPlaying', () => {
  it('hands the change to every layer at the latest ingest timestamp', () => {
    const { h, calls } = hub(true);
    for (const t of tags.slice(0, 20)) h.pushAudio(t.timestampMs, t.body);
    const last = tags[19]!.timestampMs;
    h.setNowPlaying({ title: 'So What', artist: 'Miles Davis' });
    expect(calls.map((c) => c.layer)).toEqual([0, 1]);
    for (const c of calls) {
      expect(c.ts).toBeGreaterThanOrEqual(last);
      expect(c.ts).toBeLessThan(last + 5000); // moved on by the wall clock since, which is ~0 here
      expect(c.fields).toEqual({ title: 'So What', artist: 'Miles Davis', album: null, url: null });
    }
    expect(h.nowPlaying).toEqual({ title: 'So What', artist: 'Miles Davis', album: null, url: null });
    // The same fields again change nothing; an explicit timestamp is used as given.
    h.setNowPlaying({ title: 'So What', artist: 'Miles Davis' });
    expect(calls).toHaveLength(2);
    h.setNowPlaying({ title: 'Blue in Green', artist: 'Miles Davis', album: 'Kind of Blue', url: 'https://example.com/b' }, 12_345);
    expect(calls.slice(2).map((c) => c.ts)).toEqual([12_345, 12_345]);
    expect(calls[2]!.fields).toEqual({ title: 'Blue in Green', artist: 'Miles Davis', album: 'Kind of Blue', url: 'https://example.com/b' });
  });

  it('a change before the first audio reaches the layers with that audio', () => {
    const { h, calls } = hub(true);
    h.setNowPlaying({ title: 'Early' });
    expect(calls).toEqual([]);
    h.pushAudio(tags[0]!.timestampMs, tags[0]!.body);
    h.pushAudio(tags[1]!.timestampMs, tags[1]!.body);
    expect(calls.map((c) => [c.layer, c.ts, c.fields.title])).toEqual([
      [0, tags[0]!.timestampMs, 'Early'],
      [1, tags[0]!.timestampMs, 'Early'],
    ]);
  });

  it('segmenters without pushMetadata (the native one before timed metadata) are left alone', () => {
    const { h } = hub(false);
    for (const t of tags.slice(0, 5)) h.pushAudio(t.timestampMs, t.body);
    expect(() => h.setNowPlaying({ title: 'Anything' })).not.toThrow();
    expect(h.nowPlaying?.title).toBe('Anything');
  });
});
