/**
 * Catch-up playlists (docs/behaviour.md "Catch-up radio"; RFC 8216, rfc8216bis for the delta
 * update), rendered from rows of the catch-up index:
 * - a multivariant playlist whose variants are the stream's layers (`<layer>.m3u8` under the
 *   address's own folder);
 * - a media playlist of kept segments: `EXT-X-PROGRAM-DATE-TIME` on every segment,
 *   `EXT-X-DISCONTINUITY` where the live timeline had one (a new broadcast, a restart, a publisher
 *   reconnect) and — in playlists that never slide (`gapTags`) — where a segment is missing,
 *   `EXT-X-MAP` for fMP4, an `EXT-X-DATERANGE` (`CLASS="com.skylark.now-playing"`) per title that
 *   aired in the span, `EXT-X-PLAYLIST-TYPE` (`EVENT`, `VOD`) and `EXT-X-ENDLIST` when complete.
 *   The rewind playlist advertises `CAN-SKIP-UNTIL` and its delta update replaces the oldest
 *   segments by `EXT-X-SKIP` (rfc8216bis §4.4.5.2, §6.2.5.1).
 * Segment URIs name the kept objects, `<prefix><sequence>.<m4s|ts>`, the same media sequence
 * numbers as the live playlists (docs/streams.md "One timeline").
 */
import type { CatchUpSegmentRow, CatchUpTitle } from '../../base/db/catch-up-repo.js';
import type { LayerIndex } from './layer-index.js';

/** A variant of a catch-up multivariant playlist. */
export interface CatchUpVariant {
  layer: string;
  /** Bits/s (`BANDWIDTH`). */
  bandwidth: number;
  codecs: string;
}

/** The multivariant playlist: each layer's media playlist `<layer>.m3u8` under `folder` (relative), top first; `query` after each URI ('' for none). */
export function catchUpMultivariant(variants: CatchUpVariant[], folder: string, query: string): string {
  const q = query ? `?${query}` : '';
  const lines = ['#EXTM3U', '#EXT-X-VERSION:3', '#EXT-X-INDEPENDENT-SEGMENTS'];
  for (const v of variants) lines.push(`#EXT-X-STREAM-INF:BANDWIDTH=${v.bandwidth},CODECS="${v.codecs}"`, `${folder}${v.layer}.m3u8${q}`);
  lines.push('');
  return lines.join('\n');
}

/** What a catch-up media playlist is rendered from. */
export interface CatchUpMedia {
  /** The listed segments, in order (after `skipped` segments left out by a delta update). */
  rows: CatchUpSegmentRow[];
  /** Media sequence number of the playlist's first segment (a skipped one included). */
  mediaSequence: number;
  /** Discontinuity sequence number of the playlist's first segment, before its own discontinuity (RFC 8216 §4.3.3.3). */
  discontinuitySequence: number;
  /** Segments replaced by `EXT-X-SKIP` (0: a full playlist). */
  skipped: number;
  /** `EXT-X-PLAYLIST-TYPE`, or null (the rewind window slides). */
  type: 'EVENT' | 'VOD' | null;
  /** `EXT-X-ENDLIST`: nothing will be added. */
  ended: boolean;
  /** `EXT-X-TARGETDURATION` (s). */
  targetSeconds: number;
  /** The delta-update skip boundary to advertise (s, `CAN-SKIP-UNTIL`), or 0 for none. */
  skipUntilSeconds: number;
  /** `EXT-X-DISCONTINUITY` also where a media sequence number is missing (playlists that never slide). */
  gapTags: boolean;
  /** Relative URI of the layer's objects' folder, e.g. `../catchup/a128/`. */
  prefix: string;
  /** Query after every URI ('' for none). */
  query: string;
  titles: CatchUpTitle[];
}

/** A quoted-string attribute value (RFC 8216 §4.2): no `"`, CR or LF. */
const quoted = (v: string) => `"${v.replace(/"/g, "'").replace(/[\r\n\u0000-\u001f]/g, ' ')}"`;

/** The `EXT-X-DATERANGE` of a title of the play log, at its air time (docs/behaviour.md §11). */
function dateRange(t: CatchUpTitle): string {
  let line = `#EXT-X-DATERANGE:ID="np-${t.id}",CLASS="com.skylark.now-playing",START-DATE="${new Date(t.startMs).toISOString()}",X-TITLE=${quoted(t.title)}`;
  if (t.artist) line += `,X-ARTIST=${quoted(t.artist)}`;
  if (t.album) line += `,X-ALBUM=${quoted(t.album)}`;
  if (t.url) line += `,X-URL=${quoted(t.url)}`;
  return line;
}

/** The `EXT-X-TARGETDURATION` of `rows` (s): `configured`, raised when a segment rounds above it. */
export function targetSecondsOf(rows: CatchUpSegmentRow[], configuredMs: number): number {
  let max = configuredMs;
  for (const r of rows) if (r.duration_ms > max) max = r.duration_ms;
  return Math.max(1, Math.round(max / 1000));
}

/** What segment lines carry on from the segment before: the `EXT-X-MAP` in force ('' none) and its media sequence number (null: none before). */
export interface SegmentState {
  map: string;
  prev: number | null;
}

/** How segment lines are written: fMP4 (`EXT-X-MAP`), gap discontinuities, the objects' folder and the `?query` after URIs ('' none). */
export interface SegmentStyle {
  fmp4: boolean;
  gapTags: boolean;
  prefix: string;
  q: string;
}

