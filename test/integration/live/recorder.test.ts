/** The recorder with real media: AAC from an FLV fixture becomes a playable .m4a of the same length. */
import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statfsSync, statSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FlvReader } from '../../../src/live/media/flv.js';
import { Recorder } from '../../../src/live/media/recorder.js';
import { adtsFrame, parseAsc } from '../../../src/live/media/adts.js';
import { ffmpegPath } from '../../../src/base/ffmpeg.js';
import { waitFor, waitSteady } from '../../helpers/wait.js';

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

  it('stops before the volume falls under the free-space floor, and refuses to start under it', async (ctx) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-rec-floor-'));
    const vol = path.join(dir, 'vol');
    mkdirSync(vol);
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', vol]).status !== 0) {
      rmSync(dir, { recursive: true, force: true });
      return ctx.skip();
    }
    try {
      const floor = 2 * 1024 * 1024;
      const stops: string[] = [];
      const rec = Recorder.create(vol, 'stm_floor-1', 'mp3', { streamId: 'stm_floor', minFreeBytes: floor, onStopped: (s) => stops.push(s.reason) });
      const frame = new Uint8Array(1 + 1044).fill(0x55);
      frame[0] = 0x2f; // FLV SoundFormat 2 (MP3)
      for (let i = 0; i < 4000 && stops.length === 0; i++) {
        rec.push(frame);
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5)); // let the free-space check answer
      }
      expect(stops).toEqual(['disk_free']);
      const done = await rec.finish(null);
      const s = statfsSync(vol);
      expect(s.bavail * s.bsize).toBeGreaterThanOrEqual(floor - 300 * 1024); // at most one check interval (256 KiB) under
      expect(done.sizeBytes).toBeGreaterThan(1024 * 1024);
      expect(existsSync(path.join(vol, 'stm_floor-1.json'))).toBe(true); // kept until handed over
      await done.release();
      expect(existsSync(path.join(vol, 'stm_floor-1.json'))).toBe(false);

      // A volume already under the floor: the recording does not start.
      const late: string[] = [];
      const r2 = Recorder.create(vol, 'stm_floor-2', 'mp3', { minFreeBytes: 8 * 1024 * 1024, onStopped: (s) => late.push(s.reason) });
      expect(late).toEqual(['disk_free']);
      r2.push(frame);
      expect(r2.sizeBytes).toBe(0);
      r2.discard();
    } finally {
      spawnSync('umount', [vol]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lists leftovers of an earlier run and finishes one as it is', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-rec-left-'));
    try {
      const tags = new FlvReader().push(readFileSync(fixture));
      const rec = Recorder.create(dir, 'stm_left-1', 'aac', { streamId: 'stm_left' });
      for (const t of tags) rec.push(t.body);
      // The file stream writes what was pushed; the process "dies" here.
      const raw = path.join(dir, 'stm_left-1.aac');
      const size = () => (existsSync(raw) ? statSync(raw).size : 0);
      await waitFor(() => size() > 0, 5_000, 10, 'the raw file');
      await waitSteady(size, 5_000, 50, 'the raw file written');
      const left = Recorder.leftovers(dir);
      expect(left).toEqual([expect.objectContaining({ streamId: 'stm_left', codec: 'aac', rawPath: path.join(dir, 'stm_left-1.aac') })]);
      const done = await Recorder.finishLeftover(left[0]!, ffmpegPath());
      expect(done).toMatchObject({ mimeType: 'audio/mp4', streamId: 'stm_left' });
      await done.release();
      expect(Recorder.leftovers(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
