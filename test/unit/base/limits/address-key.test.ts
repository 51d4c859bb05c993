/**
 * Per-address keys of the caps (docs/listeners.md "Per-address caps"):
 * - `addressGroup`: IPv4 stands for itself, IPv4-mapped IPv6 is its IPv4 address, other IPv6 is
 *   grouped by /64 (every spelling of one /64 is one group);
 * - `addressSlots` is a keyed hash: the slots of an address differ from one secret to another;
 * - every per-address counter caps a /64 as one address and two /64s apart: `PerAddressCounter`
 *   (Icecast sources, WHEP offers), `SharedAddressCounter` (held requests, progressive listening,
 *   counted in shared memory by every HTTP thread, which all read the secret from that memory),
 *   and `PerAddressRate` (HLS sessions per minute), which admits at most `max` within any window.
 */
import { describe, expect, it } from 'vitest';
import { addressGroup, addressSlots, newAddressSecret, PerAddressRate } from '../../../../src/base/limits/address-key.js';
import { PerAddressCounter } from '../../../../src/base/limits/limits.js';
import { SharedAddressCounter } from '../../../../src/delivery/listeners/shared-counter.js';

describe('addressGroup', () => {
  it('keeps IPv4, maps IPv4-mapped IPv6 to IPv4 and groups IPv6 by /64', () => {
    expect(addressGroup('203.0.113.7')).toBe('203.0.113.7');
    expect(addressGroup('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressGroup('0000:0000:0000:0000:0000:ffff:cb00:7107')).toBe('203.0.113.7');
    expect(addressGroup('[::FFFF:203.0.113.7]')).toBe('203.0.113.7');
    const g = '2001:db8:0:1::/64';
    for (const a of ['2001:db8:0:1::1', '2001:0db8:0000:0001:ffff:ffff:ffff:ffff', '2001:DB8:0:1:a:b:c:d', '[2001:db8:0:1::2]', '2001:db8:0:1::3%eth0']) {
      expect(addressGroup(a), a).toBe(g);
    }
    expect(addressGroup('2001:db8:0:2::1')).toBe('2001:db8:0:2::/64');
    expect(addressGroup('::1')).toBe('0:0:0:0::/64');
    expect(addressGroup('2001:db8::1.2.3.4')).toBe('2001:db8:0:0::/64');
    expect(addressGroup('not an address')).toBe('not an address');
  });
});

describe('addressSlots', () => {
  it('depends on the secret (keyed), not only on the address', () => {
    const a = newAddressSecret();
    const b = newAddressSecret();
    expect(a).not.toEqual(b);
    const addrs = Array.from({ length: 16 }, (_, i) => `198.51.100.${i}`);
    expect(addrs.map((x) => addressSlots(a, x))).not.toEqual(addrs.map((x) => addressSlots(b, x)));
    // Stable under one secret, and one /64 is one key.
    expect(addressSlots(a, '2001:db8::1')).toEqual(addressSlots(a, '2001:db8::ffff:1'));
    expect(addressSlots(a, '2001:db8::1')).not.toEqual(addressSlots(a, '2001:db8:0:1::1'));
    expect(addressSlots(a, '::ffff:198.51.100.1')).toEqual(addressSlots(a, '198.51.100.1'));
  });
});

describe('per-address caps count a /64 as one address', () => {
  it('PerAddressCounter', () => {
    const c = new PerAddressCounter(100, 2);
    expect(c.tryAcquire('2001:db8:1:2::1')).toBe('ok');
    expect(c.tryAcquire('2001:db8:1:2::2')).toBe('ok');
    expect(c.tryAcquire('2001:db8:1:2:ffff::3')).toBe('per_address'); // same /64
    expect(c.tryAcquire('2001:db8:1:3::1')).toBe('ok'); // another /64
    expect(c.held('2001:db8:1:2::99')).toBe(2);
    c.release('2001:db8:1:2::1');
    expect(c.tryAcquire('2001:db8:1:2::7')).toBe('ok');
    expect(c.tryAcquire('::ffff:192.0.2.1')).toBe('ok');
    expect(c.tryAcquire('192.0.2.1')).toBe('ok');
    expect(c.tryAcquire('192.0.2.1')).toBe('per_address'); // the mapped one counted as IPv4
  });

  it('SharedAddressCounter, across threads sharing its memory (and its secret)', () => {
    const main = new SharedAddressCounter(1000, 2);
    const worker = new SharedAddressCounter(1000, 2, main.memory); // as a worker thread attaches
    expect(main.tryAcquire('2001:db8:1:2::1')).toBe('ok');
    expect(worker.tryAcquire('2001:db8:1:2::2')).toBe('ok');
    expect(worker.tryAcquire('2001:db8:1:2::3')).toBe('per_address');
    expect(main.tryAcquire('2001:db8:1:2:aaaa::4')).toBe('per_address');
    expect(main.tryAcquire('2001:db8:1:3::1')).toBe('ok');
    expect(worker.held('2001:db8:1:2::ffff')).toBe(2);
    worker.release('2001:db8:1:2::2');
    expect(main.tryAcquire('2001:db8:1:2::5')).toBe('ok');
    expect(main.held()).toBe(3);
    // Another counter has another secret, and memory of the wrong size is refused.
    expect(() => new SharedAddressCounter(1, 1, new SharedArrayBuffer(64))).toThrow(/bytes/);
  });

  it('PerAddressRate admits max per window (refusals not counted), per /64, and frees up as windows pass', () => {
    let now = 60_000 * 1000 + 59_000; // 1 s before a window ends
    const r = new PerAddressRate(3, 60_000, () => now);
    expect([r.take('2001:db8::1'), r.take('2001:db8::2')]).toEqual([true, true]);
    now += 2000; // the next window: the previous one still counts
    expect(r.take('2001:db8::3')).toBe(true);
    expect(r.take('2001:db8::4')).toBe(false);
    expect(r.take('2001:db8::4')).toBe(false);
    expect(r.take('2001:db8:0:1::1')).toBe(true); // another /64
    expect(r.count('2001:db8::9')).toBe(3);
    now += 60_000; // the window of the first two is gone
    expect([r.take('2001:db8::5'), r.take('2001:db8::6'), r.take('2001:db8::7')]).toEqual([true, true, false]);
    now += 5 * 60_000; // long idle: everything forgotten
    expect(r.count('2001:db8::1')).toBe(0);
  });
});
