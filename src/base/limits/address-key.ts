/**
 * Per-address keys of the caps that protect the node (docs/listeners.md "Per-address caps"):
 * counters that keep per-address counts in fixed hash slots (the node-wide held-request and
 * listening caps, src/delivery/listeners/shared-counter.ts; the HLS session rate below) pick the slots with
 * a keyed hash — HMAC-SHA-256 (RFC 2104) under a random secret made at start — of the address's
 * group (`addressGroup`: IPv4 as is, IPv6 by /64). Without the secret no client can compute
 * addresses whose slots are a victim's, so none can fill another's cap on purpose.
 */
import { createHmac, randomBytes } from 'node:crypto';
import net from 'node:net';

/** The eight 16-bit words of an IPv6 address (`isIP(s) === 6`, no zone, no brackets); an embedded IPv4 tail gives the last two. */
function ipv6Words(s: string): number[] {
  const words = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((w) => {
          if (!w.includes('.')) return [parseInt(w, 16)];
          const [a, b, c, d] = w.split('.').map(Number) as [number, number, number, number];
          return [(a << 8) | b, (c << 8) | d];
        });
  const gap = s.indexOf('::');
  if (gap < 0) return words(s);
  const head = words(s.slice(0, gap));
  const tail = words(s.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * The group a client address is capped and rate-limited as (docs/listeners.md "Per-address caps"):
 * an IPv4 address stands for itself; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, RFC 4291
 * §2.5.5.2) is that IPv4 address; any other IPv6 address stands for its /64 (`2001:db8:0:1::/64`:
 * RFC 4291 §2.5.4 gives every interface a 64-bit id, and one subscriber is routed a /64 or more, so
 * an attacker with one /64 must not get 2^64 slots). Brackets and a zone id (`%eth0`) are ignored.
 * Anything that is not an IP address is returned as given (it is then its own group).
 */
export function addressGroup(ip: string): string {
  let s = ip.trim();
  if (s.startsWith('[')) s = s.slice(1, s.indexOf(']') > 0 ? s.indexOf(']') : undefined);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const family = net.isIP(s);
  if (family === 4) return s;
  if (family !== 6) return ip;
  const w = ipv6Words(s.toLowerCase());
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) {
    return `${w[6]! >> 8}.${w[6]! & 255}.${w[7]! >> 8}.${w[7]! & 255}`;
  }
  return `${w.slice(0, 4).map((x) => x.toString(16)).join(':')}::/64`;
}

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

  /**
   * When the current window ends (epoch ms): an address `take` refused stays refused until then at
   * least (within a window its count only grows), so a caller may remember the refusal that long.
   */
  windowEndsAt(): number {
    this.roll();
    return (this.window + 1) * this.windowMs;
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
