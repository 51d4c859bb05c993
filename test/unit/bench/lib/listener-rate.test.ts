/**
 * bench/lib/listener-rate.ts, how the players bench judges a progressive listener: fed synthetic
 * read series (no sockets, no timings), it must call a listener fed 2 s bursts at real time held
 * wherever the window's edges fall, one fed small pieces at real time held, and catch a listener
 * the server feeds at 85 % of real time or leaves without audio for 3 s.
 */
import { describe, expect, it } from 'vitest';
import { GROUP_MS, groupMsFor, listenerHeld, MAX_LAG_MS, measureReads, streamFigures, summarizeListeners, type MeterOptions, type StreamFigures } from '../../../../bench/lib/listener-rate.js';

const R = 16_000;
/** A 10 s window that opens 10 s after the first byte (the connect burst at 0). */
const OPTS: MeterOptions = { bytesPerS: R, from: 10_000, to: 20_000, settleMs: 5000, groupMs: GROUP_MS };
const MIN_SPAN_S = 5;
type Read = [number, number, boolean?];

/** A burst-on-connect of 64 KB at 0, then `bytes` every `periodMs` from `phase`, each burst handed over in the reads `split` (ms after the burst, share of it). */
function bursts(periodMs: number, bytes: number, phase: number, split: Array<[number, number]> = [[0, 1]], until = 22_000): Read[] {
  const out: Read[] = [[0, 65_536]];
  for (let t = phase; t < until; t += periodMs) for (const [dt, share] of split) out.push([t + dt, Math.round(bytes * share)]);
  return out.sort((a, b) => a[0] - b[0]);
}

/** A burst-on-connect, then `bytes` every `everyMs` (one MPEG audio frame at a time), with nothing between `gapFrom` and `gapTo`. */
function steady(bytes: number, everyMs: number, gapFrom = Infinity, gapTo = Infinity, until = 22_000): Read[] {
  const out: Read[] = [[0, 65_536]];
  for (let t = 100; t < until; t += everyMs) if (t < gapFrom || t >= gapTo) out.push([t, bytes]);
  return out;
}

const judge = (reads: Read[], o: MeterOptions = OPTS) => {
  const r = measureReads(reads, o);
  return { ...r, ...listenerHeld(r, R, MIN_SPAN_S) };
};

