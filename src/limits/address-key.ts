/**
 * Per-address keys of the caps that protect the node (docs/listeners.md "Per-address caps"):
 * counters that keep per-address counts in fixed hash slots (the node-wide held-request and
 * listening caps, src/listeners/shared-counter.ts; the HLS session rate below) pick the slots with
 * a keyed hash — HMAC-SHA-256 (RFC 2104) under a random secret made at start — of the address's
 * group (`addressGroup`: IPv4 as is, IPv6 by /64). Without the secret no client can compute
 * addresses whose slots are a victim's, so none can fill another's cap on purpose.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { addressGroup } from '../ratelimit/client-ip.js';

/** Bytes of a hash secret. */
export const ADDRESS_SECRET_BYTES = 32;

/** A new random hash secret (`ADDRESS_SECRET_BYTES` bytes). */
export function newAddressSecret(): Uint8Array {
  return new Uint8Array(randomBytes(ADDRESS_SECRET_BYTES));
}

/**
 * Two independent 32-bit hashes of the group of `address` (`addressGroup`) under `secret`: the
 * first 8 bytes of HMAC-SHA-256(secret, group), as two little-endian unsigned integers.
 * @param secret any length (normally `ADDRESS_SECRET_BYTES` random bytes)
 */
export function addressSlots(secret: Uint8Array, address: string): [number, number] {
  const d = createHmac('sha256', secret).update(addressGroup(address)).digest();
  return [d.readUInt32LE(0), d.readUInt32LE(4)];
}

/** Cells per row of `PerAddressRate` (a power of two). */
const RATE_ROW = 1 << 14;

/**
 * Events per client address per window (e.g. HLS sessions per IP per minute), in fixed memory
 * (256 KiB): a count-min sketch of two rows of 2^14 cells for the current window and one for the
 * previous, the slots picked by `addressSlots` under a secret of its own. An address is admitted
 * while its count in the current window plus its count in the previous one is under `max`, so
 * never more than `max` are admitted within any window-long interval (an interval spans at most
 * two windows); a steady client gets at least `max` per two windows. A count is never below the
 * true one (collisions can refuse early, never admit late), and refused events are not counted.
 * One thread (the main thread's registry) owns it.
 */
export class PerAddressRate {
  private cur = new Uint32Array(2 * RATE_ROW);
  private prev = new Uint32Array(2 * RATE_ROW);
  /** The window `cur` counts (floor(now / windowMs)). */
  private window = -1;
  private readonly secret = newAddressSecret();

  /**
   * @param max events admitted per address per window (≥ 1)
   * @param windowMs the window (ms)
   */
  constructor(
    public max: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one event of `address` and returns true, or returns false (not counted) when it has had `max` within the window. */
  take(address: string): boolean {
    this.roll();
    const [h1, h2] = addressSlots(this.secret, address);
    const a = h1 & (RATE_ROW - 1);
    const b = RATE_ROW + (h2 & (RATE_ROW - 1));
    const n = Math.min(this.cur[a]! + this.prev[a]!, this.cur[b]! + this.prev[b]!);
    if (n >= this.max) return false;
    this.cur[a]!++;
    this.cur[b]!++;
    return true;
  }

  /** Events of `address` counted in this window and the previous one (an upper bound). */
  count(address: string): number {
    this.roll();
    const [h1, h2] = addressSlots(this.secret, address);
    const a = h1 & (RATE_ROW - 1);
    const b = RATE_ROW + (h2 & (RATE_ROW - 1));
    return Math.min(this.cur[a]! + this.prev[a]!, this.cur[b]! + this.prev[b]!);
  }

  private roll(): void {
    const w = Math.floor(this.now() / this.windowMs);
    if (w === this.window) return;
    if (w === this.window + 1) {
      const old = this.prev;
      this.prev = this.cur;
      this.cur = old.fill(0);
    } else {
      this.prev.fill(0);
      this.cur.fill(0);
    }
    this.window = w;
  }
}
