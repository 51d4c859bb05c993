/**
 * ADTS framing limits (ISO/IEC 14496-3 §1.A.2.2): `frame_length` is 13 bits and counts the 7-byte
 * header, so one ADTS frame carries at most 8184 bytes of raw AAC. Larger frames are refused with a
 * RangeError, and the recorder drops them (once reported) instead of failing.
 */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ADTS_MAX_PAYLOAD_BYTES, adtsFrame, parseAsc } from '../../../../src/live/media/adts.js';
import { Recorder } from '../../../../src/live/media/recorder.js';

const LC_48K_STEREO = parseAsc(Uint8Array.from([0x11, 0x90]))!;

/** `frame_length` of an ADTS header. */
const frameLength = (h: Uint8Array) => ((h[3]! & 3) << 11) | (h[4]! << 3) | (h[5]! >> 5);

describe('adtsFrame', () => {
  it('frames 8184 bytes of raw AAC with frame_length 8191 and the header fields intact', () => {
    expect(ADTS_MAX_PAYLOAD_BYTES).toBe(8184);
    const raw = new Uint8Array(8184).fill(0xa5);
    const f = adtsFrame(LC_48K_STEREO, raw);
    expect(f.length).toBe(8191);
    expect(frameLength(f)).toBe(8191);
    expect([f[0], f[1]! & 0xf6]).toEqual([0xff, 0xf0]); // syncword, MPEG-4, layer 0
    expect((f[2]! >> 6) & 3).toBe(1); // profile: AAC-LC
    expect((f[2]! >> 2) & 0x0f).toBe(3); // 48 kHz
    expect(((f[2]! & 1) << 2) | (f[3]! >> 6)).toBe(2); // stereo: the length did not spill into the channel bits
    expect(f.subarray(7).every((b) => b === 0xa5)).toBe(true);
  });

  it('refuses 8185 bytes with a RangeError instead of writing a wrapped header', () => {
    expect(() => adtsFrame(LC_48K_STEREO, new Uint8Array(8185))).toThrow(RangeError);
    expect(() => adtsFrame(LC_48K_STEREO, new Uint8Array(8185))).toThrow(/8185 bytes.*8184/);
  });
});

describe('Recorder with an oversized AAC frame', () => {
  it('drops it, reports the first drop once, and records the frames around it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-adts-'));
    try {
      const drops: string[] = [];
      const rec = await Recorder.open(dir, 'stm_big', 'aac', { onDrop: (why) => drops.push(why) });
      const tag = (packetType: number, body: ArrayLike<number>) => Uint8Array.from([0xaf, packetType, ...Array.from(body)]);
      rec.push(tag(0, [0x11, 0x90])); // AudioSpecificConfig
      rec.push(tag(1, new Uint8Array(100)));
      expect(() => rec.push(tag(1, new Uint8Array(8185)))).not.toThrow();
      rec.push(tag(1, new Uint8Array(9000)));
      rec.push(tag(1, new Uint8Array(8184)));
      expect(rec.droppedFrames).toBe(2);
      expect(drops).toHaveLength(1);
      expect(drops[0]).toMatch(/8185 bytes/);
      const done = await rec.finish(null);
      const bytes = readFileSync(done.path);
      expect(bytes.length).toBe(107 + 8191);
      expect(frameLength(bytes)).toBe(107);
      expect(frameLength(bytes.subarray(107))).toBe(8191);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
