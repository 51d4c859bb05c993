/**
 * HLS playlists (RFC 8216; LL-HLS per draft-pantos-hls-rfc8216bis), rendered to bytes once per
 * change and cached.
 * - Multivariant: one variant per ladder layer, top first (`BANDWIDTH`, `AVERAGE-BANDWIDTH`,
 *   `CODECS`, §4.3.4.2).
 * - Media: `EXT-X-TARGETDURATION`, `EXT-X-MEDIA-SEQUENCE`, `EXT-X-DISCONTINUITY-SEQUENCE`, the
 *   live window with `EXT-X-PROGRAM-DATE-TIME` on every segment, an `EXT-X-DATERANGE`
 *   (`CLASS="com.skylark.now-playing"`) per now-playing change in it, `EXT-X-MAP` for fMP4, `EXT-X-ENDLIST` once ended; for LL-HLS layers also
 *   `EXT-X-SERVER-CONTROL` (CAN-BLOCK-RELOAD, PART-HOLD-BACK, CAN-SKIP-UNTIL), `EXT-X-PART-INF`,
 *   the parts of the newest segments and of the one in progress, and `EXT-X-PRELOAD-HINT` for the
 *   next part. Classic players ignore the LL-HLS tags and read the same playlist.
 * - Delta update (LL-HLS layers, `_HLS_skip=YES`, rfc8216bis §6.2.5.1, §4.4.5.2): the same
 *   playlist with its oldest segments — those that end at least the skip boundary before the end
 *   of the last segment — replaced by `EXT-X-SKIP:SKIPPED-SEGMENTS=<n>` (docs/ll-hls.md).
 *
 * Per-session URIs (`?sid=…`, `?token=…`, docs/behaviour.md §4) come from a `Template`: the playlist
 * rendered once without queries, plus the offsets right after every URI, so that a session's
 * playlist is one allocation and a few memcpy's (`fill`).
 */
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import type { DateRange } from '../../live/media/layer-media.js';

const enc = new TextEncoder();
/** Marks where a URI's query goes in a template (never appears in a playlist otherwise). */
const SLOT = '\u0001';

/**
 * A rendered playlist: `plain` (no query after its URIs) and `slots`, the byte offsets in `plain`
 * right after each URI, where a session's `?query` goes. `plain` is the answer to every listener of
 * a public stream; on a multi-threaded node it lives in a SharedArrayBuffer, shared by every thread.
 */
export interface Template {
  plain: Uint8Array;
  slots: Uint32Array;
}

/** Renders `text` (with SLOT after each URI) into a Template. */
function template(text: string): Template {
  const pieces = text.split(SLOT);
  const plain = enc.encode(pieces.join(''));
  const slots = new Uint32Array(pieces.length - 1);
  let o = 0;
  for (let i = 0; i < slots.length; i++) {
    o += Buffer.byteLength(pieces[i]!, 'utf8');
    slots[i] = o;
  }
  return { plain, slots };
}

/** The playlist of `t` with `?query` after each URI (`query` is ASCII without the `?`): one allocation, a few copies. */
export function fill(t: Template, query: string): Uint8Array {
  if (query === '') return t.plain;
  const { plain, slots } = t;
  const qLen = query.length + 1;
  const out = Buffer.allocUnsafe(plain.length + slots.length * qLen);
  let from = 0;
  let o = 0;
  for (let i = 0; i < slots.length; i++) {
    const to = slots[i]!;
    out.set(plain.subarray(from, to), o);
    o += to - from;
    out[o++] = 0x3f; // '?'
    o += out.write(query, o, 'latin1');
    from = to;
  }
  out.set(plain.subarray(from), o);
  return out;
}

/** Multivariant playlist template of a hub: every listed layer, top first. */
export function multivariantTemplate(hub: StreamHub): Template {
  const layers = hub.listed();
  const lowLatency = layers.some((l) => l.lowLatency);
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${lowLatency ? 9 : 3}`, '#EXT-X-INDEPENDENT-SEGMENTS'];
  const codecs = hub.top.codecs ?? 'mp4a.40.2';
  for (const l of layers) {
    const bw = l.bandwidth();
    lines.push(`#EXT-X-STREAM-INF:BANDWIDTH=${bw.peak},AVERAGE-BANDWIDTH=${bw.average},CODECS="${l.codecs ?? codecs}"`, `${l.name}/index.m3u8${SLOT}`);
  }
  lines.push('');
  return template(lines.join('\n'));
}

/** The media playlist's target duration (s): the configured one, raised if a segment rounds above it. */
export function targetDurationSeconds(layer: Layer): number {
  return Math.max(Math.round(layer.o.targetDurationMs / 1000), Math.round(layer.maxDurationMs / 1000), 1);
}

/**
 * The skip boundary (s) a low-latency layer advertises as `CAN-SKIP-UNTIL` (rfc8216bis §4.4.3.8:
 * at least six target durations): exactly six.
 */
export const skipBoundarySeconds = (layer: Layer): number => 6 * targetDurationSeconds(layer);

/**
 * How many of the live window's oldest segments a delta update skips (rfc8216bis §6.2.5.1): those
 * that end at least the skip boundary before the end of the last segment. A segment that follows
 * a discontinuity is never skipped, nor any after it (its `EXT-X-DISCONTINUITY` would be lost and
 * the discontinuity sequence of the segments listed after it would read wrong). 0 for a layer
 * without parts or once ended (no delta update then).
 */
export function skippedSegments(layer: Layer): number {
  if (!layer.lowLatency || layer.ended) return 0;
  const segs = layer.window();
  let total = 0;
  for (const s of segs) total += s.durationMs;
  const boundaryMs = skipBoundarySeconds(layer) * 1000;
  let end = 0;
  let n = 0;
  for (const s of segs) {
    end += s.durationMs;
    if (s.discontinuity || total - end < boundaryMs) break;
    n++;
  }
  return n;
}

