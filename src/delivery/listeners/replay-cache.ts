/**
 * The edge-log replay cache (docs/edges.md "Counting behind edges"): the 64-bit fingerprints of
 * the lines accepted in the last two generations of `generationMs`, in fixed-size open-addressing
 * tables (linear probing, at most half full), so a line seen before is known in O(1) and the
 * memory is bounded whatever arrives: 2 × 8 × 2^`bits` bytes, allocated once.
 */

/** What `add` found. */
export type ReplayCheck = 'added' | 'seen' | 'full';

class FingerprintTable {
  private readonly hi: Uint32Array;
  private readonly lo: Uint32Array;
  private readonly mask: number;
  size = 0;

  constructor(bits: number) {
    this.hi = new Uint32Array(1 << bits);
    this.lo = new Uint32Array(1 << bits);
    this.mask = (1 << bits) - 1;
  }

  get capacity(): number {
    return (this.mask + 1) >>> 1;
  }

  /** The slot of (`h`, `l`), or of the empty slot where it would go. */
  private slot(h: number, l: number): number {
    let i = l & this.mask;
    while (this.lo[i] !== 0 && (this.lo[i] !== l || this.hi[i] !== h)) i = (i + 1) & this.mask;
    return i;
  }

  has(h: number, l: number): boolean {
    return this.lo[this.slot(h, l)] !== 0;
  }

  /** Adds (`h`, `l`); false when the table is half full already. `l` must not be 0. */
  add(h: number, l: number): boolean {
    if (this.size >= this.capacity) return false;
    const i = this.slot(h, l);
    if (this.lo[i] === 0) {
      this.hi[i] = h;
      this.lo[i] = l;
      this.size++;
    }
    return true;
  }

  clear(): void {
    this.hi.fill(0);
    this.lo.fill(0);
    this.size = 0;
  }
}

/** Remembers each accepted line for at least `generationMs` (see the file's comment). */
export class ReplayCache {
  private current: FingerprintTable;
  private previous: FingerprintTable;
  private generation = -1;

  /** @param bits log2 of the slots per table (a table takes 2^(bits-1) lines) */
  constructor(private readonly generationMs: number, bits = 21) {
    this.current = new FingerprintTable(bits);
    this.previous = new FingerprintTable(bits);
  }

  /** Lines one generation can hold. */
  get capacity(): number {
    return this.current.capacity;
  }

  /**
   * Remembers `mac` (its first 8 bytes) at `now` (ms). 'seen' when it was remembered before,
   * 'full' when this generation holds as many lines as it can (the line must be dropped).
   */
  add(mac: Buffer, now: number): ReplayCheck {
    const g = Math.floor(now / this.generationMs);
    if (g !== this.generation) {
      // The previous generation's table is emptied and becomes the current one; after a gap of
      // more than one generation both are emptied.
      const spare = this.previous;
      spare.clear();
      if (g === this.generation + 1) {
        this.previous = this.current;
        this.current = spare;
      } else {
        this.current.clear();
      }
      this.generation = g;
    }
    const h = mac.readUInt32BE(0);
    const l = (mac.readUInt32BE(4) | 1) >>> 0; // never 0 (0 marks an empty slot); unsigned, as the table stores it
    if (this.current.has(h, l) || this.previous.has(h, l)) return 'seen';
    return this.current.add(h, l) ? 'added' : 'full';
  }
}
