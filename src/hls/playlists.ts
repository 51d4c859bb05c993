/**
 * HLS playlists (RFC 8216), rendered to bytes once per change of the hub and cached.
 * Multivariant: one variant per layer (`BANDWIDTH`, `AVERAGE-BANDWIDTH`, `CODECS`, §4.3.4.2).
 * Media: `EXT-X-TARGETDURATION`, `EXT-X-MEDIA-SEQUENCE`, `EXT-X-DISCONTINUITY-SEQUENCE`, the live
 * window, `EXT-X-ENDLIST` once ended (§4.3.3).
 *
 * Per-session URIs (`?sid=…`, `?token=…`, PRODUCT.md §4) come from a `Template`: the playlist
 * rendered once with a placeholder after every URI, kept as the byte runs between placeholders, so
 * that a session's playlist is one allocation and a few memcpy's (`fill`).
 */
import type { StreamHub } from '../media/hub.js';

const enc = new TextEncoder();
/** Marks where a URI's query goes in a template (never appears in a playlist otherwise). */
const SLOT = '\u0001';

/** Layer name of the passthrough layer of a stream with nominal bitrate `kbps`: `a128`. */
export const layerName = (kbps: number) => `a${kbps}`;

/** A playlist with a query slot after each URI: `plain` has no query; `runs` are the bytes around the slots. */
export interface Template {
  plain: Uint8Array;
  runs: Buffer[];
  runsBytes: number;
}

/** Renders `text` (with SLOT after each URI) into a Template. */
function template(text: string): Template {
  const runs = text.split(SLOT).map((t) => Buffer.from(t, 'utf8'));
  return { plain: enc.encode(text.split(SLOT).join('')), runs, runsBytes: runs.reduce((n, r) => n + r.length, 0) };
}

/** The playlist of `t` with `?query` after each URI (`query` is ASCII without the `?`). */
export function fill(t: Template, query: string): Uint8Array {
  if (query === '') return t.plain;
  const slots = t.runs.length - 1;
  const qLen = query.length + 1;
  const out = Buffer.allocUnsafe(t.runsBytes + slots * qLen);
  let o = 0;
  for (let i = 0; i < t.runs.length; i++) {
    const r = t.runs[i]!;
    r.copy(out, o);
    o += r.length;
    if (i < slots) {
      out[o++] = 0x3f; // '?'
      o += out.write(query, o, "latin1");
    }
  }
  return out;
}

/** Multivariant playlist template of a hub with one (passthrough) layer. */
export function multivariantTemplate(hub: StreamHub, layer: string): Template {
  const bw = hub.bandwidth();
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-STREAM-INF:BANDWIDTH=${bw.peak},AVERAGE-BANDWIDTH=${bw.average},CODECS="${hub.codecs ?? 'mp4a.40.2'}"`,
    `${layer}/index.m3u8${SLOT}`,
    '',
  ];
  return template(lines.join('\n'));
}

/** Renders the multivariant playlist of a hub with one (passthrough) layer; `query` includes its `?`. */
export function renderMultivariant(hub: StreamHub, layer: string, query = ''): Uint8Array {
  return fill(multivariantTemplate(hub, layer), query.replace(/^\?/, ''));
}

/** The media playlist's target duration (s): the configured one, raised if a segment rounds above it. */
export function targetDurationSeconds(hub: StreamHub): number {
  return Math.max(Math.round(hub.opts.targetDurationMs / 1000), Math.round(hub.maxDurationMs / 1000), 1);
}

/** Media playlist template of the live window. */
export function mediaTemplate(hub: StreamHub): Template {
  const segs = hub.window();
  const first = segs[0];
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    `#EXT-X-TARGETDURATION:${targetDurationSeconds(hub)}`,
    `#EXT-X-MEDIA-SEQUENCE:${first ? first.sequence : 0}`,
    `#EXT-X-DISCONTINUITY-SEQUENCE:${first ? first.discontinuitySequence - (first.discontinuity ? 1 : 0) : 0}`,
  ];
  for (const s of segs) {
    if (s.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
    lines.push(`#EXTINF:${(s.durationMs / 1000).toFixed(3)},`, `${s.sequence}.ts${SLOT}`);
  }
  if (hub.ended) lines.push('#EXT-X-ENDLIST');
  lines.push('');
  return template(lines.join('\n'));
}

/** Renders the media playlist of the live window; `query` includes its `?`. */
export function renderMediaPlaylist(hub: StreamHub, query = ''): Uint8Array {
  return fill(mediaTemplate(hub), query.replace(/^\?/, ''));
}
