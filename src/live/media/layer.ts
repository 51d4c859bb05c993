/**
 * One layer (rendition) of a stream's HLS ladder: its segmenter's output kept in memory — the init
 * section (fMP4), finished segments (immutable), the LL-HLS parts of the newest segments and of the
 * segment in progress — plus the waiters of blocking playlist reloads and preload hints
 * (draft-pantos-hls-rfc8216bis §6.2.5.2, §6.2.6). The segmenter comes in through a factory; of
 * src/native/ it takes only the Segmenter's types (docs/native-api.md). What it holds and hands out
 * (parts, segments, date ranges, media pieces) is declared in layer-media.ts.
 */
import { createHash } from 'node:crypto';
import type { Segmenter, SegmenterEvent, SegmenterMetadataMark } from '../../native/segmenter.js';
import { Waiters } from './waiters.js';
import { joinedSegment, partBytes, recentMedia, windowBandwidth, type DateRange, type LayerMedia, type LayerMediaListener, type NowPlayingFields, type Part, type Segment } from './layer-media.js';

/** A segmenter error of one pushed frame (the frame was dropped). */
export interface LayerError {
  code: string;
  message: string;
  expected?: string;
  received?: string;
}

/** Layer settings. Durations in ms, bitrate in kbps. */
export interface LayerOptions {
  /** Path segment of the layer in URLs, e.g. `a128`. */
  name: string;
  /** Nominal bitrate (kbps), used for BANDWIDTH until segments are measured. */
  kbps: number;
  container: 'ts' | 'fmp4';
  targetDurationMs: number;
  /** LL-HLS part target (fMP4 only; 0 = classic HLS). */
  partTargetMs: number;
  windowSegments: number;
  /** Whether this layer passes the ingest through (the top of the ladder). */
  passthrough: boolean;
  /** The layer's segmenter: a native Segmenter (a test may give a stand-in of the same shape). */
  createSegmenter: () => Segmenter;
  /**
   * Where an earlier broadcast of the stream left the timeline (docs/streams.md "One timeline"):
   * this layer's media sequence numbers start at `sequence`, and its first segment follows an
   * `EXT-X-DISCONTINUITY` with discontinuity sequence `discontinuity + 1`. Absent: a new timeline at 0.
   */
  continues?: { sequence: number; discontinuity: number };
  /**
   * Where numbers handed out are reserved so that a restart of the node never hands them out again
   * (src/live/media/timeline.ts): told, before a segment or part is listed, the media sequence and
   * discontinuity sequence numbers the layer may name next (exclusive bounds). Absent: no reservation.
   */
  reservation?: { use(sequence: number, discontinuity: number): void };
}

/** Segments kept past the window, so that a player that just read the playlist can still fetch them. */
export const RETAIN_EXTRA = 4;
/** Segments (newest) whose parts stay listed: parts older than ~3 target durations are dropped (§4.4.4.9). */
const PART_SEGMENTS = 3;
/** A blocking request waits at most this many target durations (§6.2.5.2: 3 × target is typical). */
const WAIT_TARGETS = 3;