describe('ListenerMeter and listenerHeld', () => {
  it('holds a listener fed 2 s bursts at real time, wherever the window edges fall, even when the kernel splits a burst', () => {
    const rates: number[] = [];
    for (let phase = 0; phase < 2000; phase += 50) {
      // 32,000 B per 2 s, handed over in three reads over 9 ms: 4 or 5 bursts between the ends.
      const r = judge(bursts(2000, 32_000, phase, [[0, 0.5], [3, 0.25], [9, 0.25]]));
      expect(r.held, `phase ${phase}: ${JSON.stringify(r)}`).toBe(true);
      expect(r.lagMs).toBeLessThanOrEqual(20);
      rates.push(r.rate);
    }
    expect(Math.min(...rates)).toBeCloseTo(R, -1);
    expect(Math.max(...rates)).toBeCloseTo(R, -1);
  });

  it('takes a burst that began just before the window as before it, and the last burst whole though its reads end after the window', () => {
    // Heads 2 ms before the window opens and 2 ms before it closes; the rest of each 5 ms later.
    const r = judge(bursts(2000, 32_000, 9998 - 8000, [[0, 0.5], [5, 0.5]]));
    expect(r).toMatchObject({ held: true, rate: R, spanS: 8 });
  });

  it('does not hold the same bursts at 85 % of real time', () => {
    for (let phase = 0; phase < 2353; phase += 50) {
      const r = judge(bursts(2000 / 0.85, 32_000, phase, [[0, 0.5], [3, 0.5]]));
      expect(r.held, `phase ${phase}`).toBe(false);
      expect(r.why).toBe('slow');
      expect(r.rate).toBeGreaterThan(0.8 * R);
      expect(r.rate).toBeLessThan(0.9 * R);
      // A player that joined at the window's first burst falls more than its 1 s start-up buffer behind.
      expect(r.lagMs).toBeGreaterThan(MAX_LAG_MS);
    }
  });

  it('holds small steady pieces at real time (one frame every 25 ms)', () => {
    const r = judge(steady(400, 25));
    expect(r.held).toBe(true);
    expect(r.rate / R).toBeGreaterThan(0.99);
    expect(r.rate / R).toBeLessThan(1.01);
    expect(r.lagMs).toBeLessThanOrEqual(25);
  });

  it('does not hold a listener that gets nothing for 3 s, even when the server then catches up', () => {
    const gap = steady(400, 25, 13_000, 16_000);
    const plain = judge(gap);
    expect(plain).toMatchObject({ held: false, why: 'slow' });
    expect(plain.lagMs).toBeGreaterThanOrEqual(2975);
    // The 3 s it missed, sent at once when it resumes: the average is whole again, the stall is not.
    const caughtUp = gap.map(([t, n]): Read => [t, t === 16_000 ? n + 48_000 : n]);
    const r = judge(caughtUp);
    expect(r.rate / R).toBeGreaterThan(0.99);
    expect(r).toMatchObject({ held: false, why: 'stalled' });
    expect(r.lagMs).toBeGreaterThanOrEqual(2975);
    // A 2 s-burst listener whose burst comes 3 s late, the next ones on time again.
    const late = bursts(2000, 32_000, 0).map(([t, n]): Read => [t === 14_000 ? 17_000 : t, n]).sort((a, b) => a[0] - b[0]);
    expect(judge(late)).toMatchObject({ held: false, why: 'stalled' });
  });

  it('does not hold a listener whose stream stops before the window ends', () => {
    const r = judge(steady(400, 25, 17_000));
    expect(r.held).toBe(false);
    expect(r.lagMs).toBeGreaterThanOrEqual(2975);
  });

  it('calls a listener without two arrivals in the window unmeasured', () => {
    expect(judge([[0, 65_536]])).toMatchObject({ held: false, why: 'unmeasured', rate: -1 });
    expect(judge([[0, 65_536], [12_000, 32_000]])).toMatchObject({ held: false, why: 'unmeasured', rate: -1 });
    // The window's first arrival 5 s after the first byte at the earliest.
    const early: MeterOptions = { ...OPTS, from: 2000, to: 8000 };
    expect(measureReads(bursts(2000, 32_000, 1000), early)).toMatchObject({ spanS: 2 });
  });

  it('measures paced reads: a timed arrival, then what waited in the kernel read at the next resume', () => {
    const o = { ...OPTS, groupMs: groupMsFor(500) };
    // Frames every 25 ms; the socket reads one arrival, stops, and is resumed 500 ms after it stopped.
    const frames = steady(400, 25).slice(1);
    const reads: Read[] = [[0, 65_536]];
    let i = 0;
    while (i < frames.length) {
      const [t, n] = frames[i++]!;
      reads.push([t, n]);
      let waited = 0;
      while (i < frames.length && frames[i]![0] <= t + 500) waited += frames[i++]![1];
      if (waited) reads.push([t + 500, waited, true]);
    }
    const r = judge(reads, o);
    expect(r.held).toBe(true);
    expect(r.rate / R).toBeGreaterThan(0.97);
    expect(r.rate / R).toBeLessThan(1.03);
    // Pessimistic by up to the pacing period: drained bytes count when read.
    expect(r.lagMs).toBeLessThanOrEqual(525);
    // 2 s bursts whose second half waited for the next resume.
    const b = judge(bursts(2000, 32_000, 700, [[0, 0.5], [450, 0.5]]).map(([t, n]): Read => [t, n, t % 2000 === 1150]), o);
    expect(b).toMatchObject({ held: true, rate: R });
    // Each burst's first part read drained (it came just as the socket resumed), the rest timed 3 ms later:
    // the lag counts the first part as received, from when it was read.
    const c = judge(bursts(2000, 32_000, 700, [[0, 0.875], [3, 0.125]]).map(([t, n]): Read => [t, n, t % 2000 === 700]), o);
    expect(c).toMatchObject({ held: true, rate: R });
    expect(c.lagMs).toBeLessThanOrEqual(10);
  });
});

describe('summarizeListeners', () => {
  it('counts each listener of a step by outcome and spreads the figures, through a report\'s JSON', () => {
    const rs = [
      { rate: 16_000, spanS: 8, lagMs: 10, arrivals: 5, lateStart: false },
      { rate: 16_100, spanS: 10, lagMs: 0, arrivals: 6, lateStart: false },
      { rate: 13_600, spanS: 8, lagMs: 1400, arrivals: 4, lateStart: false },
      { rate: 16_050, spanS: 10, lagMs: 2500, arrivals: 400, lateStart: false },
      { rate: -1, spanS: 0, lagMs: NaN, arrivals: 0, lateStart: false },
      { rate: 16_000, spanS: 3, lagMs: 0, arrivals: 2, lateStart: true },
    ];
    const figures = JSON.parse(JSON.stringify(streamFigures(rs))) as StreamFigures;
    expect(summarizeListeners(figures, R, MIN_SPAN_S)).toMatchObject({ held: 2, slow: 1, stalled: 1, unmeasured: 2, unmeasuredLate: 1, rateMin: 13_600, rateP50: 16_050, lagMax: 2500, arrivalsP50: 6, arrivalsMax: 400 });
  });
});
