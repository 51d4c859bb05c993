/**
 * The WHIP jitter buffer (src/live/ingest/rtp-jitter.ts): packets out in sequence order across the
 * 16-bit wrap, reordered ones put back, lost ones concealed with PLC frames (TOC only, code 0) so
 * the output keeps the sender's duration, skipped time filled the same way, late and duplicate
 * packets dropped, and a flood released rather than held.
 */
import { describe, expect, it } from 'vitest';
import { OpusJitterBuffer } from '../../../../src/live/ingest/rtp-jitter.js';

/** A 20 ms CELT fullband packet (TOC config 31, code 0) carrying `n`. */
const pkt = (n: number) => Uint8Array.of(0xf8, n & 0xff, (n >> 8) & 0xff);

function buffer(delayMs = 60) {
  const out: Array<{ samples: number; n: number | null }> = [];
  const b = new OpusJitterBuffer({ delayMs, maxFillMs: 10_000, maxPackets: 64, out: (samples, p, filled) => out.push({ samples, n: filled ? null : p[1]! | (p[2]! << 8) }) });
  return { b, out };
}

describe('OpusJitterBuffer', () => {
  it('puts reordered packets back in order across the sequence wrap', () => {
    const { b, out } = buffer();
    const order = [0, 1, 3, 2, 4, 6, 5, 7];
    for (const i of order) b.push((65533 + i) & 0xffff, (4_294_966_000 + i * 960) >>> 0, pkt(i), 0);
    b.flush(0);
    expect(out.map((o) => o.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(out.map((o) => o.samples)).toEqual([0, 960, 1920, 2880, 3840, 4800, 5760, 6720]);
    expect(b.stats).toMatchObject({ received: 8, reordered: 2, lost: 0, filled: 0 });
  });

  it('waits delayMs for a missing packet, then conceals it with a PLC frame', () => {
    const { b, out } = buffer(60);
    b.push(10, 0, pkt(0), 0);
    b.push(12, 1920, pkt(2), 20);
    expect(out.map((o) => o.n)).toEqual([0]);
    expect(b.deadline()).toBe(80);
    b.flush(79);
    expect(out).toHaveLength(1);
    b.flush(80);
    expect(out).toEqual([
      { samples: 0, n: 0 },
      { samples: 960, n: null },
      { samples: 1920, n: 2 },
    ]);
    expect(b.stats).toMatchObject({ lost: 1, filled: 1 });
    // The late packet comes after its turn: dropped, as is a duplicate.
    b.push(11, 960, pkt(1), 100);
    b.push(12, 1920, pkt(2), 100);
    expect(b.stats.late).toBe(2);
    expect(out).toHaveLength(3);
  });

  it('fills time the sender skipped (DTX, a pause) so the duration is kept', () => {
    const { b, out } = buffer();
    b.push(1, 1000, pkt(1), 0);
    b.push(2, 1000 + 960 * 6, pkt(2), 0); // 100 ms later in RTP time, next in sequence
    expect(out.map((o) => o.n)).toEqual([1, null, null, null, null, null, 2]);
    expect(out.at(-1)!.samples).toBe(960 * 6);
  });

  it('restarts on a new source: the next packet starts a new run, the position goes on', () => {
    const { b, out } = buffer();
    b.push(500, 10_000, pkt(1), 0);
    b.push(502, 10_000 + 1920, pkt(3), 0); // waits for 501
    b.restart();
    b.push(480, 77, pkt(9), 1); // lower sequence number, other timestamps: not taken as late
    // What was held went out first (the missing 501 concealed), then the new run.
    expect(out.map((o) => o.n)).toEqual([1, null, 3, 9]);
    expect(out.map((o) => o.samples)).toEqual([0, 960, 1920, 2880]);
  });

  it('releases a flood instead of holding it', () => {
    const { b, out } = buffer(60_000);
    b.push(0, 0, pkt(0), 0);
    for (let i = 2; i < 200; i++) b.push(i, i * 960, pkt(i), 0);
    expect(b.size()).toBeLessThanOrEqual(64);
    expect(out.length).toBeGreaterThan(100);
  });

  it('makes PLC frames that decoders take as one frame of the last packet\'s size', () => {
    const { b } = buffer(0);
    const frames: Uint8Array[] = [];
    const jb = new OpusJitterBuffer({ delayMs: 0, maxFillMs: 10_000, maxPackets: 64, out: (_s, p, filled) => filled && frames.push(p) });
    jb.push(1, 0, Uint8Array.of(0x79, 1, 2), 0); // SILK WB 20 ms, code 1 (two frames: 40 ms)
    jb.push(3, 1920 * 2, Uint8Array.of(0x79, 1, 2), 1);
    jb.flush(10);
    expect(b.size()).toBe(0);
    expect(frames.length).toBeGreaterThan(0);
    expect(frames[0]).toEqual(Uint8Array.of(0x78)); // the same config, code 0, no frame data (RFC 6716 §3.2.1)
  });
});