/** ISO 8601 UTC of `ms` (as `Date.prototype.toISOString`), the date and minute formatted once per minute. */
function isoTimes(): (ms: number) => string {
  let minute = NaN;
  let prefix = '';
  return (ms) => {
    const m = Math.floor(ms / 60_000);
    if (m !== minute || ms < 0 || ms >= 8.64e15) {
      if (ms < 0 || ms >= 8.64e15) return new Date(ms).toISOString();
      minute = m;
      prefix = new Date(m * 60_000).toISOString().slice(0, 17);
    }
    const inMinute = ms - m * 60_000;
    const sec = Math.floor(inMinute / 1000);
    const milli = inMinute - sec * 1000;
    return `${prefix}${sec < 10 ? '0' : ''}${sec}.${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
  };
}

/** The lines of `rows` (each ending in a line feed), after state `st` (updated to the last row). */
export function segmentLines(rows: CatchUpSegmentRow[], st: SegmentState, o: SegmentStyle): string {
  let out = '';
  const iso = isoTimes();
  let dur = NaN;
  let extinf = '';
  for (const r of rows) {
    if (r.duration_ms !== dur) {
      dur = r.duration_ms;
      extinf = `#EXTINF:${(dur / 1000).toFixed(3)},\n`;
    }
    const gap = o.gapTags && st.prev !== null && r.sequence !== st.prev + 1;
    if (r.discontinuity === 1 || gap) out += '#EXT-X-DISCONTINUITY\n';
    if (o.fmp4 && r.init_id !== st.map) {
      st.map = r.init_id;
      out += `#EXT-X-MAP:URI="${o.prefix}init-${r.init_id}.mp4${o.q}"\n`;
    }
    out += `#EXT-X-PROGRAM-DATE-TIME:${iso(r.start_ms)}\n${extinf}${o.prefix}${r.sequence}.${r.ext}${o.q}\n`;
    st.prev = r.sequence;
  }
  return out;
}

/** Segments rendered together and kept as one text (a minute of 2 s segments, aligned inside their hour). */
export const RUN = 30;

/**
 * The segment lines of `index` from `fromMs` on (as `segmentLines` writes them, UTF-8, in pieces),
 * each complete run of RUN segments of an hour rendered once and kept in `kept` (by what it lists
 * and what it carries on from the run before), so a long window costs its new segments, not all.
 */
export function segmentRuns(index: LayerIndex, fromMs: number, o: SegmentStyle, kept: { get(key: string, render: () => Buffer): Buffer }): Buffer[] {
  const st: SegmentState = { map: '', prev: null };
  const out: Buffer[] = [];
  index.runs(fromMs, RUN, (blk, lo, hi) => {
    const rows = () => {
      const r: CatchUpSegmentRow[] = [];
      for (let i = lo; i < hi; i++) r.push(blk.row(i, index.streamId, index.layer));
      return r;
    };
    if (hi - lo < RUN) {
      out.push(Buffer.from(segmentLines(rows(), st, o)));
      return;
    }
    const seq = blk.seq(lo);
    const init = o.fmp4 ? blk.initOf(lo) : '';
    const mapAt = o.fmp4 && init !== st.map;
    const gapAt = o.gapTags && st.prev !== null && seq !== st.prev + 1;
    const key = `${index.streamId}/${index.layer}/${blk.key}/${seq}/${o.prefix}/${o.q}/${o.gapTags}/${mapAt}/${gapAt}`;
    out.push(kept.get(key, () => Buffer.from(segmentLines(rows(), { map: mapAt ? '' : init, prev: gapAt ? seq - 2 : seq - 1 }, o))));
    st.map = o.fmp4 ? blk.initOf(hi - 1) : '';
    st.prev = blk.seq(hi - 1);
  });
  return out;
}

/** A media playlist's lines before its segments (see `CatchUpMedia`; `fmp4`: its segments are fMP4), ending in a line feed. */
export function mediaHead(m: Omit<CatchUpMedia, 'rows'>, fmp4: boolean): string {
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${m.skipUntilSeconds > 0 ? 9 : fmp4 ? 7 : 3}`, `#EXT-X-TARGETDURATION:${m.targetSeconds}`];
  if (m.skipUntilSeconds > 0) lines.push(`#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=${m.skipUntilSeconds.toFixed(1)}`);
  if (m.type) lines.push(`#EXT-X-PLAYLIST-TYPE:${m.type}`);
  lines.push(`#EXT-X-MEDIA-SEQUENCE:${m.mediaSequence}`, `#EXT-X-DISCONTINUITY-SEQUENCE:${m.discontinuitySequence}`);
  if (fmp4) lines.push('#EXT-X-INDEPENDENT-SEGMENTS');
  for (const t of m.titles) lines.push(dateRange(t));
  if (m.skipped > 0) lines.push(`#EXT-X-SKIP:SKIPPED-SEGMENTS=${m.skipped}`);
  return lines.join('\n') + '\n';
}

/** Renders a catch-up media playlist (see `CatchUpMedia`). */
export function catchUpMediaPlaylist(m: CatchUpMedia): string {
  const fmp4 = m.rows[0]?.ext === 'm4s';
  const body = segmentLines(m.rows, { map: '', prev: null }, { fmp4, gapTags: m.gapTags, prefix: m.prefix, q: m.query ? `?${m.query}` : '' });
  return mediaHead(m, fmp4) + body + (m.ended ? '#EXT-X-ENDLIST\n' : '');
}

/** Discontinuity sequence number a playlist starting at `first` declares (before its own discontinuity, like the live playlists). */
export const discontinuityBefore = (first: CatchUpSegmentRow): number => first.discontinuity_sequence - (first.discontinuity === 1 ? 1 : 0);
