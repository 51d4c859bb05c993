/**
 * The catch-up index of a layer (src/delivery/catch-up/layer-index.ts) over real layer-hour files
 * (three hours of 2 s segments with gaps, discontinuities and a new init section): every search
 * answers what a plain filter of all the segments answers, and the rewind window's segment lines
 * rendered from kept runs (`segmentRuns`) are the lines of a render from scratch, cold and warm.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { CatchUpSegmentRow } from '../../../../src/base/db/catch-up-repo.js';
import { LayerFiles } from '../../../../src/delivery/catch-up/hour-store.js';
import { RUN, segmentLines, segmentRuns } from '../../../../src/delivery/catch-up/playlists.js';
import { RenderCache } from '../../../../src/delivery/catch-up/routes.js';

const T0 = Date.parse('2026-11-29T05:40:00Z');
let dir: string;
let files: LayerFiles;
const all: CatchUpSegmentRow[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-catch-up-index-'));
  files = new LayerFiles(path.join(dir, 'a128'), 'stm_x', 'a128');
  mkdirSync(files.dir, { recursive: true });
  let start = T0;
  for (let seq = 10; seq < 10 + 3 * 1800; seq++) {
    if (seq % 997 === 0) continue; // a segment missing (a gap in the numbers)
    if (seq % 1500 === 0) start += 600_000; // off the air for 10 minutes
    const data = Buffer.alloc(8 + (seq % 5), seq % 251);
    const e = { sequence: seq, startMs: start, durationMs: 2000, offset: 0, length: data.byteLength, discontinuity: seq % 1500 === 0, discontinuitySequence: Math.floor(seq / 1500), initId: seq < 2500 ? '0123456789abcdef' : 'fedcba9876543210', ts: false };
    const broadcast = `brd_${Math.floor(seq / 1500)}`;
    files.appendSync(e, [data], broadcast, 0);
    all.push({ stream_id: 'stm_x', layer: 'a128', sequence: seq, start_ms: start, duration_ms: 2000, discontinuity: e.discontinuity ? 1 : 0, discontinuity_sequence: e.discontinuitySequence, init_id: e.initId, ext: 'm4s', broadcast_id: broadcast, bytes: data.byteLength });
    start += 2000;
  }
  files.closeWriter();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const instants = () => [T0 - 5000, T0, T0 + 1, ...Array.from({ length: 40 }, (_, k) => T0 + k * 331_117), all.at(-1)!.start_ms, all.at(-1)!.start_ms + 1];

describe('the catch-up index of a layer', () => {
  it('holds its segments by hour and answers every search as a filter of them would', () => {
    const index = files.index;
    expect(index.blocks.map((b) => b.key)).toEqual(['2026112905', '2026112906', '2026112907', '2026112908', '2026112909']);
    expect(index.from(0)).toEqual(all);
    for (const t of instants()) {
      const playing = all.filter((r) => r.start_ms <= t).at(-1) ?? all[0]!;
      expect(index.span(t, t + 3_600_000)).toEqual(all.filter((r) => r.start_ms >= playing.start_ms && r.start_ms < t + 3_600_000));
      expect(index.from(t)).toEqual(all.filter((r) => r.start_ms >= t));
      expect(index.firstFrom(t)).toEqual(all.find((r) => r.start_ms >= t));
      expect(index.count(t, t + 1_000_000)).toBe(all.filter((r) => r.start_ms >= t && r.start_ms < t + 1_000_000).length);
    }
    for (const seq of [9, 10, 997, 998, 1500, 2500, all.at(-1)!.sequence, all.at(-1)!.sequence + 1]) expect(index.get(seq)).toEqual(all.find((r) => r.sequence === seq));
    expect(index.ofBroadcast('brd_1')).toEqual(all.filter((r) => r.broadcast_id === 'brd_1'));
    expect(index.newest()).toEqual(all.at(-1));
  });

  it('renders the segment lines of a window from kept runs exactly as from scratch', () => {
    const kept = new RenderCache<Buffer>(100_000, 64 * 1024 * 1024);
    for (const gapTags of [false, true]) {
      const o = { fmp4: true, gapTags, prefix: '../catchup/a128/', q: '' };
      for (const t of instants()) {
        const scratch = segmentLines(files.index.from(t), { map: '', prev: null }, o);
        expect(Buffer.concat(segmentRuns(files.index, t, o, kept)).toString()).toBe(scratch);
        expect(Buffer.concat(segmentRuns(files.index, t, o, kept)).toString()).toBe(scratch);
      }
    }
    expect(kept.size).toBeGreaterThan(0);
    // Every segment's EXT-X-PROGRAM-DATE-TIME is its start in ISO 8601 UTC with milliseconds.
    const lines = segmentLines(all, { map: '', prev: null }, { fmp4: true, gapTags: true, prefix: '', q: '' });
    expect([...lines.matchAll(/PROGRAM-DATE-TIME:(\S+)/g)].map((m) => m[1])).toEqual(all.map((r) => new Date(r.start_ms).toISOString()));
    expect(RUN).toBeGreaterThan(1);
  });
});
