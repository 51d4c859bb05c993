/**
 * HLS playlists (RFC 8216), rendered to bytes once per change of the hub and cached.
 * Multivariant: one variant per layer (`BANDWIDTH`, `AVERAGE-BANDWIDTH`, `CODECS`, §4.3.4.2).
 * Media: `EXT-X-TARGETDURATION`, `EXT-X-MEDIA-SEQUENCE`, `EXT-X-DISCONTINUITY-SEQUENCE`, the live
 * window, `EXT-X-ENDLIST` once ended (§4.3.3).
 */
import type { StreamHub } from '../media/hub.js';

const enc = new TextEncoder();

/** Layer name of the passthrough layer of a stream with nominal bitrate `kbps`: `a128`. */
export const layerName = (kbps: number) => `a${kbps}`;

/** Renders the multivariant playlist of a hub with one (passthrough) layer. */
export function renderMultivariant(hub: StreamHub, layer: string, query = ''): Uint8Array {
  const bw = hub.bandwidth();
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-STREAM-INF:BANDWIDTH=${bw.peak},AVERAGE-BANDWIDTH=${bw.average},CODECS="${hub.codecs ?? 'mp4a.40.2'}"`,
    `${layer}/index.m3u8${query}`,
    '',
  ];
  return enc.encode(lines.join('\n'));
}

/** The media playlist's target duration (s): the configured one, raised if a segment rounds above it. */
export function targetDurationSeconds(hub: StreamHub): number {
  return Math.max(Math.round(hub.opts.targetDurationMs / 1000), Math.round(hub.maxDurationMs / 1000), 1);
}

/** Renders the media playlist of the live window. */
export function renderMediaPlaylist(hub: StreamHub, query = ''): Uint8Array {
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
    lines.push(`#EXTINF:${(s.durationMs / 1000).toFixed(3)},`, `${s.sequence}.ts${query}`);
  }
  if (hub.ended) lines.push('#EXT-X-ENDLIST');
  lines.push('');
  return enc.encode(lines.join('\n'));
}
