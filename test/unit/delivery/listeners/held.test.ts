/**
 * Held-request caps (docs/behaviour.md §13, src/delivery/listeners/held.ts): per client address and in total; the
 * client is the socket peer, or the X-Forwarded-For client behind a trusted proxy; each refusal is
 * counted under its cause; a release gives one slot back; two gates over the same shared memory
 * (two HTTP threads) count node-wide.
 */
import { describe, expect, it } from 'vitest';
import { HeldRequests } from '../../../../src/delivery/listeners/held.js';
import { trustedProxies } from '../../../../src/base/http/client-address.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { createLogger } from '../../../../src/base/logger.js';
import type { RawRequestInfo } from '../../../../src/base/http/server.js';

const request = (peer: string, forwardedFor = ''): RawRequestInfo => ({
  remoteAddress: () => peer,
  header: (name) => (name === 'x-forwarded-for' ? forwardedFor : ''),
});

function gate(maxTotal: number, maxPerAddress: number) {
  const limits = new Limits(createLogger('error'));
  const held = new HeldRequests({ maxTotal, maxPerAddress, trusted: trustedProxies(['10.0.0.1']), limits });
  return { held, limits };
}

describe('HeldRequests', () => {
  it('caps per client address and counts the refusal', () => {
    const { held, limits } = gate(10, 2);
    const a = [held.acquire(request('203.0.113.1')), held.acquire(request('203.0.113.1'))];
    expect(a).toEqual(['203.0.113.1', '203.0.113.1']);
    expect(held.acquire(request('203.0.113.1'))).toBeNull();
    expect(limits.count('http_held_per_ip')).toBe(1);
    expect(held.acquire(request('203.0.113.2'))).not.toBeNull();
    expect(held.held('203.0.113.1')).toBe(2);
    expect(held.held()).toBe(3);
  });

  it('caps in total and counts the refusal', () => {
    const { held, limits } = gate(2, 2);
    expect(held.acquire(request('203.0.113.1'))).not.toBeNull();
    expect(held.acquire(request('203.0.113.2'))).not.toBeNull();
    expect(held.acquire(request('203.0.113.3'))).toBeNull();
    expect(limits.count('http_held')).toBe(1);
    expect(limits.count('http_held_per_ip')).toBe(0);
  });

  it('gives one slot back per release', () => {
    const { held } = gate(10, 2);
    const first = held.acquire(request('203.0.113.1'))!;
    held.acquire(request('203.0.113.1'));
    held.release(first);
    expect(held.held('203.0.113.1')).toBe(1);
    expect(held.held()).toBe(1);
    expect(held.acquire(request('203.0.113.1'))).not.toBeNull();
    expect(held.acquire(request('203.0.113.1'))).toBeNull();
  });

  it('counts node-wide when two gates share their memory (two HTTP threads)', () => {
    const limits = new Limits(createLogger('error'));
    const a = new HeldRequests({ maxTotal: 3, maxPerAddress: 2, trusted: trustedProxies([]), limits });
    const b = new HeldRequests({ maxTotal: 3, maxPerAddress: 2, trusted: trustedProxies([]), limits, memory: a.memory });
    expect(a.acquire(request('203.0.113.1'))).not.toBeNull();
    expect(b.acquire(request('203.0.113.1'))).not.toBeNull();
    expect(b.acquire(request('203.0.113.1'))).toBeNull(); // per address, across both
    expect(a.acquire(request('203.0.113.2'))).not.toBeNull();
    expect(b.acquire(request('203.0.113.3'))).toBeNull(); // in total, across both
    expect(a.held()).toBe(3);
    b.release('203.0.113.1');
    expect(a.held('203.0.113.1')).toBe(1);
    expect(limits.count('http_held_per_ip')).toBe(1);
    expect(limits.count('http_held')).toBe(1);
  });

  it('takes the X-Forwarded-For client only from a trusted proxy', () => {
    const { held } = gate(10, 1);
    // Two clients behind the trusted proxy are two addresses.
    expect(held.acquire(request('10.0.0.1', '203.0.113.1'))).not.toBeNull();
    expect(held.acquire(request('10.0.0.1', '203.0.113.2'))).not.toBeNull();
    expect(held.acquire(request('10.0.0.1', '203.0.113.1'))).toBeNull();
    // An untrusted peer cannot pick its address with the header.
    expect(held.acquire(request('198.51.100.7', '203.0.113.3'))).not.toBeNull();
    expect(held.acquire(request('198.51.100.7', '203.0.113.4'))).toBeNull();
    expect(held.held('198.51.100.7')).toBe(1);
  });

  it('keeps counting right while the addresses it remembers turn over (more clients than it keeps cells for)', () => {
    const { held } = gate(100_000, 1);
    // Each of 40,000 addresses (more than the counter remembers) holds one request and gives it back, twice.
    const addr = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 40_000; i++) {
        const k = held.acquire(request(addr(i)));
        expect(k).not.toBeNull();
        held.release(k!);
      }
    }
    expect(held.held()).toBe(0);
    // A remembered address and a forgotten one are capped alike, and count back to zero.
    for (const i of [39_999, 0]) {
      const k = held.acquire(request(addr(i)))!;
      expect(held.acquire(request(addr(i)))).toBeNull();
      held.release(k);
      expect(held.held(addr(i))).toBe(0);
    }
    expect(held.held()).toBe(0);
  });
});
