// Giving freed C heap back to the kernel (src/native/memory.ts, native/binding/memory.cc): the
// allocator is trimmed after a major V8 collection, at most once per interval.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { trimAfterMajorGc, trimMalloc } from '../../../src/native/memory.js';

setFlagsFromString('--expose-gc');
// `gc()` is a full collection; `gc({ type: 'minor' })` a scavenge (Node 20's `{ type: 'major' }` is one too).
const gc = runInNewContext('gc') as (o?: { type: 'minor' }) => void;

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('trimming the C heap', () => {
  it('trimMalloc answers whether pages went back (glibc) without throwing', () => {
    // Freed blocks inside the heap: something to give back.
    const blocks = Array.from({ length: 2000 }, () => Buffer.allocUnsafeSlow(4096));
    blocks.length = 0;
    expect(typeof trimMalloc()).toBe('boolean');
  });

  it('trims after a major collection, at most once per interval, and stops', async () => {
    const t = trimAfterMajorGc(60_000);
    try {
      gc();
      await until(() => t.stats.trims === 1);
      expect(t.stats.majorGcs).toBeGreaterThanOrEqual(1);
      const seen = t.stats.majorGcs;
      gc();
      await until(() => t.stats.majorGcs > seen);
      expect(t.stats.trims).toBe(1); // within the interval: not again
      expect(t.stats.trimMs).toBeGreaterThanOrEqual(0);
    } finally {
      t.stop();
    }
    const every = trimAfterMajorGc(0);
    try {
      gc();
      await until(() => every.stats.trims === 1);
      gc();
      await until(() => every.stats.trims === 2);
      // Minor collections alone trim nothing.
      const before = every.stats.trims;
      gc({ type: 'minor' });
      await new Promise((r) => setTimeout(r, 100));
      expect(every.stats.trims).toBe(before);
    } finally {
      every.stop();
    }
  });

  it('refuses a negative interval', () => {
    expect(() => trimAfterMajorGc(-1)).toThrow(RangeError);
    expect(() => trimAfterMajorGc(Number.NaN)).toThrow(RangeError);
  });
});