/** PART-TARGET (s): the configured part target plus one frame's slack, raised to the longest part seen. */
export function partTargetSeconds(layer: Layer): number {
  return Math.ceil(Math.max(layer.o.partTargetMs + 25, layer.maxPartMs)) / 1000;
}

/** A quoted-string attribute value (RFC 8216 §4.2): no `"`, CR or LF. */
const quoted = (v: string) => `"${v.replace(/"/g, "'").replace(/[\r\n\u0000-\u001f]/g, ' ')}"`;

/** The `EXT-X-DATERANGE` of a now-playing change (docs/behaviour.md §11). */
function dateRange(d: DateRange): string {
  const f = d.fields;
  let line = `#EXT-X-DATERANGE:ID="np-${d.id}",CLASS="com.skylark.now-playing",START-DATE="${new Date(Math.round(d.startMs)).toISOString()}",X-TITLE=${quoted(f.title)}`;
  if (f.artist) line += `,X-ARTIST=${quoted(f.artist)}`;
  if (f.album) line += `,X-ALBUM=${quoted(f.album)}`;
  if (f.url) line += `,X-URL=${quoted(f.url)}`;
  return line;
}

const seconds = (ms: number) => (ms / 1000).toFixed(5).replace(/0+$/, '').replace(/\.$/, '.0');

/**
 * File name of a segment (`12.m4s`, `12.ts`), a part (`12.3.m4s`) and an init section
 * (`init-<16 hex digits of the SHA-256 of its bytes>.mp4`, `Layer.initId`). A name never names
 * other bytes (RFC 8216 §6.2.1; docs/streams.md "One timeline"): media sequence numbers never
 * repeat, also across restarts, and an init section is named by its content.
 */
export const segmentFile = (l: Layer, seq: number) => `${seq}.${l.o.container === 'fmp4' ? 'm4s' : 'ts'}`;
export const partFile = (seq: number, index: number) => `${seq}.${index}.m4s`;
export const initFile = (initId: string) => `init-${initId}.mp4`;

/**
 * Media playlist template of a layer's live window (LL-HLS tags when the layer has parts); with
 * `skip` > 0 (see `skippedSegments`), its delta update: the first `skip` segments replaced by
 * `EXT-X-SKIP` (rfc8216bis §4.4.5.2). Every other tag stays, the `EXT-X-DATERANGE`s included
 * (only a `_HLS_skip=v2` update, not offered here, may leave them out).
 */
export function mediaTemplate(layer: Layer, skip = 0): Template {
  const all = layer.window();
  const first = all[0];
  const segs = skip > 0 ? all.slice(skip) : all;
  const ll = layer.lowLatency;
  const partTarget = ll ? partTargetSeconds(layer) : 0;
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${ll ? 9 : layer.o.container === 'fmp4' ? 7 : 3}`, `#EXT-X-TARGETDURATION:${targetDurationSeconds(layer)}`];
  if (ll) {
    lines.push(
      `#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=${(3 * partTarget).toFixed(3)},CAN-SKIP-UNTIL=${skipBoundarySeconds(layer).toFixed(1)}`,
      `#EXT-X-PART-INF:PART-TARGET=${partTarget.toFixed(3)}`,
    );
  }
  lines.push(
    `#EXT-X-MEDIA-SEQUENCE:${first ? first.sequence : layer.nextSequence}`,
    `#EXT-X-DISCONTINUITY-SEQUENCE:${first ? first.discontinuitySequence - (first.discontinuity ? 1 : 0) : layer.discontinuityNumber}`,
  );
  if (layer.o.container === 'fmp4') lines.push('#EXT-X-INDEPENDENT-SEGMENTS');
  for (const d of layer.dateRanges) lines.push(dateRange(d));
  if (skip > 0) lines.push(`#EXT-X-SKIP:SKIPPED-SEGMENTS=${skip}`);
  let map = -1;
  for (const s of segs) {
    if (s.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
    if (layer.o.container === 'fmp4' && s.initVersion !== map) {
      map = s.initVersion;
      lines.push(`#EXT-X-MAP:URI="${initFile(s.initId)}${SLOT}"`);
    }
    lines.push(`#EXT-X-PROGRAM-DATE-TIME:${new Date(s.programDateMs).toISOString()}`);
    if (ll) for (const p of s.parts) lines.push(`#EXT-X-PART:DURATION=${seconds(p.durationMs)},URI="${partFile(p.sequence, p.index)}${SLOT}",INDEPENDENT=YES`);
    lines.push(`#EXTINF:${(s.durationMs / 1000).toFixed(3)},`, `${segmentFile(layer, s.sequence)}${SLOT}`);
  }
  if (ll && !layer.ended) {
    if (layer.openParts.length > 0 && layer.openDiscontinuity) lines.push('#EXT-X-DISCONTINUITY');
    if (layer.openParts.length > 0 && layer.initVersion !== map) lines.push(`#EXT-X-MAP:URI="${initFile(layer.initId)}${SLOT}"`);
    for (const p of layer.openParts) lines.push(`#EXT-X-PART:DURATION=${seconds(p.durationMs)},URI="${partFile(p.sequence, p.index)}${SLOT}",INDEPENDENT=YES`);
    lines.push(`#EXT-X-PRELOAD-HINT:TYPE=PART,URI="${partFile(layer.nextSequence, layer.openParts.length)}${SLOT}"`);
  }
  if (layer.ended) lines.push('#EXT-X-ENDLIST');
  lines.push('');
  return template(lines.join('\n'));
}
