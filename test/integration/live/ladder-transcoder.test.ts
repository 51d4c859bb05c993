/**
 * The ladder's FFmpeg codec process with real FFmpeg: AAC in, AAC layers out, re-based on the ingest
 * clock; segmented by the native segmenter, every layer cuts at the same boundaries as the
 * passthrough.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader, flvAudioTag, flvHeader } from '../../../src/live/media/flv.js';
import { LadderTranscoder, transcoderArgs } from '../../../src/live/media/transcoder.js';
import { ffmpegPath } from '../../../src/base/ffmpeg.js';
import { Segmenter } from '../../../src/native/segmenter.js';
import { waitFor } from '../../helpers/wait.js';

const fixture = path.resolve(import.meta.dirname, '../../fixtures/aac/sine48k_stereo_128k.flv');

function segmentsOf(tags: Array<{ ts: number; body: Uint8Array }>) {
  const seg = new Segmenter({ container: 'ts', expectCodec: 'aac', targetDurationMs: 2000 });
  const out: Array<{ sequence: number; durationMs: number; pts90k: number }> = [];
  for (const t of tags) for (const e of seg.pushAudio(t.ts, t.body)) if (e.type === 'segment') out.push(e);
  for (const e of seg.flush()) if (e.type === 'segment') out.push(e);
  return out;
}

describe('FLV framing', () => {
  it('reads back what it writes, across arbitrary chunk boundaries', () => {
    const bodies = [Buffer.from([0xaf, 0, 0x12, 0x10]), Buffer.alloc(300, 7), Buffer.alloc(5, 9)];
    const stream = Buffer.concat([flvHeader(), ...bodies.map((b, i) => flvAudioTag(i * 21 + 0x1000000, b))]);
    const reader = new FlvReader();
    const got = [];
    for (let i = 0; i < stream.length; i += 7) got.push(...reader.push(stream.subarray(i, i + 7)));
    expect(got.map((t) => t.timestampMs)).toEqual([0x1000000, 0x1000015, 0x100002a]);
    expect(got.map((t) => t.body)).toEqual(bodies);
  });
});

describe('LadderTranscoder', () => {
  it('names one output pipe per layer', () => {
    const args = transcoderArgs('aac', [128, 64]);
    expect(args.filter((a) => a.startsWith('pipe:'))).toEqual(['pipe:0', 'pipe:3', 'pipe:4']);
    expect(args.join(' ')).toContain('-c:a aac -b:a 64k -f flv');
    expect(transcoderArgs('opus', [128]).join(' ')).toContain('-c:a libopus -b:a 128k -f ogg');
  });

  it('encodes AAC layers that cut at the passthrough boundaries', async () => {
    const input = new FlvReader().push(readFileSync(fixture)).map((t) => ({ ts: t.timestampMs + 5000, body: t.body }));
    const layers = new Map<number, Array<{ ts: number; body: Uint8Array }>>([[128, []], [64, []]]);
    const failures: string[] = [];
    const t = new LadderTranscoder({
      ffmpeg: ffmpegPath()!,
      codec: 'aac',
      layers: [128, 64],
      onAudio: (kbps, ts, body) => layers.get(kbps)!.push({ ts, body }),
      onFailure: (r) => failures.push(r),
      closeGraceMs: 60_000, // the whole input is encoded, however loaded the box
    });
    for (const tag of input) t.push(tag.ts, tag.body);
    t.close();
    await t.exited;
    expect(failures).toEqual([]);
    const passthrough = segmentsOf(input);
    for (const [kbps, tags] of layers) {
      expect(tags[0]!.body[0]).toBe(0xaf);
      expect(tags[0]!.body[1]).toBe(0); // sequence header first
      expect(tags[0]!.ts).toBe(5000); // on the ingest clock
      for (let i = 1; i < tags.length; i++) expect(tags[i]!.ts).toBeGreaterThanOrEqual(tags[i - 1]!.ts);
      const segs = segmentsOf(tags);
      expect(segs.length, `layer ${kbps}`).toBeGreaterThanOrEqual(passthrough.length - 1);
      // Same boundaries: every full segment starts at the same PTS as the passthrough's.
      for (let i = 0; i < Math.min(segs.length, passthrough.length) - 1; i++) {
        expect(segs[i]!.pts90k).toBe(passthrough[i]!.pts90k);
        expect(segs[i]!.durationMs).toBeCloseTo(passthrough[i]!.durationMs, 3);
      }
      const bytes = tags.reduce((n, x) => n + x.body.length, 0);
      const seconds = tags.length * 1024 / 48000;
      expect(bytes * 8 / seconds / 1000).toBeLessThan(kbps * 1.25);
    }
  });

  it('reports a failure when ffmpeg cannot run, and never throws', async () => {
    const failures: string[] = [];
    const t = new LadderTranscoder({ ffmpeg: '/nonexistent/ffmpeg', codec: 'aac', layers: [64], onAudio: () => {}, onFailure: (r) => failures.push(r) });
    t.push(0, Buffer.from([0xaf, 0, 0x12, 0x10]));
    await waitFor(() => failures.length > 0, 5_000, 10, 'the failure');
    expect(failures[0]).toMatch(/cannot run ffmpeg/);
  });
});