export class Layer {
  /** Bumped on every change a playlist shows (segment, part, end). */
  version = 0;
  ended = false;
  codec: string | null = null;
  codecs: string | null = null;
  sampleRate = 0;
  channels = 0;
  /** fMP4 init section (EXT-X-MAP), replaced on a codec configuration change. */
  init: Uint8Array | null = null;
  /** Version of `init`: counts its changes in this layer (progressive listening re-reads the init when it moves). */
  initVersion = 0;
  /**
   * What names `init` in URIs (`init-<initId>.mp4`): the first 16 hex digits of the SHA-256 of its
   * bytes, so a URI names one init section for ever — also across restarts of the node, where
   * `initVersion` starts again — and a changed codec configuration is always a new URI ('' before
   * the first init section).
   */
  initId = '';
  maxDurationMs = 0;
  /** Longest part so far (ms). */
  maxPartMs = 0;
  /** The ladder gave up on this layer (codec process failed): not listed any more. */
  failed = false;
  /** Media sequence number of the segment in progress (the next to finish). */
  nextSequence = 0;
  /** Parts of the segment in progress. */
  openParts: Part[] = [];
  /**
   * The segment in progress follows a discontinuity: its `EXT-X-DISCONTINUITY` goes before its
   * first listed part already, so a player never sees the tag appear before parts it has loaded
   * (rfc8216bis §4.4.4.9, §6.2.1: a playlist only grows at its end).
   */
  openDiscontinuity = false;
  readonly segments: Segment[] = [];
  private readonly segmenter: Segmenter;
  private discontinuitySequence = 0;
  private pendingDiscontinuity = false;
  /** `discontinuity()` was called: the next segment the segmenter starts follows one. */
  private discontinuityRequested = false;
  /** Byte size of each retained segment (read without joining an LL-HLS segment's parts). */
  private readonly sizes = new WeakMap<Segment, number>();
  /** Held blocking requests (src/live/media/waiters.ts): a blocking playlist reload waits for `reached`, else for `has`. */
  private readonly waiters = new Waiters((msn, part, reload) => (reload ? this.reached(msn, part) : this.has(msn, part)));
  /** When the open segment's first part arrived, minus the part's duration (ms), or null. */
  private openStartMs: number | null = null;
  /** PTS (90 kHz) of the open segment's first part. */
  private openStartPts: number | null = null;
  /** Changes pushed to the segmenter and not yet seen in its output, by the timestamp pushed (mod 2^32). */
  private readonly pendingMeta = new Map<number, NowPlayingFields>();
  /** The changes presented in the retained timeline, oldest first (`EXT-X-DATERANGE`). */
  dateRanges: DateRange[] = [];
  private mediaListeners: LayerMediaListener[] = [];
  private changeListeners: Array<() => void> = [];

  /** Added to the segmenter's sequence numbers (which start at 0 for every segmenter): where the timeline continues. */
  private readonly sequenceBase: number;
  /** The first segment follows a discontinuity although it is this layer's first (an earlier broadcast came before). */
  private continuing: boolean;

  constructor(readonly o: LayerOptions) {
    this.segmenter = o.createSegmenter();
    this.sequenceBase = o.continues?.sequence ?? 0;
    this.nextSequence = this.sequenceBase;
    this.discontinuitySequence = o.continues?.discontinuity ?? 0;
    this.continuing = o.continues !== undefined;
    // Reserved at once (the write is on its way long before the first part is listed).
    o.reservation?.use(this.nextSequence + 2, this.discontinuitySequence + 2);
  }

  /** Discontinuity sequence number of the newest segment (RFC 8216 §4.3.3.3), or where the timeline continues from. */
  get discontinuityNumber(): number {
    return this.discontinuitySequence;
  }

  get name(): string {
    return this.o.name;
  }
  /** LL-HLS is on for this layer. */
  get lowLatency(): boolean {
    return this.o.container === 'fmp4' && this.o.partTargetMs > 0;
  }

  /** Feeds one FLV AUDIODATA body; returns the segmenter's errors (the frame is dropped). */
  push(timestampMs: number, data: Uint8Array): LayerError[] {
    return this.apply(this.segmenter.pushAudio(timestampMs, data));
  }

  /**
   * The segmenter itself (a native Segmenter), for native ingest to push into directly
   * (RtmpConnection.route); what it makes of that audio comes back through `apply`.
   */
  get segmenterHandle(): Segmenter {
    return this.segmenter;
  }

  /**
   * A now-playing change at ingest timestamp `timestampMs` (ms): the segmenter writes it as timed
   * ID3 into the part/segment of the frame it lands on (where it can: the native Segmenter's
   * `pushMetadata`); the layer lists it as an `EXT-X-DATERANGE` once that part or segment is out.
   */
  pushMetadata(timestampMs: number, fields: NowPlayingFields): void {
    this.segmenter.pushMetadata(timestampMs, fields);
    const key = ((Math.floor(timestampMs) % 4294967296) + 4294967296) % 4294967296;
    if (this.pendingMeta.size >= 64) this.pendingMeta.delete(this.pendingMeta.keys().next().value!);
    this.pendingMeta.set(key, fields);
  }

  /** The publisher left: close the open segment. */
  flush(): void {
    this.apply(this.segmenter.flush());
  }

