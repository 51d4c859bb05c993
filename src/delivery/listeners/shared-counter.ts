/**
 * Open things per client address and in total, counted node-wide by every HTTP thread at once
 * (docs/scaling.md "Caps"): the held-request caps (`httpMaxHeld`, `httpMaxHeldPerIp`) and the
 * progressive listening caps (`listenMaxConnections`, `listenMaxConnectionsPerIp`) stay the caps
 * of the node however many threads serve, with no message between threads.
 *
 * The counts live in a SharedArrayBuffer of Int32 cells changed with `Atomics`: one total, and a
 * count-min sketch of the per-address counts — two rows of 2^16 cells, each address counted in
 * one cell of each row. An address's count is the smaller of its two cells, which is never below
 * its true count: a cap is never exceeded. Addresses are counted by group (IPv4 as is, IPv6 by
 * /64: src/base/limits/address-key.ts `addressGroup`), and the cells are picked by a keyed hash
 * (HMAC-SHA-256 under a random secret, src/base/limits/address-key.ts) that the memory itself carries:
 * the thread that makes the counter draws the secret and every thread attached to the memory reads
 * it, so all agree on the cells while no client can compute addresses that land on another's
 * cells. Two groups share both cells only by a double collision (about one in 4·10⁹ pairs), and
 * then each counts the other's requests too — a client may be refused early, never let through
 * late. 512 KiB per counter.
 *
 * `tryAcquire` adds first and takes back when over a cap, so two threads racing for the last slot
 * may both be refused (never both admitted). A thread remembers the cells of the addresses it holds
 * something for (until their last release), and of up to `KNOWN_ADDRESSES` addresses it counted
 * lately, so a client that comes back (an LL-HLS player's next blocking reload, twice a second) is
 * not hashed again: a crowd on separate addresses costs per request what one behind a single
 * address costs.
 */
import { ADDRESS_SECRET_BYTES, addressSlots, newAddressSecret } from '../../base/limits/address-key.js';

/** Cells per row (a power of two). */
const ROW = 1 << 16;
/** Int32 cells of the hash secret. */
const KEY_CELLS = ADDRESS_SECRET_BYTES / 4;
/** First cell of row 0: [total, secret …, row 0 …, row 1 …]. */
const ROW0 = 1 + KEY_CELLS;
/** Int32 cells in all. */
const CELLS = ROW0 + 2 * ROW;

/** Addresses whose cells a thread remembers after their last release (then it forgets them all and starts over): ≈ 3 MB at most. */
const KNOWN_ADDRESSES = 32_768;

/** The counter's memory, to hand to other threads (`new SharedAddressCounter(…, memory)`). */
export type SharedCounterMemory = SharedArrayBuffer;

export class SharedAddressCounter {
  private readonly cells: Int32Array;
  private readonly secret: Uint8Array;
  /** The cells of the addresses this thread holds something for, with how many it holds and the address as first held (see `key`). */
  private readonly holding = new Map<string, { a: number; b: number; n: number; key: string }>();
  /** The cells of addresses counted lately (at most KNOWN_ADDRESSES; cleared when full). */
  private readonly known = new Map<string, { a: number; b: number }>();

  /**
   * @param maxTotal open at once, node-wide
   * @param maxPerAddress open at once per client address group, node-wide
   * @param memory another thread's counter memory (`memory`); a new one (with a new secret) when absent
   */
  constructor(
    public maxTotal: number,
    public maxPerAddress: number,
    memory?: SharedCounterMemory,
  ) {
    const mem = memory ?? new SharedArrayBuffer(CELLS * 4);
    if (mem.byteLength !== CELLS * 4) throw new Error(`shared counter memory must be ${CELLS * 4} bytes (got ${mem.byteLength})`);
    this.cells = new Int32Array(mem);
    const key = new Uint8Array(mem, 4, ADDRESS_SECRET_BYTES);
    if (!memory) key.set(newAddressSecret());
    this.secret = new Uint8Array(key); // a private copy: HMAC keys cannot be shared memory
  }

  /** The shared memory (post it to another thread; it counts into the same cells, under the same secret). */
  get memory(): SharedCounterMemory {
    return this.cells.buffer as SharedArrayBuffer;
  }

  /** The two cells of `address`. */
  private slots(address: string): { a: number; b: number } {
    const held = this.holding.get(address) ?? this.known.get(address);
    if (held) return held;
    const [h1, h2] = addressSlots(this.secret, address);
    const cells = { a: ROW0 + (h1 & (ROW - 1)), b: ROW0 + ROW + (h2 & (ROW - 1)) };
    if (this.known.size >= KNOWN_ADDRESSES) this.known.clear();
    this.known.set(address, cells);
    return cells;
  }

  /**
   * The two cells (Int32 indexes into `memory`) `address` is counted in: [0] is the total, then
   * the rows. What the native front counts its held reloads into (docs/http.md "Blocking reloads
   * held in native code").
   */
  cellsOf(address: string): [number, number] {
    const { a, b } = this.slots(address);
    return [a, b];
  }

  /** 'ok' (counted), or which cap refused it. */
  tryAcquire(address: string): 'ok' | 'total' | 'per_address' {
    const c = this.cells;
    if (Atomics.add(c, 0, 1) >= this.maxTotal) {
      Atomics.sub(c, 0, 1);
      return 'total';
    }
    const { a, b } = this.slots(address);
    const na = Atomics.add(c, a, 1);
    const nb = Atomics.add(c, b, 1);
    if (Math.min(na, nb) >= this.maxPerAddress) {
      Atomics.sub(c, a, 1);
      Atomics.sub(c, b, 1);
      Atomics.sub(c, 0, 1);
      return 'per_address';
    }
    const held = this.holding.get(address);
    if (held) held.n++;
    else this.holding.set(address, { a, b, n: 1, key: address });
    return 'ok';
  }

  /**
   * The string this thread's table keeps for `address` while it holds something for it (else
   * `address` itself): what a holder keeps instead of a copy of its own, so that every connection
   * of one address shares one string.
   */
  key(address: string): string {
    return this.holding.get(address)?.key ?? address;
  }

  /** Gives back one acquired for `address`. */
  release(address: string): void {
    const c = this.cells;
    const { a, b } = this.slots(address);
    const held = this.holding.get(address);
    if (held && --held.n === 0) this.holding.delete(address);
    Atomics.sub(c, a, 1);
    Atomics.sub(c, b, 1);
    Atomics.sub(c, 0, 1);
  }

  /** Open now, in total or for one address's group (an upper bound: see the module comment). */
  held(address?: string): number {
    const c = this.cells;
    if (address === undefined) return Atomics.load(c, 0);
    const { a, b } = this.slots(address);
    return Math.min(Atomics.load(c, a), Atomics.load(c, b));
  }
}
