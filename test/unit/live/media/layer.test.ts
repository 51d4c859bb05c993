/** A ladder layer over the real native segmenter: segments, LL-HLS parts, retention, waiters. */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Layer } from '../../../../src/live/media/layer.js';
import { Segmenter } from '../../../../src/native/segmenter.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));

const layer = (partTargetMs = 500) =>
  new Layer({
    name: 'a128',
    kbps: 128,
    container: 'fmp4',
    targetDurationMs: 2000,
    partTargetMs,
    windowSegments: 3,
    passthrough: true,
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs, expectCodec: 'aac' }),
  });

describe('Layer', () => {
  it('keeps an init section, segments that are their parts concatenated, and a bounded window', () => {
    const l = layer();
    const last = tags.at(-1)!.timestampMs + 21;
    for (const t of tags) expect(l.push(t.timestampMs, t.body)).toEqual([]);
    for (const t of tags.filter((x) => x.body[1] === 1)) expect(l.push(last + t.timestampMs, t.body)).toEqual([]); // 20 s
    l.flush();
    expect(l.codecs).toBe('mp4a.40.2');
    expect(l.init!.byteLength).toBeGreaterThan(0);
    expect(l.lowLatency).toBe(true);
    expect(l.segments.length).toBe(3 + 4); // window + retained extra
    expect(l.window().map((s) => s.sequence)).toEqual([7, 8, 9]);
    const withParts = l.segments.filter((s) => s.parts.length > 0);
    expect(withParts.length).toBeLessThanOrEqual(3);
    for (const s of withParts) {
      expect(Buffer.concat(s.parts.map((p) => p.data))).toEqual(Buffer.from(s.data));
      expect(s.parts.reduce((n, p) => n + p.durationMs, 0)).toBeCloseTo(s.durationMs, 6);
    }
    expect(l.segment(0)).toBeUndefined(); // fell out
    expect(l.bandwidth().average).toBeGreaterThan(120_000);
  });

  it('answers blocking waits when the part appears, and at once for what exists', async () => {
    const l = layer();
    const order: string[] = [];
    l.waitFor(0, 2, () => order.push('msn0.part2'));
    l.waitFor(1, undefined, () => order.push('msn1'));
    let i = 0;
    while (!l.has(0, 2)) l.push(tags[i]!.timestampMs, tags[i++]!.body);
    expect(order).toEqual(['msn0.part2']);
    while (!l.has(1)) l.push(tags[i]!.timestampMs, tags[i++]!.body);
    expect(order).toEqual(['msn0.part2', 'msn1']);
    let now = false;
    l.waitFor(0, 0, () => (now = true));
    expect(now).toBe(true);
    const late = new Promise<string>((resolve) => l.waitFor(99, 0, () => resolve('woken')));
    l.end();
    expect(await late).toBe('woken');
  });

  it('hands each new part (layers with parts) or segment (classic) to media subscribers, then the end', () => {
    for (const partTargetMs of [500, 0]) {
      const l = layer(partTargetMs);
      const got: Array<{ data: Uint8Array; durationMs: number; initVersion: number }> = [];
      let ended = 0;
      l.onMedia({ media: () => { throw new Error('a faulty subscriber'); }, end: () => { throw new Error('again'); } });
      const off = l.onMedia({ media: (m) => got.push(m), end: () => ended++ });
      for (const t of tags) expect(l.push(t.timestampMs, t.body)).toEqual([]);
      l.end();
      expect(ended).toBe(1);
      expect(l.segments[0]!.sequence).toBe(0); // ~10 s: every segment is still retained
      // The subscriber saw the whole output in order: parts (each ≤ a part target + a frame), or segments.
      expect(Buffer.concat(got.map((m) => m.data))).toEqual(Buffer.concat(l.segments.map((s) => s.data)));
      if (partTargetMs) {
        expect(got.length).toBe(l.segments.reduce((n, s) => n + s.parts.length, 0) + 4 * (l.segments.length - 3)); // older segments' parts were cleared
        expect(got.every((m) => m.durationMs <= 500 + 1024 / 48 + 1e-6)).toBe(true);
      } else expect(got.map((m) => m.data)).toEqual(l.segments.map((s) => s.data));
      expect(got.every((m) => m.initVersion === 1)).toBe(true);
      off();
      let late = 0;
      l.onMedia({ media: () => {}, end: () => late++ });
      expect(late).toBe(1); // an ended layer says so at once
    }
  });

  it('recentMedia: the newest retained units covering the asked duration, oldest first', () => {
    const l = layer();
    for (const t of tags) l.push(t.timestampMs, t.body);
    const r = l.recentMedia(3000);
    const ms = r.reduce((n, m) => n + m.durationMs, 0);
    expect(ms).toBeGreaterThanOrEqual(3000);
    expect(ms - r[0]!.durationMs).toBeLessThan(3000);
    expect(r.at(-1)!.data).toBe((l.openParts.at(-1) ?? l.segments.at(-1)!.parts.at(-1)!).data);
    const everything = l.recentMedia(1e9);
    expect(Buffer.concat(everything.map((m) => m.data))).toEqual(Buffer.concat([...l.segments.map((s) => s.data), ...l.openParts.map((p) => p.data)]));
  });
});

