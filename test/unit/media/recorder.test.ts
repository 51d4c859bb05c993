/** The recorder with real media: AAC from an FLV fixture becomes a playable .m4a of the same length. */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FlvReader } from '../../../src/media/flv.js';
import { Recorder } from '../../../src/media/recorder.js';
import { adtsFrame, parseAsc } from '../../../src/media/adts.js';
import { ffmpegPath } from '../../../src/media/ffmpeg.js';

const fixture = path.resolve(import.meta.dirname, '../../fixtures/aac/sine48k_stereo_128k.flv');

describe('Recorder', () => {
  it('reads AudioSpecificConfig for ADTS and writes a valid header', () => {
    const p = parseAsc(Uint8Array.from([0x11, 0x90])); // AAC-LC, 48 kHz, stereo
    expect(p).toEqual({ profile: 1, samplingIndex: 3, channelConfig: 2 });
    const h = adtsFrame(p!, new Uint8Array(100));
    expect([...h.subarray(0, 2)]).toEqual([0xff, 0xf1]);
    expect(((h[3]! & 3) << 11) | (h[4]! << 3) | (h[5]! >> 5)).toBe(107);
    expect(parseAsc(Uint8Array.from([0xf8, 0x00]))).toBeNull(); // escape object type: not ADTS-able
  });

  it('records AAC across a reconnect into one .m4a that ffmpeg decodes at full length', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-rec-'));
    try {
      const tags = new FlvReader().push(readFileSync(fixture));
      const rec = await Recorder.open(dir, 'stm_test-1', 'aac');
      for (const t of tags) rec.push(t.body); // first publish
      for (const t of tags) rec.push(t.body); // the publisher came back: appended
      const done = await rec.finish(ffmpegPath());
      expect(done.mimeType).toBe('audio/mp4');
      expect(done.path.endsWith('.m4a')).toBe(true);
      const probe = spawnSync(ffmpegPath()!, ['-hide_banner', '-i', done.path, '-f', 'null', '-'], { encoding: 'utf8' });
      expect(probe.status).toBe(0);
      const m = [...probe.stderr.matchAll(/time=(\d+):(\d+):([\d.]+)/g)].at(-1)!;
      const seconds = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
      const frames = tags.filter((t) => t.body[1] === 1).length * 2;
      expect(seconds).toBeCloseTo((frames * 1024) / 48000, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
