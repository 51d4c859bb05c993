// Capping glibc's malloc arenas (src/native/memory.ts `limitMallocArenas`, native/binding/memory.cc;
// docs/decisions.md "Giving freed memory back"): its argument is checked and an operator's own
// setting is left alone. What the cap does to a running node: test/integration/cli/malloc-arenas.test.ts.
import { describe, expect, it } from 'vitest';
import { limitMallocArenas } from '../../../src/native/memory.js';

describe('capping malloc arenas', () => {
  it("leaves the operator's own setting alone", () => {
    expect(limitMallocArenas(4, { MALLOC_ARENA_MAX: '8' })).toBe('operator');
    expect(limitMallocArenas(4, { GLIBC_TUNABLES: 'glibc.malloc.check=0:glibc.malloc.arena_max=3' })).toBe('operator');
  });

  it('refuses a count outside 1–64 or not an integer', () => {
    for (const n of [0, -1, 65, 1.5, Number.NaN]) expect(() => limitMallocArenas(n, { MALLOC_ARENA_MAX: '2' })).toThrow(RangeError);
  });
});
