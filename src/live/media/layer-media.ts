/**
 * What a layer of the HLS ladder (src/live/media/layer.ts) holds and hands out: LL-HLS parts,
 * finished segments (an LL-HLS segment joined from its parts' bytes only when first read), the
 * pieces progressive listening takes, and the bit rate of a live window (draft-pantos-hls-rfc8216bis
 * §4.4.4.9, §4.4.6.2). Behaviour: docs/behaviour.md §9 "HLS", docs/ll-hls.md.
 */
import type { SegmenterMetadataFields } from '../../native/segmenter.js';

/** What plays now, as the layers carry it (docs/behaviour.md §11: timed ID3 `TIT2`, `TPE1`, `TALB`, `WXXX`). */
export type NowPlayingFields = SegmenterMetadataFields;

/** A change in the layer's timeline (`EXT-X-DATERANGE`): when it is presented (ms since the epoch) and what. */
export interface DateRange {
  /** Unique in the layer (the segmenter's change number). */
  id: number;
  startMs: number;
  fields: NowPlayingFields;
}

/** One LL-HLS part: `sequence` is its segment's media sequence number, `index` counts from 0. */
export interface Part {
  sequence: number;
  index: number;
  data: Uint8Array;
  durationMs: number;
}

/**
 * A finished segment. `data` is the native buffer itself (never copied) — or, on a layer with
 * parts whose segmenter leaves segment bytes out (`segmentBytes: false`), its parts' bytes joined
 * into one buffer when `data` is first read (then kept).
 */
export interface Segment {
  sequence: number;
  data: Uint8Array;
  durationMs: number;
  /** This segment follows a discontinuity (EXT-X-DISCONTINUITY before it). */
  discontinuity: boolean;
  /** Discontinuity sequence number of this segment (RFC 8216 §4.3.3.3). */
  discontinuitySequence: number;
  /** Its LL-HLS parts while they are still listed (cleared once the segment is old). */
  parts: Part[];
  /** `Layer.initVersion` of the init section this segment needs (fMP4). */
  initVersion: number;
  /** `Layer.initId` of that init section: what its URI is named by (fMP4; '' for MPEG-TS). */
  initId: string;
  /**
   * Wall-clock time of its first sample (ms since the epoch; `EXT-X-PROGRAM-DATE-TIME`): anchored
   * when a timeline starts (the first segment after a discontinuity) to when its audio arrived,
   * then each segment's start is the previous start plus the previous duration, so the dates agree
   * with `EXTINF` exactly.
   */
  programDateMs: number;
}

/**
 * One new piece of a layer's output, as progressive listening takes it (src/delivery/progressive/): an LL-HLS
 * part on layers with parts, a finished segment on the others. `data` is the layer's own buffer
 * (shared with HLS; never modified).
 */
export interface LayerMedia {
  data: Uint8Array;
  durationMs: number;
  /** `Layer.initVersion` of the init section it needs (fMP4). */
  initVersion: number;
}

/** A subscriber to a layer's output (`Layer.onMedia`). Exceptions it throws are swallowed. */
export interface LayerMediaListener {
  /** A new part (layers with parts) or segment (others), in order. */
  media(m: LayerMedia): void;
  /** The layer ended (its last media came before). */
  end(): void;
}

/** Bytes of `parts` together. */
export function partBytes(parts: Part[]): number {
  let n = 0;
  for (const p of parts) n += p.data.byteLength;
  return n;
}

/** The property of a `joinedSegment` that reads its bytes as held (`segmentPieces`). */
const PIECES = Symbol('pieces');

/**
 * A segment whose bytes are `pieces` (its parts' bytes, in order; `bytes` in all), joined into one
 * buffer when `data` is first read — by a player, a listener's burst, the thread mirror — and kept;
 * until then the layer holds each byte once (in its parts), and a segment nobody reads costs no copy.
 */
