// A mount over a real layer (the native Segmenter fed the AAC and MP3 fixtures) and listeners whose
// sinks record what they are handed: the burst (2–4 s from a chunk boundary), real time after it,
// the same chunk buffers for every listener, ICY blocks every 16000 bytes (the title once, then
// empty blocks, a changed title once more), the slow-listener cut, and the end of the stream.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Layer } from '../../../../src/live/media/layer.js';
import { Segmenter } from '../../../../src/native/segmenter.js';
import { Mount, MountListener, SLOW_MS, type ListenSink, type LeaveReason } from '../../../../src/delivery/progressive/mount.js';
import { ICY_METAINT } from '../../../../src/delivery/progressive/icy.js';

const fixtures = path.resolve(import.meta.dirname, '../../../fixtures');
const read = (f: string) => new FlvReader().push(readFileSync(path.join(fixtures, f)));
const AAC = read('aac/sine48k_stereo_128k.flv');
const MP3 = read('mp3/sine44k1_stereo_128k.flv');

function aacLayer(partTargetMs = 500): Layer {
  return new Layer({
    name: 'a128', kbps: 128, container: 'fmp4', targetDurationMs: 2000, partTargetMs, windowSegments: 6, passthrough: true,
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs, expectCodec: 'aac' }),
  });
}
function mp3Layer(): Layer {
  return new Layer({
    name: 'a128', kbps: 128, container: 'ts', targetDurationMs: 2000, partTargetMs: 0, windowSegments: 6, passthrough: true,
    createSegmenter: () => new Segmenter({ container: 'ts', targetDurationMs: 2000, expectCodec: 'mp3' }),
  });
}

/** Feeds `seconds` of the fixture's audio (looped, timestamps continuing) into `l`. */
function feeder(l: Layer, tags: typeof AAC) {
  const header = tags.find((t) => t.body[0]! >> 4 === 10 && t.body[1] === 0);
  const frames = tags.filter((t) => t !== header);
  const step = frames[1]!.timestampMs - frames[0]!.timestampMs;
  let i = 0;
  let ts = 0;
  if (header) l.push(0, header.body);
  return (seconds: number) => {
    const until = ts + seconds * 1000;
    while (ts < until) {
      l.push(Math.round(ts), frames[i % frames.length]!.body);
      i++;
      ts += i % frames.length === 0 ? step : frames[i % frames.length]!.timestampMs - frames[(i - 1) % frames.length]!.timestampMs;
    }
  };
}

/** A sink that records what it is handed; `ok` is what `write` answers. */
class RecordingSink implements ListenSink {
  writes: Uint8Array[] = [];
  ok = true;
  ended = false;
  closed = false;
  /** What the owner calls when the connection drained (set by `client`). */
  writable: (() => void) | null = null;
  write(chunk: Uint8Array): boolean {
    this.writes.push(chunk);
    return this.ok;
  }
  cork(fn: () => void): void {
    fn();
  }
  end(): void {
    this.ended = true;
  }
  close(): void {
    this.closed = true;
  }
  bytes(): Buffer {
    return Buffer.concat(this.writes);
  }
}

/** Seconds of ADTS audio in `b` (1024 samples per frame at `rate`); throws unless `b` is whole ADTS frames. */
function adtsSeconds(b: Buffer, rate = 48000): number {
  let n = 0;
  for (let o = 0; o < b.length; n++) {
    if (b[o] !== 0xff || (b[o + 1]! & 0xf6) !== 0xf0) throw new Error(`no ADTS sync at ${o}`);
    o += ((b[o + 3]! & 3) << 11) | (b[o + 4]! << 3) | (b[o + 5]! >> 5);
  }
  return (n * 1024) / rate;
}

/** A listener whose owner records why the mount let it go. */
class TestListener extends MountListener {
  readonly why: LeaveReason[] = [];
  constructor(
    readonly sink: RecordingSink,
    readonly icy: boolean,
  ) {
    super();
    sink.writable = () => this.writable();
  }
  left(reason: LeaveReason): void {
    this.why.push(reason);
  }
}

function client(sink: RecordingSink, icy = false) {
  const c = new TestListener(sink, icy);
  return { c, left: c.why };
}

