/**
 * A stream's HLS timeline across restarts of the node (docs/streams.md "One timeline", RFC 8216
 * §6.2.1: a playlist's media sequence never decreases, and a URI never names other media). Segment
 * and part names carry the media sequence number (`12.m4s`, `12.3.m4s`), so a number handed out
 * once must never be handed out again — not after a restart either, or a cache holding the old
 * `12.m4s` would serve it as the new one.
 *
 * Numbers are reserved in blocks: before a layer hands out a media sequence number (or a
 * discontinuity sequence number) within half a block of its reserved mark, the mark is raised by a
 * block and written through the `TimelineStore` port (SQLite, off the audio path, retried while the
 * database cannot take it). A new run starts each stream's timeline at its stored marks, after an
 * `EXT-X-DISCONTINUITY`: above every number the previous run can have handed out, as long as a
 * write of the mark succeeded within half a block (≈ 17 minutes of 2 s segments) of being asked.
 */

/** Where a timeline stands or may continue: a media sequence number and a discontinuity sequence number. */
export interface TimelineMark {
  sequence: number;
  discontinuity: number;
}

/**
 * Where reserved marks are kept (implemented over SQLite by the composition root). `load` runs once
 * per stream per run, when its first hub opens; `save` is called at most once per half block per
 * layer and must not block the caller for long (it is called under native ingest callbacks): it
 * writes later, retrying while the database is busy or full, and never throws.
 */
export interface TimelineStore {
  /**
   * The marks stored for stream `streamId`, by layer name (empty when it never had a timeline).
   * @throws Error when they cannot be read (the registry then starts above any plausible number: see `unreadableMark`)
   */
  load(streamId: string): Map<string, TimelineMark>;
  /** Raises the stored mark of `streamId`'s layer `layer` to at least `mark` (never lowers it). */
  save(streamId: string, layer: string, mark: TimelineMark): void;
}

/** Media sequence numbers reserved per write (≈ 33 minutes of 2 s segments). */
export const SEQUENCE_BLOCK = 1000;
/** Discontinuity sequence numbers reserved per write (a publisher reconnect or a fallback switch each use one). */
export const DISCONTINUITY_BLOCK = 64;

/**
 * A position no earlier run can have passed, for a stream whose stored marks cannot be read: the
 * wall clock in seconds (a media sequence number counts segments of at least half a second, and
 * the discontinuity sequence counts far fewer events), so a restart still never goes back.
 */
export function unreadableMark(nowMs: number): TimelineMark {
  const s = Math.floor(nowMs / 1000);
  return { sequence: s * 2, discontinuity: s };
}

/**
 * One layer's reservation: `use(sequence, discontinuity)` before handing out numbers up to those
 * (exclusive); it raises and saves the mark when they come within half a block of it. O(1), no
 * allocation unless it saves.
 */
export class Reservation {
  constructor(
    /** The mark known to be stored (or asked to be): numbers below it may be handed out. */
    private mark: TimelineMark,
    private readonly save: (mark: TimelineMark) => void,
  ) {}

  /** The mark as reserved now. */
  get reserved(): TimelineMark {
    return this.mark;
  }

  /** Numbers below `sequence` and `discontinuity` are about to be handed out. */
  use(sequence: number, discontinuity: number): void {
    const m = this.mark;
    if (sequence + SEQUENCE_BLOCK / 2 <= m.sequence && discontinuity + DISCONTINUITY_BLOCK / 2 <= m.discontinuity) return;
    this.mark = { sequence: Math.max(m.sequence, sequence + SEQUENCE_BLOCK), discontinuity: Math.max(m.discontinuity, discontinuity + DISCONTINUITY_BLOCK) };
    this.save(this.mark);
  }
}

/**
 * A stream's timeline as the media registry keeps it between broadcasts within a run: the
 * reservations of its layers, made once from the stored marks.
 */
export class StreamTimeline {
  private readonly layers = new Map<string, Reservation>();

  constructor(
    readonly streamId: string,
    /** The stored marks by layer (empty: none stored). */
    private readonly stored: Map<string, TimelineMark>,
    private readonly store: TimelineStore,
  ) {}

  /** Where a new run continues this stream's timeline (the highest stored mark), or undefined when none is stored. */
  get restart(): TimelineMark | undefined {
    let out: TimelineMark | undefined;
    for (const m of this.stored.values()) out = { sequence: Math.max(out?.sequence ?? 0, m.sequence), discontinuity: Math.max(out?.discontinuity ?? 0, m.discontinuity) };
    return out;
  }

  /** The reservation of layer `name` (made on first use, from its stored mark or the stream's). */
  layer(name: string): Reservation {
    let r = this.layers.get(name);
    if (!r) {
      const from = this.stored.get(name) ?? this.restart ?? { sequence: 0, discontinuity: 0 };
      r = new Reservation(from, (mark) => this.store.save(this.streamId, name, mark));
      this.layers.set(name, r);
    }
    return r;
  }
}
