/**
 * Segments of LL-HLS layers are their parts' bytes: the hub asks the native segmenter not to make
 * them a second time (`segmentBytes: false`), and the layer joins the parts when a segment is read.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Layer } from '../../../../src/live/media/layer.js';
import { StreamHub } from '../../../../src/live/media/hub.js';
import type { SegmenterRequest } from '../../../../src/live/media/hub-types.js';
import { Segmenter } from '../../../../src/native/segmenter.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));

const layer = (segmentBytes: boolean) =>
  new Layer({
    name: 'a128',
    kbps: 128,
    container: 'fmp4',
    targetDurationMs: 2000,
    partTargetMs: 500,
    windowSegments: 3,
    passthrough: true,
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac', segmentBytes }),
  });

/** ~20 s of the fixture into `l`, then the end. */
function feed(l: Layer): void {
  const last = tags.at(-1)!.timestampMs + 21;
  for (const t of tags) expect(l.push(t.timestampMs, t.body)).toEqual([]);
  for (const t of tags.filter((x) => x.body[1] === 1)) expect(l.push(last + t.timestampMs, t.body)).toEqual([]);
  l.end();
}

describe('segment bytes of layers with parts', () => {
  it('the native segmenter leaves them out of segment events on request (and checks the option)', () => {
    const s = new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac', segmentBytes: false });
    const events = tags.flatMap((t) => s.pushAudio(t.timestampMs, t.body)).concat(s.flush());
    const segments = events.filter((e) => e.type === 'segment');
    expect(segments.length).toBeGreaterThan(3);
    for (const e of segments) expect(e.data.byteLength).toBe(0);
    expect(events.filter((e) => e.type === 'part').every((e) => e.data.byteLength > 0)).toBe(true);
    expect(() => new Segmenter({ container: 'fmp4', partTargetMs: 500, segmentBytes: 1 as unknown as boolean })).toThrow(TypeError);
  });

  it('a layer serves the same segment bytes, dates and bandwidth whether the segmenter made them or the layer joins the parts', () => {
    const made = layer(true);
    const joined = layer(false);
    feed(made);
    feed(joined);
    expect(joined.segments.length).toBe(made.segments.length);
    // The oldest retained segments have had their parts cleared already: their bytes are still whole.
    expect(joined.segments[0]!.parts).toEqual([]);
    for (let i = 0; i < made.segments.length; i++) {
      const a = made.segments[i]!;
      const b = joined.segments[i]!;
      expect(Buffer.from(b.data)).toEqual(Buffer.from(a.data));
      expect(b.data).toBe(b.data); // joined once, then kept
      expect({ ...b, data: null, programDateMs: 0 }).toEqual({ ...a, data: null, programDateMs: 0 });
    }
    expect(joined.bandwidth()).toEqual(made.bandwidth());
    expect(joined.recentMedia(60_000).map((m) => Buffer.from(m.data))).toEqual(made.recentMedia(60_000).map((m) => Buffer.from(m.data)));
  });

  it('the hub asks for no segment bytes on LL-HLS layers only', () => {
    for (const partTargetMs of [500, 0]) {
      const asked: SegmenterRequest[] = [];
      const h = new StreamHub('stm_bytes', {
        codec: 'aac',
        targetDurationMs: 2000,
        partTargetMs,
        windowSegments: 3,
        ladder: [128],
        createSegmenter: (o) => {
          asked.push(o);
          return new Segmenter(o);
        },
      });
      expect(asked).toHaveLength(1);
      expect(asked[0]!.segmentBytes).toBe(partTargetMs > 0 ? false : undefined);
      h.end();
    }
  });
});
