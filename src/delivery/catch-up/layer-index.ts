/**
 * The in-memory index of one layer's kept segments (docs/behaviour.md "Catch-up radio"): its
 * layer-hours (`HourBlock`) in order, each segment a fixed-size record, searched by binary search
 * on program date-time or media sequence number — first over the hours, then inside one — so a
 * lookup costs O(log n) however long the window, and an answer costs what it lists. Segments are
 * appended in media sequence order; program date-times are assumed to rise with them (they are
 * the wall clock at the cut).
 */
import type { CatchUpSegmentRow } from '../../base/db/catch-up-repo.js';
import type { HourBlock } from './hour-block.js';

/** Rows one answer lists at most (a week of 2 s segments is 302,400: a playlist never holds more). */
export const MAX_ROWS = 400_000;

/** A place in the index: hour `b`, segment `i` of it (i = n: past its end). */
interface Pos {
  b: number;
  i: number;
}

/** The first index in [0, n) whose value is not `before` (n when none). */
function bound(n: number, before: (i: number) => boolean): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One layer's segments, by hour (see the module comment). */
export class LayerIndex {
  readonly blocks: HourBlock[] = [];

  constructor(readonly streamId: string, readonly layer: string) {}

  /** Segments kept. */
  get size(): number {
    let n = 0;
    for (const b of this.blocks) n += b.n;
    return n;
  }

  /** Bytes of the segments kept. */
  get bytes(): number {
    let n = 0;
    for (const b of this.blocks) n += b.bytes;
    return n;
  }

  /** The newest media sequence number kept, or -1. */
  get lastSequence(): number {
    const b = this.blocks[this.blocks.length - 1];
    return b && b.n > 0 ? b.seq(b.n - 1) : -1;
  }

  /** The first place whose segment starts at or after `t` (`strict`: after `t`). */
  private byStart(t: number, strict: boolean): Pos {
    const before = strict ? (s: number) => s <= t : (s: number) => s < t;
    const b = bound(this.blocks.length, (k) => before(this.blocks[k]!.lastStart));
    if (b === this.blocks.length) return { b, i: 0 };
    const blk = this.blocks[b]!;
    return { b, i: bound(blk.n, (i) => before(blk.start(i))) };
  }

  /** Rows from `p` on while `keep(start)` holds (at most MAX_ROWS). */
  private rowsFrom(p: Pos, keep: (start: number) => boolean): CatchUpSegmentRow[] {
    const out: CatchUpSegmentRow[] = [];
    for (let b = p.b, i = p.i; b < this.blocks.length; b++, i = 0) {
      const blk = this.blocks[b]!;
      for (; i < blk.n; i++) {
        if (!keep(blk.start(i)) || out.length >= MAX_ROWS) return out;
        out.push(blk.row(i, this.streamId, this.layer));
      }
    }
    return out;
  }

  /** The place before `p`, or null at the start. */
  private prev(p: Pos): Pos | null {
    if (p.i > 0) return { b: p.b, i: p.i - 1 };
    for (let b = p.b - 1; b >= 0; b--) if (this.blocks[b]!.n > 0) return { b, i: this.blocks[b]!.n - 1 };
    return null;
  }

  /**
   * The segments that overlap [`fromMs`, `toMs`): from the last that starts at or before `fromMs`
   * (the one playing then; the first kept when none does), in order, up to the first that starts
   * at or after `toMs`.
   */
  span(fromMs: number, toMs: number): CatchUpSegmentRow[] {
    const after = this.byStart(fromMs, true);
    const p = this.prev(after) ?? { b: 0, i: 0 };
    return this.rowsFrom(p, (s) => s < toMs);
  }

  /** The segments that start at or after `fromMs`, in order (at most MAX_ROWS). */
  from(fromMs: number): CatchUpSegmentRow[] {
    return this.rowsFrom(this.byStart(fromMs, false), () => true);
  }

  /** The first segment that starts at or after `fromMs`, or undefined. */
  firstFrom(fromMs: number): CatchUpSegmentRow | undefined {
    const p = this.byStart(fromMs, false);
    return p.b < this.blocks.length ? this.blocks[p.b]!.row(p.i, this.streamId, this.layer) : undefined;
  }

  /** The newest segment, or undefined. */
  newest(): CatchUpSegmentRow | undefined {
    const b = this.blocks[this.blocks.length - 1];
    return b && b.n > 0 ? b.row(b.n - 1, this.streamId, this.layer) : undefined;
  }

  /** How many segments start in [`fromMs`, `toMs`). */
  count(fromMs: number, toMs: number): number {
    const a = this.byStart(fromMs, false);
    const z = this.byStart(toMs, false);
    if (z.b < a.b || (z.b === a.b && z.i <= a.i)) return 0;
    let n = 0;
    for (let b = a.b; b < z.b; b++) n += this.blocks[b]!.n;
    return n - a.i + (z.b < this.blocks.length ? z.i : 0);
  }

  /**
   * Visits the segments that start at or after `fromMs` in runs of one hour: `[lo, hi)` of each
   * hour, cut at multiples of `size` (so a run `[k·size, (k+1)·size)` of an hour is complete and
   * never changes: hours only grow at their end and leave whole).
   */
  runs(fromMs: number, size: number, each: (block: HourBlock, lo: number, hi: number) => void): void {
    const p = this.byStart(fromMs, false);
    for (let b = p.b, i = p.i; b < this.blocks.length; b++, i = 0) {
      const blk = this.blocks[b]!;
      while (i < blk.n) {
        const hi = Math.min(blk.n, (Math.floor(i / size) + 1) * size);
        each(blk, i, hi);
        i = hi;
      }
    }
  }

  /** Where segment `sequence` is (its hour and offset and length in the hour's `.seg`), or undefined. */
  locate(sequence: number): { block: HourBlock; i: number } | undefined {
    const b = bound(this.blocks.length, (k) => {
      const blk = this.blocks[k]!;
      return blk.seq(blk.n - 1) < sequence;
    });
    const blk = this.blocks[b];
    if (!blk) return undefined;
    const i = bound(blk.n, (k) => blk.seq(k) < sequence);
    return i < blk.n && blk.seq(i) === sequence ? { block: blk, i } : undefined;
  }

  /** Segment `sequence` as a row, or undefined. */
  get(sequence: number): CatchUpSegmentRow | undefined {
    const at = this.locate(sequence);
    return at ? at.block.row(at.i, this.streamId, this.layer) : undefined;
  }

  /** The segments of broadcast `broadcastId`, in order (only hours that name it are read). */
  ofBroadcast(broadcastId: string): CatchUpSegmentRow[] {
    const out: CatchUpSegmentRow[] = [];
    for (const blk of this.blocks) {
      if (!blk.names.includes(broadcastId)) continue;
      for (let i = 0; i < blk.n && out.length < MAX_ROWS; i++) if (blk.broadcastOf(i) === broadcastId) out.push(blk.row(i, this.streamId, this.layer));
    }
    return out;
  }
}
