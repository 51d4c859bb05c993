/**
 * An exact sliding-window rate limiter ("sliding log"), in memory (docs/api-platform.md).
 *
 * A request at time T counts against its key from T until T + window (exclusive), so at no instant
 * do more than `limit` counted requests lie within any window-long interval: there is no burst of
 * 2 × limit at a fixed-window edge, and nothing is approximated. Each key keeps a ring buffer of the
 * timestamps of its counted requests (8 bytes × limit: 4 KB for a paid account). Refused requests
 * are not recorded. Keys idle for a whole window are dropped lazily (no timers).
 */

/** What one `take` decided. Times in ms. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Requests still allowed now (after this one, when it was allowed). */
  remaining: number;
  /** Counted requests in the window (after this one, when it was allowed). */
  used: number;
  /**
   * Time until the oldest counted request leaves the window, i.e. until `remaining` grows again
   * (the whole window when nothing else is counted). When refused, this is the wait before a retry succeeds.
   */
  resetMs: number;
}

class Ring {
  ts: Float64Array;
  head = 0;
  count = 0;
  constructor(size: number) {
    this.ts = new Float64Array(size);
  }
  oldest(): number {
    return this.ts[this.head]!;
  }
  newest(): number {
    return this.ts[(this.head + this.count - 1) % this.ts.length]!;
  }
  evict(cutoff: number): void {
    while (this.count > 0 && this.ts[this.head]! <= cutoff) {
      this.head = (this.head + 1) % this.ts.length;
      this.count--;
    }
  }
  push(t: number): void {
    this.ts[(this.head + this.count) % this.ts.length] = t;
    this.count++;
  }
  /** A ring of `size` holding the newest min(count, size) entries. */
  resized(size: number): Ring {
    const r = new Ring(size);
    const keep = Math.min(this.count, size);
    for (let i = this.count - keep; i < this.count; i++) r.push(this.ts[(this.head + i) % this.ts.length]!);
    return r;
  }
}

export class SlidingWindowLimiter {
  private readonly rings = new Map<string, Ring>();
  private lastSweep = 0;

  /** @param windowMs window length (ms) @param now clock (ms) */
  constructor(readonly windowMs: number, private readonly now: () => number = Date.now) {}

  /** Counts one request for `key` against `limit` when there is room; never records a refused one. */
  take(key: string, limit: number): RateDecision {
    const now = this.now();
    this.sweep(now);
    const ring = this.ring(key, limit);
    ring.evict(now - this.windowMs);
    if (ring.count >= limit) {
      return { allowed: false, limit, remaining: 0, used: ring.count, resetMs: Math.max(0, ring.oldest() + this.windowMs - now) };
    }
    ring.push(now);
    return { allowed: true, limit, remaining: limit - ring.count, used: ring.count, resetMs: ring.oldest() + this.windowMs - now };
  }

  /** The state of `key` without counting anything. */
  peek(key: string, limit: number): RateDecision {
    const now = this.now();
    const ring = this.rings.get(key);
    if (ring) ring.evict(now - this.windowMs);
    const used = ring ? Math.min(ring.count, limit) : 0;
    const resetMs = ring && ring.count > 0 ? ring.oldest() + this.windowMs - now : this.windowMs;
    return { allowed: used < limit, limit, remaining: limit - used, used, resetMs };
  }

  /** Number of keys held (for tests and metrics). */
  get size(): number {
    return this.rings.size;
  }

  private ring(key: string, limit: number): Ring {
    let ring = this.rings.get(key);
    if (!ring) this.rings.set(key, (ring = new Ring(limit)));
    else if (ring.ts.length !== limit) this.rings.set(key, (ring = ring.resized(limit))); // the plan changed
    return ring;
  }

  /** Drops keys whose newest request left the window; at most once per window. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    const cutoff = now - this.windowMs;
    for (const [k, r] of this.rings) if (r.count === 0 || r.newest() <= cutoff) this.rings.delete(k);
  }
}
