/**
 * A layer's `BANDWIDTH`/`AVERAGE-BANDWIDTH` (rfc8216bis §4.4.6.2; docs/decisions.md "HLS"), from
 * segment events of known sizes as the segmenter hands them to the layer: both are taken over the
 * live window only and leave out a segment shorter than half the target duration and one that ends
 * at a discontinuity (the flushed tail of a publisher that reconnects or is taken over); the peak
 * is never below the average, and a burst is forgotten once it leaves the window.
 */
import { describe, expect, it } from 'vitest';
import { Layer } from '../../../../src/live/media/layer.js';
import type { SegmenterEvent } from '../../../../src/native/segmenter.js';

const TARGET_MS = 2000;

function layer(): Layer {
  return new Layer({
    name: 'a128',
    kbps: 128,
    container: 'ts',
    targetDurationMs: TARGET_MS,
    partTargetMs: 0,
    windowSegments: 6,
    passthrough: true,
    createSegmenter: () => ({ pushAudio: () => [], pushMetadata: () => {}, flush: () => [], discontinuity: () => {} }),
  });
}

let seq = 0;
/** A segment event of `durationMs` at `kbps` (its bytes), after a discontinuity when `discontinuity`. */
function segment(durationMs: number, kbps: number, discontinuity = false): SegmenterEvent {
  const bytes = Math.round((kbps * 1000 * durationMs) / 8000);
  return { type: 'segment', sequence: seq++, data: Buffer.alloc(bytes), durationMs, discontinuity, pts90k: 0, frames: 0, independent: true };
}

describe('layer bandwidth', () => {
  it('is nominal + 10 % before the first segment', () => {
    expect(layer().bandwidth()).toEqual({ peak: 140_800, average: 140_800 });
  });

  it('leaves a short segment and the flushed tail before a discontinuity out of the peak', () => {
    seq = 0;
    const l = layer();
    l.apply([segment(2000, 128), segment(2000, 130)]);
    // A publisher's flushed tail (0.3 s, dense with overhead), then a reconnect's first segment.
    l.apply([segment(300, 288), segment(1800, 280), segment(2000, 126, true), segment(2000, 127)]);
    expect(l.bandwidth()).toEqual({ peak: 130_000, average: 127_750 });
  });

  it('measures the window only: a burst that left the window no longer counts', () => {
    seq = 0;
    const l = layer();
    l.apply([segment(2000, 250)]);
    expect(l.bandwidth().peak).toBe(250_000);
    l.apply(Array.from({ length: 6 }, () => segment(2000, 128)));
    expect(l.bandwidth()).toEqual({ peak: 128_000, average: 128_000 });
  });

  it('is never below the average when no segment qualifies for the peak', () => {
    seq = 0;
    const l = layer();
    l.apply([segment(500, 200)]);
    expect(l.bandwidth()).toEqual({ peak: 200_000, average: 200_000 });
  });
});
