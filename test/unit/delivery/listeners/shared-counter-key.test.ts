/**
 * The connection caps' table keeps one string per client address (src/delivery/listeners/shared-counter.ts
 * `key`): every progressive connection of one address holds that string, not a copy of its own.
 */
import { describe, expect, it } from 'vitest';
import { SharedAddressCounter } from '../../../../src/delivery/listeners/shared-counter.js';

/** A string equal to `s` but a distinct heap object (as each request's address text is). */
const fresh = (s: string) => Buffer.from(s, 'utf8').toString('utf8');

describe('SharedAddressCounter.key', () => {
  it('answers the string first held for an address while it is held, the argument otherwise', () => {
    const c = new SharedAddressCounter(100, 10);
    const first = fresh('203.0.113.7');
    expect(c.key(first)).toBe(first);
    expect(c.tryAcquire(first)).toBe('ok');
    const second = fresh('203.0.113.7');
    expect(c.tryAcquire(second)).toBe('ok');
    // (Which string object it is cannot be seen from JavaScript; the heap snapshots of
    // bench/listener-memory.ts show one per address.)
    expect(c.key(second)).toBe('203.0.113.7');
    expect(c.key('198.51.100.1')).toBe('198.51.100.1');
    c.release(second);
    c.release(first);
    const third = fresh('203.0.113.7');
    expect(c.key(third)).toBe(third); // nothing held: its own argument
    expect(c.held()).toBe(0);
  });
});