describe('Mount', () => {
  it('gives a new listener 2–2.6 s of burst on an LL-HLS layer, then each new part as it comes', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(8);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const s = new RecordingSink();
    m.add(client(s).c);
    const burst = adtsSeconds(s.bytes());
    expect(burst).toBeGreaterThanOrEqual(2);
    expect(burst).toBeLessThanOrEqual(2.6);
    const before = s.writes.length;
    feed(3);
    expect(s.writes.length).toBeGreaterThanOrEqual(before + 5);
    expect(adtsSeconds(s.bytes())).toBeGreaterThan(burst + 2.4);
  });

  it('gives 3.5–4 s of burst on a classic (2 s segment) layer, starting on an MP3 frame', () => {
    const l = mp3Layer();
    feeder(l, MP3)(9);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const s = new RecordingSink();
    m.add(client(s).c);
    const b = s.bytes();
    expect([b[0], b[1]! & 0xe0]).toEqual([0xff, 0xe0]);
    const seconds = (b.length * 8) / 128_000; // CBR 128 kbps
    expect(seconds).toBeGreaterThanOrEqual(3.4);
    expect(seconds).toBeLessThanOrEqual(4.1);
  });

  it('hands every listener the same chunk buffers (no per-listener copy)', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(6);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const a = new RecordingSink();
    const b = new RecordingSink();
    m.add(client(a).c);
    m.add(client(b).c);
    feed(2);
    expect(a.writes.length).toBe(b.writes.length);
    a.writes.forEach((w, i) => expect(w).toBe(b.writes[i]));
    expect(m.size).toBe(2);
  });

  it('interleaves ICY blocks every 16000 bytes: the title once, then empty blocks; a new title once', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(6);
    let title: string | null = 'Artist - First';
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => title });
    const s = new RecordingSink();
    const plain = new RecordingSink();
    m.add(client(s, true).c);
    m.add(client(plain).c);
    feed(4);
    title = "O'Brien - Second";
    feed(6);
    const b = s.bytes();
    const audio: Buffer[] = [];
    const titles: string[] = [];
    let o = 0;
    for (;;) {
      audio.push(b.subarray(o, Math.min(o + ICY_METAINT, b.length)));
      o += ICY_METAINT;
      if (o >= b.length) break;
      const n = b[o]!;
      titles.push(b.subarray(o + 1, o + 1 + n * 16).toString('utf8').replace(/\0+$/, ''));
      o += 1 + n * 16;
    }
    expect(titles.length).toBeGreaterThan(8);
    expect(titles[0]).toBe("StreamTitle='Artist - First';");
    const second = titles.indexOf("StreamTitle='O\\'Brien - Second';"); // the quote escaped (src/delivery/progressive/icy.ts)
    expect(second).toBeGreaterThan(1);
    expect(titles.filter((t, i) => i !== 0 && i !== second).every((t) => t === '')).toBe(true);
    // The audio between the blocks is exactly what a listener without ICY got.
    expect(Buffer.concat(audio)).toEqual(plain.bytes());
  });

  it('cuts a listener whose unsent audio passes 10 s; the others go on', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(6);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const slow = new RecordingSink();
    const fine = new RecordingSink();
    const sc = client(slow);
    const fc = client(fine);
    m.add(sc.c);
    m.add(fc.c);
    slow.ok = false; // every write from now on meets backpressure
    feed(1);
    const handed = slow.writes.length;
    feed(4);
    expect(slow.writes.length).toBe(handed + 0); // blocked: nothing more is handed over until writable
    slow.writable!(); // drained a little: one more batch, still backpressured
    // Unsent counts from the start of the burst (the last batch known sent): 2–2.5 s + 6.5 s fed.
    expect(SLOW_MS).toBe(10_000);
    feed(1.5);
    expect(sc.left).toEqual([]);
    feed(2.5);
    expect(sc.left).toEqual(['slow']);
    expect(slow.closed).toBe(true);
    expect(fc.left).toEqual([]);
    expect(m.size).toBe(1);
    const got = fine.writes.length;
    feed(1);
    expect(fine.writes.length).toBeGreaterThan(got);
  });

  it('a listener that catches up is not cut', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(6);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const s = new RecordingSink();
    const c = client(s);
    m.add(c.c);
    for (let i = 0; i < 10; i++) {
      s.ok = false;
      feed(1.5); // 1.5 s behind, then drained
      s.ok = true;
      s.writable!();
    }
    expect(c.left).toEqual([]);
  });

  it('ends every listener when the layer ends, and lets go of the layer', () => {
    const l = aacLayer();
    const feed = feeder(l, AAC);
    feed(5);
    const m = new Mount({ streamId: 'stm_x', layer: l, nowPlaying: () => null });
    const s = new RecordingSink();
    const c = client(s);
    const h = m.add(c.c);
    feed(1);
    l.end();
    expect(s.ended).toBe(true);
    expect(c.left).toEqual(['ended']);
    expect(m.open).toBe(false);
    h.remove(); // the client's late goodbye is harmless
    expect(() => m.add(client(new RecordingSink()).c)).toThrow();
  });
});

describe('MountListener', () => {
  it('keeps its position, ICY state and flags in six fields, the flags in one small integer', () => {
    const c = new TestListener(new RecordingSink(), false);
    // The subclass's own fields (why, sink, icy) come after the base's.
    expect(Object.keys(c).slice(0, 6)).toEqual(['next', 'ackedMs', 'icyLeft', 'titleVersion', 'flags', 'mount']);
    expect([c.pending, c.blocked, c.dropped]).toEqual([true, false, false]);
    c.blocked = true;
    c.dropped = true;
    expect([c.pending, c.blocked, c.dropped]).toEqual([true, true, true]);
    c.pending = false;
    c.blocked = false;
    expect([c.pending, c.blocked, c.dropped]).toEqual([false, false, true]);
  });
});
