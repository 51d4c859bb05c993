/** The exact sliding-window limiter (src/base/auth/ratelimit/sliding-window.ts), and its headers (client addresses: test/unit/base/http/client-address.test.ts). */
import { describe, expect, it } from 'vitest';
import { SlidingWindowLimiter } from '../../../../src/base/auth/ratelimit/sliding-window.js';
import { writeRateLimitHeaders } from '../../../../src/base/auth/ratelimit/headers.js';

describe('SlidingWindowLimiter', () => {
  it('allows `limit` per window; a request counts until exactly T + window', () => {
    let t = 1000;
    const l = new SlidingWindowLimiter(60_000, () => t);
    for (let i = 0; i < 3; i++) {
      const d = l.take('a', 3);
      expect(d).toMatchObject({ allowed: true, remaining: 2 - i, used: i + 1, resetMs: 60_000 - i * 10 });
      t += 10;
    }
    expect(l.take('a', 3)).toMatchObject({ allowed: false, remaining: 0, used: 3, resetMs: 60_000 - 30 });
    t = 1000 + 59_999;
    expect(l.take('a', 3).allowed).toBe(false);
    t = 1000 + 60_000;
    expect(l.take('a', 3)).toMatchObject({ allowed: true, remaining: 0, resetMs: 10 });
    expect(l.take('a', 3).allowed).toBe(false);
  });

  it('never allows more than `limit` in any window-long interval (random arrivals)', () => {
    let t = 0;
    const l = new SlidingWindowLimiter(1000, () => t);
    const allowed: number[] = [];
    let seed = 7;
    for (let i = 0; i < 5000; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      t += seed % 40;
      if (l.take('k', 10).allowed) allowed.push(t);
    }
    for (let i = 10; i < allowed.length; i++) expect(allowed[i]! - allowed[i - 10]!).toBeGreaterThanOrEqual(1000);
  });

  it('refused requests are not recorded; peek does not count; keys are independent', () => {
    let t = 0;
    const l = new SlidingWindowLimiter(100, () => t);
    l.take('a', 1);
    for (let i = 0; i < 10; i++) l.take('a', 1);
    t = 100;
    expect(l.take('a', 1).allowed).toBe(true);
    expect(l.peek('b', 5)).toMatchObject({ used: 0, remaining: 5 });
    expect(l.peek('a', 1)).toMatchObject({ used: 1, remaining: 0 });
    expect(l.take('b', 1).allowed).toBe(true);
  });

  it('a plan change resizes the window, keeping the newest entries', () => {
    let t = 0;
    const l = new SlidingWindowLimiter(1000, () => t);
    for (let i = 0; i < 5; i++, t++) l.take('a', 5);
    expect(l.take('a', 10)).toMatchObject({ allowed: true, used: 6 });
    expect(l.take('a', 3)).toMatchObject({ allowed: false, used: 3 });
  });

  it('drops idle keys lazily', () => {
    let t = 0;
    const l = new SlidingWindowLimiter(100, () => t);
    l.take('a', 2);
    l.take('b', 2);
    t = 500;
    l.take('c', 2);
    expect(l.size).toBe(1);
  });
});

describe('rate-limit headers', () => {
  it('writes the draft headers, X-RateLimit-* and Retry-After (seconds rounded up)', () => {
    const h: Record<string, string> = {};
    writeRateLimitHeaders(h, 'free', 60, { allowed: false, limit: 60, remaining: 0, used: 60, resetMs: 1500 }, 10_000);
    expect(h).toEqual({
      'RateLimit-Policy': '"free";q=60;w=60',
      RateLimit: '"free";r=0;t=2',
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '12',
      'Retry-After': '2',
    });
  });
});