  /** The next segment follows a discontinuity (a new publisher, a new transcoder). */
  discontinuity(): void {
    this.discontinuityRequested = true;
    this.segmenter.discontinuity();
  }

  /** The stream ended: EXT-X-ENDLIST, and every waiter is answered; media subscribers hear `end`. */
  end(): void {
    if (this.ended) return;
    this.flush();
    this.ended = true;
    this.version++;
    this.wake(true);
    this.changed();
    const subs = this.mediaListeners;
    this.mediaListeners = [];
    for (const l of subs) {
      try {
        l.end();
      } catch {
        // A subscriber's fault stays its own (this runs under native ingest callbacks).
      }
    }
  }

  /**
   * Subscribes to the layer's new media: each LL-HLS part (layers with parts) or finished segment
   * (others) as `apply` takes it in, then `end`. Costs nothing per frame, and nothing at all
   * without subscribers. Returns the unsubscribe function. On an ended layer, `end` is called at once.
   */
  onMedia(l: LayerMediaListener): () => void {
    if (this.ended) {
      l.end();
      return () => {};
    }
    this.mediaListeners = [...this.mediaListeners, l];
    return () => {
      this.mediaListeners = this.mediaListeners.filter((x) => x !== l);
    };
  }

  /**
   * Calls `fn` after every change a playlist shows (the version moved: a part, a segment, a date
   * range, the end), once per batch of segmenter events, after the layer's own waiters were
   * answered. Exceptions it throws are swallowed. Returns the unsubscribe function.
   */
  onChange(fn: () => void): () => void {
    this.changeListeners = [...this.changeListeners, fn];
    return () => {
      this.changeListeners = this.changeListeners.filter((x) => x !== fn);
    };
  }

  private changed(): void {
    for (const fn of this.changeListeners) {
      try {
        fn();
      } catch {
        // A subscriber's fault stays its own (this runs under native ingest callbacks).
      }
    }
  }

  /**
   * The newest retained media covering at least `minMs` of audio (less when less is retained),
   * oldest first, in the units `onMedia` hands out where they are still kept: the parts of the
   * newest segments and of the one in progress, whole segments before them. What a progressive
   * listener's burst is built from.
   */
  recentMedia(minMs: number): LayerMedia[] {
    return recentMedia(this.openParts, this.initVersion, this.segments, this.lowLatency, minMs);
  }

  /**
   * Whether the layer can be played: configured and holding at least one segment — or, for an
   * LL-HLS layer, one part (so LL-HLS players start ~0.5 s after the first audio).
   */
  get ready(): boolean {
    return this.codecs !== null && (this.segments.length > 0 || (this.lowLatency && this.openParts.length > 0));
  }

  /** The segments of the live window, oldest first. */
  window(): Segment[] {
    return this.segments.slice(-this.o.windowSegments);
  }

  /** A retained segment by media sequence number. */
  segment(sequence: number): Segment | undefined {
    const first = this.segments[0];
    return first ? this.segments[sequence - first.sequence] : undefined;
  }

  /** A retained part, of a finished segment or of the one in progress. */
  part(sequence: number, index: number): Part | undefined {
    if (sequence === this.nextSequence) return this.openParts[index];
    return this.segment(sequence)?.parts[index];
  }

  /**
   * Whether segment `msn` is finished, or (given `part`) its part `part` exists — or segment `msn`
   * is finished anyway (then that part never will). What a wait for a part's bytes waits for.
   */
  has(msn: number, part?: number): boolean {
    if (part === undefined) return msn < this.nextSequence;
    if (msn < this.nextSequence) return true; // a finished segment holds all its parts
    return msn === this.nextSequence && part < this.openParts.length;
  }

  /**
   * Whether the playlist holds what a blocking playlist reload `_HLS_msn=msn[&_HLS_part=part]`
   * asks for (rfc8216bis §6.2.5.2): segment `msn` finished, or part `part` of segment `msn`; a part
   * index past the last part of a finished segment asks for part 0 of the next segment.
   */
  reached(msn: number, part?: number): boolean {
    if (part === undefined || msn > this.nextSequence) return msn < this.nextSequence;
    if (msn === this.nextSequence) return part < this.openParts.length;
    if (msn < this.nextSequence - 1) return true; // the segment after it is finished too
    if (part < (this.segment(msn)?.parts.length ?? 0)) return true;
    return this.openParts.length > 0; // part 0 of the segment in progress
  }

