/**
 * Delta updates and the blocking-reload part rollover on a layer over the real native segmenter
 * (draft-pantos-hls-rfc8216bis §6.2.5.1, §6.2.5.2; docs/ll-hls.md): 1 s segments with 0.5 s parts,
 * a 20-segment window, 20 s of AAC.
 * - the segments skipped are exactly those that end at least six target durations before the end
 *   of the last one; the delta lists the rest as the full playlist does, after one `EXT-X-SKIP`;
 * - a segment after a discontinuity is never skipped, nor any after it (its tag stays);
 * - an ended layer offers no delta;
 * - `reached`: a part index past a finished segment's last part is part 0 of the next segment.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Layer } from '../../../../src/live/media/layer.js';
import { Segmenter } from '../../../../src/native/segmenter.js';
import { mediaTemplate, skipBoundarySeconds, skippedSegments } from '../../../../src/delivery/hls/playlists.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));
const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/** A layer fed the fixture twice (~20 s), with a discontinuity between the two when asked. */
function fed(discontinuity: boolean): Layer {
  const l = new Layer({
    name: 'a128',
    kbps: 128,
    container: 'fmp4',
    targetDurationMs: 1000,
    partTargetMs: 500,
    windowSegments: 20,
    passthrough: true,
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 1000, partTargetMs: 500, expectCodec: 'aac' }),
  });
  const last = tags.at(-1)!.timestampMs + 21;
  for (const t of tags) expect(l.push(t.timestampMs, t.body)).toEqual([]);
  if (discontinuity) l.discontinuity();
  for (const t of tags.filter((x) => x.body[1] === 1)) expect(l.push(last + t.timestampMs, t.body)).toEqual([]);
  return l;
}

describe('delta updates', () => {
  it('skips exactly the segments that end at least the skip boundary before the last one', () => {
    const l = fed(false);
    const segs = l.window();
    expect(segs.length).toBeGreaterThanOrEqual(15);
    expect(skipBoundarySeconds(l)).toBe(6);
    const total = segs.reduce((n, s) => n + s.durationMs, 0);
    let end = 0;
    const expected = segs.filter((s) => total - (end += s.durationMs) >= 6000).length;
    const n = skippedSegments(l);
    expect(n).toBe(expected);
    expect(n).toBeGreaterThan(5);

    const full = text(mediaTemplate(l).plain).split('\n');
    const delta = text(mediaTemplate(l, n).plain).split('\n');
    expect(full.join('\n')).toContain(`CAN-SKIP-UNTIL=6.0`);
    const skipAt = delta.indexOf(`#EXT-X-SKIP:SKIPPED-SEGMENTS=${n}`);
    expect(skipAt).toBeGreaterThan(0);
    expect(delta.slice(0, skipAt)).toEqual(full.slice(0, full.findIndex((x) => x.startsWith('#EXT-X-MAP:'))));
    expect(delta[skipAt + 1]).toBe(`#EXT-X-MAP:URI="init-${l.initId}.mp4"`);
    const dates = full.flatMap((x, i) => (x.startsWith('#EXT-X-PROGRAM-DATE-TIME:') ? [i] : []));
    expect(delta.slice(skipAt + 2)).toEqual(full.slice(dates[n]));
  });

  it('never skips a segment that follows a discontinuity, nor any after it', () => {
    const l = fed(true);
    const at = l.window().findIndex((s) => s.discontinuity);
    expect(at).toBeGreaterThan(0);
    const n = skippedSegments(l);
    expect(n).toBe(at); // without the discontinuity more would be skipped (the test above)
    const delta = text(mediaTemplate(l, n).plain);
    expect(delta.match(/#EXT-X-DISCONTINUITY\n/g)?.length).toBe(1);
    expect(delta).toContain(`#EXT-X-SKIP:SKIPPED-SEGMENTS=${n}\n#EXT-X-DISCONTINUITY\n`);
  });

  it('offers no delta once the layer ended', () => {
    const l = fed(false);
    l.end();
    expect(skippedSegments(l)).toBe(0);
  });
});

describe('blocking reload rollover', () => {
  it('reads a part index past a finished segment\'s last part as part 0 of the next segment', () => {
    const l = fed(false);
    const open = l.nextSequence;
    const last = open - 1;
    const parts = l.segment(last)!.parts.length;
    expect(parts).toBeGreaterThan(0);
    expect(l.reached(last, parts - 1)).toBe(true);
    expect(l.has(last, parts)).toBe(true); // that part will never exist: its segment is finished
    expect(l.reached(last, parts)).toBe(l.openParts.length > 0);
    expect(l.reached(open, l.openParts.length)).toBe(false);
    expect(l.reached(open, 99)).toBe(false);
    expect(l.reached(open + 1, 0)).toBe(false);
    expect(l.reached(last - 1, 99)).toBe(true); // the segment after it is finished
    // Once the open segment has a part, the rollover of `last` holds; a wait for it is answered.
    let answered = 0;
    const cancel = l.waitFor(open, 99, () => answered++, true);
    l.flush(); // closes the open segment; the next one has no part yet
    expect(answered).toBe(0);
    cancel();
  });
});
