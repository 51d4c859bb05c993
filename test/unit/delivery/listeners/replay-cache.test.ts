// The edge-log replay cache (docs/edges.md "Counting behind edges"): a line accepted once is seen
// again, whatever the bits of its MAC, for two generations; the tables are bounded.
import { describe, expect, it } from 'vitest';
import { ReplayCache } from '../../../../src/delivery/listeners/replay-cache.js';

const mac = (hex: string) => Buffer.from(hex.padEnd(64, '0'), 'hex');

describe('ReplayCache', () => {
  it.each([
    ['low halves with the top bit clear', '0123456701234567'],
    ['a second word with its top bit set', '01234567f1234567'],
    ['both words with their top bits set', 'ffffffffffffffff'],
  ])('sees a MAC again (%s)', (_what, head) => {
    const c = new ReplayCache(70_000, 8);
    expect(c.add(mac(head), 1_000)).toBe('added');
    expect(c.add(mac(head), 1_001)).toBe('seen');
    expect(c.add(mac(head), 70_500)).toBe('seen'); // the next generation still holds it
    expect(c.add(mac(head), 210_000)).toBe('added'); // two generations later it is gone
  });

  it('tells MACs apart and refuses lines once a generation is half full', () => {
    const c = new ReplayCache(70_000, 4); // 16 slots, 8 lines a generation
    for (let i = 0; i < 8; i++) expect(c.add(mac(`0000000${i}8000000${i}`), 0)).toBe('added');
    expect(c.add(mac('0000000980000009'), 0)).toBe('full');
    for (let i = 0; i < 8; i++) expect(c.add(mac(`0000000${i}8000000${i}`), 0)).toBe('seen');
  });
});