  /**
   * Calls `done` once segment `msn` (part `part`) exists (`reload`: once `reached(msn, part)`),
   * the layer ends, or 3 target durations pass — whichever comes first. Returns a cancel function
   * (for an aborted request).
   */
  waitFor(msn: number, part: number | undefined, done: () => void, reload = false): () => void {
    if (this.ended || (reload ? this.reached(msn, part) : this.has(msn, part))) {
      done();
      return () => {};
    }
    return this.waiters.add(msn, part, WAIT_TARGETS * this.o.targetDurationMs, done, reload);
  }

  /** Held blocking requests (for diagnostics and tests). */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * `BANDWIDTH` (`peak`) and `AVERAGE-BANDWIDTH` (`average`) of the layer, bits/s (rfc8216bis
   * §4.4.6.2), measured over the segments of the live window only — a layer belongs to one
   * broadcast, so nothing of an earlier one counts, and a burst leaves with the window. Both
   * leave out a segment shorter than half the target duration and one that ends at a
   * discontinuity (a publisher's flushed tail before a reconnect or takeover): a fraction of a
   * second carrying a segment's container overhead is no rate a player must sustain
   * (docs/decisions.md "HLS"). The peak is the highest bit rate of the other segments, the
   * average their bytes over their duration (every segment's when none qualifies); the peak is
   * never below the average. Before the first segment: nominal + 10 % for both.
   */
  bandwidth(): { peak: number; average: number } {
    return windowBandwidth(this.window(), (seg) => this.sizes.get(seg) ?? 0, this.o.targetDurationMs, this.o.kbps);
  }

  /**
   * Takes the segmenter's events — of `push`/`flush`, or produced outside them by natively routed
   * ingest — into the layer's segments and parts; returns the errors (those frames were dropped).
   */
  apply(events: SegmenterEvent[]): LayerError[] {
    const errors: LayerError[] = [];
    let changed = false;
    const media: LayerMedia[] | null = this.mediaListeners.length > 0 ? [] : null;
    for (const raw of events) {
      const e = this.sequenceBase > 0 && (raw.type === 'part' || raw.type === 'segment') ? { ...raw, sequence: raw.sequence + this.sequenceBase } : raw;
      // The playlist names up to the next segment's first part (the preload hint) and may open a
      // new discontinuity: those numbers are reserved before they are listed.
      if (e.type === 'part' || e.type === 'segment') this.o.reservation?.use(e.sequence + 2, this.discontinuitySequence + 2);
      if (e.type === 'config') {
        if (this.codecs !== null && (e.codecs !== this.codecs || e.sampleRate !== this.sampleRate || e.channels !== this.channels)) {
          this.pendingDiscontinuity = true;
        }
        this.codec = e.codec;
        this.codecs = e.codecs;
        this.sampleRate = e.sampleRate;
        this.channels = e.channels;
        if (e.init) {
          this.init = e.init;
          this.initVersion++;
          this.initId = createHash('sha256').update(e.init).digest('hex').slice(0, 16);
        }
      } else if (e.type === 'part') {
        if (this.openParts.length === 0 || this.openParts[0]!.sequence !== e.sequence) {
          this.openStartMs = Date.now() - e.durationMs;
          this.openStartPts = e.pts90k ?? null;
          // The segmenter flags the first segment it opens after discontinuity() (a segment open
          // at the call is closed unflagged first): that is this one.
          this.openDiscontinuity = ((this.discontinuityRequested || this.pendingDiscontinuity) && this.segments.length > 0) || this.continuing;
          this.discontinuityRequested = false;
        }
        if (e.metadata && e.pts90k !== undefined && this.openStartMs !== null && this.openStartPts !== null) {
          this.dated(e.metadata, this.programDateOfOpen(), this.openStartPts);
        }
        this.openParts.push({ sequence: e.sequence, index: e.partIndex, data: e.data, durationMs: e.durationMs });
        this.maxPartMs = Math.max(this.maxPartMs, e.durationMs);
        if (media && this.lowLatency) media.push({ data: e.data, durationMs: e.durationMs, initVersion: this.initVersion });
        changed = true;
      } else if (e.type === 'segment') {
        // What the open parts were listed with holds (a player may have loaded them).
        const discontinuity = ((e.discontinuity || this.pendingDiscontinuity) && this.segments.length > 0) || this.continuing || (this.openDiscontinuity && this.openParts.some((p) => p.sequence === e.sequence));
        this.pendingDiscontinuity = false;
        this.openDiscontinuity = false;
        this.continuing = false;
        if (discontinuity) this.discontinuitySequence++;
        const parts = this.openParts.filter((p) => p.sequence === e.sequence);
        this.openParts = [];
        const prev = this.segments[this.segments.length - 1];
        const programDateMs = prev && !discontinuity ? prev.programDateMs + prev.durationMs : (parts.length > 0 && this.openStartMs !== null ? this.openStartMs : Date.now() - e.durationMs);
        this.openStartMs = null;
        this.openStartPts = null;
        if (e.metadata && e.pts90k !== undefined) this.dated(e.metadata, programDateMs, e.pts90k);
        // Layers with parts handed out the segment's parts already (a segment is its parts' bytes).
        if (media && (!this.lowLatency || parts.length === 0)) media.push({ data: e.data, durationMs: e.durationMs, initVersion: this.initVersion });
        const fields = { sequence: e.sequence, durationMs: e.durationMs, discontinuity, discontinuitySequence: this.discontinuitySequence, parts, initVersion: this.initVersion, initId: this.initId, programDateMs };
        // No bytes with the event (`segmentBytes: false`): the segment is its parts' bytes.
        const joined = e.data.byteLength === 0 && parts.length > 0;
        const bytes = joined ? partBytes(parts) : e.data.byteLength;
        const segment = joined ? joinedSegment(fields, parts.map((p) => p.data), bytes) : { ...fields, data: e.data };
        this.sizes.set(segment, bytes);
        this.segments.push(segment);
        if (this.segments.length > this.o.windowSegments + RETAIN_EXTRA) this.segments.shift();
        // A change stays listed while the window holds its time, and the last one before it always.
        const windowStart = this.window()[0]?.programDateMs ?? 0;
        while (this.dateRanges.length > 1 && this.dateRanges[1]!.startMs <= windowStart) this.dateRanges.shift();
        const stale = this.segments.length - PART_SEGMENTS - 1;
        if (stale >= 0 && this.segments[stale]!.parts.length > 0) this.segments[stale]!.parts = [];
        this.nextSequence = e.sequence + 1;
        this.maxDurationMs = Math.max(this.maxDurationMs, e.durationMs);
        changed = true;
      } else errors.push(e);
    }
    if (changed) {
      this.version++;
      this.wake(false);
      this.changed();
    }
    if (media && media.length > 0) this.emit(media);
    return errors;
  }

  private emit(media: LayerMedia[]): void {
    for (const l of this.mediaListeners) {
      for (const m of media) {
        try {
          l.media(m);
        } catch {
          // A subscriber's fault stays its own (this runs under native ingest callbacks).
        }
      }
    }
  }

  /** Wall-clock start of the open segment, as its segment will be dated (ms). */
  private programDateOfOpen(): number {
    const prev = this.segments[this.segments.length - 1];
    return prev && !this.pendingDiscontinuity ? prev.programDateMs + prev.durationMs : (this.openStartMs ?? Date.now());
  }

  /** Records the changes `marks` (from a part or segment starting at `startPts`, dated `startMs`) as date ranges, once each. */
  private dated(marks: SegmenterMetadataMark[], startMs: number, startPts: number): void {
    for (const m of marks) {
      if (this.dateRanges.some((d) => d.id === m.id)) continue;
      const fields = this.pendingMeta.get(m.timestampMs);
      if (!fields) continue;
      this.pendingMeta.delete(m.timestampMs);
      this.dateRanges.push({ id: m.id, startMs: startMs + (m.pts90k - startPts) / 90, fields });
      this.version++;
    }
  }

  private wake(all: boolean): void {
    this.waiters.wake(all);
  }
}
