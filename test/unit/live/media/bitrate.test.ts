import { describe, expect, it } from 'vitest';
import { BitrateMonitor } from '../../../../src/live/media/bitrate.js';

/** Feeds `kbps` for `ms` in 20 ms messages from `start`; returns spikes. */
function feed(m: BitrateMonitor, start: number, ms: number, kbps: number) {
  const spikes = [];
  for (let t = start; t < start + ms; t += 20) {
    const s = m.add((kbps * 1000 * 0.02) / 8, t);
    if (s) spikes.push({ t, ...s });
  }
  return spikes;
}

describe('BitrateMonitor', () => {
  it('stays quiet at the nominal rate and just under 1.5×', () => {
    const m = new BitrateMonitor({ nominalKbps: 128 });
    expect(feed(m, 0, 20_000, 128)).toEqual([]);
    expect(feed(m, 20_000, 20_000, 190)).toEqual([]);
  });

  it('reports a sustained spike once the 5 s average exceeds 1.5 × nominal, then at most once a minute', () => {
    const m = new BitrateMonitor({ nominalKbps: 128 });
    feed(m, 0, 10_000, 128);
    const spikes = feed(m, 10_000, 130_000, 400);
    expect(spikes.length).toBe(3); // ~t=11.6 s, then 60 s and 120 s later
    expect(spikes[0]!.t).toBeGreaterThan(10_000);
    expect(spikes[0]!.t).toBeLessThan(15_000);
    expect(spikes[1]!.t - spikes[0]!.t).toBeGreaterThanOrEqual(60_000);
    expect(spikes[0]).toMatchObject({ nominalKbps: 128 });
    expect(spikes[0]!.measuredKbps).toBeGreaterThan(192);
  });

  it('ignores a burst shorter than the window', () => {
    const m = new BitrateMonitor({ nominalKbps: 128 });
    feed(m, 0, 10_000, 128);
    expect(feed(m, 10_000, 1_000, 300)).toEqual([]); // 1 s at 300 → 5 s average ≈ 162 kbps
    expect(feed(m, 11_000, 10_000, 128)).toEqual([]);
  });
});
