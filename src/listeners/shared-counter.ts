/**
 * Open things per client address and in total, counted node-wide by every HTTP thread at once
 * (docs/scaling.md "Caps"): the held-request caps (`httpMaxHeld`, `httpMaxHeldPerIp`) and the
 * progressive listening caps (`listenMaxConnections`, `listenMaxConnectionsPerIp`) stay the caps
 * of the node however many threads serve, with no message between threads.
 *
 * The counts live in a SharedArrayBuffer of Int32 cells changed with `Atomics`: one total, and a
 * count-min sketch of the per-address counts — two rows of 2^16 cells, each address counted in
 * one cell of each row (two independent hashes). An address's count is the smaller of its two
 * cells, which is never below its true count: a cap is never exceeded. Two addresses share both
 * cells only by a double collision (about one in 4·10⁹ pairs), and then each counts the other's
 * requests too — a client may be refused early, never let through late. 512 KiB per counter.
 *
 * `tryAcquire` adds first and takes back when over a cap, so two threads racing for the last slot
 * may both be refused (never both admitted).
 */

/** Cells per row (a power of two). */
const ROW = 1 << 16;
/** Int32 cells: [total, row 0 …, row 1 …]. */
const CELLS = 1 + 2 * ROW;

/** The counter's memory, to hand to other threads (`SharedAddressCounter.attach`). */
export type SharedCounterMemory = SharedArrayBuffer;

/** FNV-1a over the string's UTF-16 code units, with a seed. */
function hash(s: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // Final avalanche (murmur3 fmix32), so that near addresses spread over the row.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class SharedAddressCounter {
  private readonly cells: Int32Array;

  /**
   * @param maxTotal open at once, node-wide
   * @param maxPerAddress open at once per client address, node-wide
   * @param memory another thread's counter memory (`memory`); a new one when absent
   */
  constructor(
    public maxTotal: number,
    public maxPerAddress: number,
    memory?: SharedCounterMemory,
  ) {
    this.cells = new Int32Array(memory ?? new SharedArrayBuffer(CELLS * 4));
  }

  /** The shared memory (post it to another thread; it counts into the same cells). */
  get memory(): SharedCounterMemory {
    return this.cells.buffer as SharedArrayBuffer;
  }

  /** 'ok' (counted), or which cap refused it. */
  tryAcquire(address: string): 'ok' | 'total' | 'per_address' {
    const c = this.cells;
    if (Atomics.add(c, 0, 1) >= this.maxTotal) {
      Atomics.sub(c, 0, 1);
      return 'total';
    }
    const a = 1 + (hash(address, 0) & (ROW - 1));
    const b = 1 + ROW + (hash(address, 0x9e3779b9) & (ROW - 1));
    const na = Atomics.add(c, a, 1);
    const nb = Atomics.add(c, b, 1);
    if (Math.min(na, nb) >= this.maxPerAddress) {
      Atomics.sub(c, a, 1);
      Atomics.sub(c, b, 1);
      Atomics.sub(c, 0, 1);
      return 'per_address';
    }
    return 'ok';
  }

  /** Gives back one acquired for `address`. */
  release(address: string): void {
    const c = this.cells;
    Atomics.sub(c, 1 + (hash(address, 0) & (ROW - 1)), 1);
    Atomics.sub(c, 1 + ROW + (hash(address, 0x9e3779b9) & (ROW - 1)), 1);
    Atomics.sub(c, 0, 1);
  }

  /** Open now, in total or for one address (an upper bound: see the module comment). */
  held(address?: string): number {
    const c = this.cells;
    if (address === undefined) return Atomics.load(c, 0);
    return Math.min(Atomics.load(c, 1 + (hash(address, 0) & (ROW - 1))), Atomics.load(c, 1 + ROW + (hash(address, 0x9e3779b9) & (ROW - 1))));
  }
}