export function joinedSegment(fields: Omit<Segment, 'data'>, pieces: Uint8Array[], bytes: number): Segment {
  let data: Uint8Array | null = null;
  let rest: Uint8Array[] | null = pieces;
  Object.defineProperty(fields, PIECES, { enumerable: false, get: (): readonly Uint8Array[] => (data === null ? rest! : [data]) });
  return Object.defineProperty(fields, 'data', {
    enumerable: true,
    get(): Uint8Array {
      if (data === null) {
        data = Buffer.concat(rest!, bytes);
        rest = null;
      }
      return data;
    },
  }) as Segment;
}

/**
 * A segment's bytes as they are held, in order, without joining them: its parts' buffers while
 * `data` was never read (a `joinedSegment`), else `[data]`. For a writer that takes a list
 * (`writev`), so that keeping a segment does not copy it into a new buffer.
 */
export function segmentPieces(s: Segment): readonly Uint8Array[] {
  return (s as Segment & { [PIECES]?: readonly Uint8Array[] })[PIECES] ?? [s.data];
}

/**
 * `BANDWIDTH` (`peak`) and `AVERAGE-BANDWIDTH` (`average`), bits/s (rfc8216bis §4.4.6.2), of a
 * layer's live window `win` (oldest first; `sizeOf` a segment's bytes), as `Layer.bandwidth`
 * describes: short segments and those that end at a discontinuity left out; nominal `kbps` + 10 %
 * before the first segment.
 */
export function windowBandwidth(win: Segment[], sizeOf: (s: Segment) => number, targetDurationMs: number, kbps: number): { peak: number; average: number } {
  let bytes = 0;
  let ms = 0;
  let allBytes = 0;
  let allMs = 0;
  let peak = 0;
  for (let i = 0; i < win.length; i++) {
    const s = win[i]!;
    const b = sizeOf(s);
    allBytes += b;
    allMs += s.durationMs;
    const short = s.durationMs * 2 < targetDurationMs;
    const beforeDiscontinuity = win[i + 1]?.discontinuity === true;
    if (short || beforeDiscontinuity || s.durationMs <= 0) continue;
    bytes += b;
    ms += s.durationMs;
    peak = Math.max(peak, (b * 8000) / s.durationMs);
  }
  if (allMs <= 0) {
    const nominal = Math.round(kbps * 1000 * 1.1);
    return { peak: nominal, average: nominal };
  }
  const average = ms > 0 ? Math.round((bytes * 8000) / ms) : Math.round((allBytes * 8000) / allMs);
  return { peak: Math.max(Math.round(peak), average), average };
}

/**
 * The newest media covering at least `minMs` of audio (less when less is held), oldest first, in
 * `LayerMedia` units (`Layer.recentMedia`): `openParts` (of the segment in progress, needing init
 * `openInitVersion`), then the parts of `segments` that still keep them (when `lowLatency`), whole
 * segments before them.
 */
export function recentMedia(openParts: Part[], openInitVersion: number, segments: Segment[], lowLatency: boolean, minMs: number): LayerMedia[] {
  const out: LayerMedia[] = [];
  let ms = 0;
  const take = (data: Uint8Array, durationMs: number, initVersion: number): boolean => {
    out.push({ data, durationMs, initVersion });
    ms += durationMs;
    return ms >= minMs;
  };
  done: {
    for (let i = openParts.length - 1; i >= 0; i--) if (take(openParts[i]!.data, openParts[i]!.durationMs, openInitVersion)) break done;
    for (let i = segments.length - 1; i >= 0; i--) {
      const s = segments[i]!;
      if (lowLatency && s.parts.length > 0) {
        for (let j = s.parts.length - 1; j >= 0; j--) if (take(s.parts[j]!.data, s.parts[j]!.durationMs, s.initVersion)) break done;
      } else if (take(s.data, s.durationMs, s.initVersion)) break done;
    }
  }
  return out.reverse();
}
