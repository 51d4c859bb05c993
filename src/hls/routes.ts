/**
 * HLS serving (PRODUCT.md §3, §9): `/hls/<stream_id>/index.m3u8` (multivariant),
 * `/hls/<stream_id>/<layer>/index.m3u8` (media playlist), `/hls/<stream_id>/<layer>/<seq>.ts`.
 * Everything comes from memory: playlists pre-rendered to bytes once per hub change, segments
 * are the native buffers themselves. Segments are immutable (cache a year); playlists live
 * ≤ half a target duration.
 */
import type { HttpServer, RawReply } from '../http/server.js';
import { errorBody } from '../http/server.js';
import { ApiError } from '../errors/errors.js';
import type { MediaRegistry, StreamHub } from '../media/hub.js';
import { layerName, renderMediaPlaylist, renderMultivariant, targetDurationSeconds } from './playlists.js';

const SEGMENT_HEADERS = [
  ['Content-Type', 'video/mp2t'],
  ['Cache-Control', 'public, max-age=31536000, immutable'],
  ['Access-Control-Allow-Origin', '*'],
] as const;

interface Cached {
  version: number;
  multivariant: Uint8Array;
  media: Uint8Array;
  headers: ReadonlyArray<readonly [string, string]>;
}

/** Registers the HLS routes on `http`. */
export function registerHlsRoutes(http: HttpServer, media: MediaRegistry): void {
  const cache = new WeakMap<StreamHub, Cached>();
  const notFound = (what: string, requestId: string): RawReply => ({
    status: '404 Not Found',
    headers: [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache'], ['Access-Control-Allow-Origin', '*']],
    body: Buffer.from(JSON.stringify(errorBody(new ApiError(404, 'resource_missing', what), requestId))),
  });
  const playlists = (hub: StreamHub): Cached => {
    let c = cache.get(hub);
    if (!c || c.version !== hub.version) {
      const maxAge = Math.max(0, Math.floor(targetDurationSeconds(hub) / 2));
      c = {
        version: hub.version,
        multivariant: renderMultivariant(hub, layerName(hub.opts.nominalKbps)),
        media: renderMediaPlaylist(hub),
        headers: [
          ['Content-Type', 'application/vnd.apple.mpegurl'],
          ['Cache-Control', hub.ended ? 'public, max-age=60' : maxAge > 0 ? `public, max-age=${maxAge}` : 'no-cache'],
          ['Access-Control-Allow-Origin', '*'],
        ],
      };
      cache.set(hub, c);
    }
    return c;
  };
  // A stream's HLS exists once its first segment does (players fail on empty live playlists).
  const ready = (id: string) => {
    const hub = media.get(id);
    return hub && hub.codecs !== null && hub.window().length > 0 ? hub : undefined;
  };

  for (const method of ['get', 'head'] as const) {
    http.raw(method, '/hls/:id/index.m3u8', ([id], _q, requestId) => {
      const hub = ready(id!);
      if (!hub) return notFound(`No live HLS for stream '${id}'.`, requestId);
      const c = playlists(hub);
      return { status: '200 OK', headers: c.headers, body: c.multivariant };
    });
    http.raw(method, '/hls/:id/:layer/index.m3u8', ([id, layer], _q, requestId) => {
      const hub = ready(id!);
      if (!hub || layer !== layerName(hub.opts.nominalKbps)) return notFound(`No such HLS layer '${layer}' for stream '${id}'.`, requestId);
      const c = playlists(hub);
      return { status: '200 OK', headers: c.headers, body: c.media };
    });
    http.raw(method, '/hls/:id/:layer/:file', ([id, layer, file], _q, requestId) => {
      const hub = media.get(id!);
      const m = /^(\d{1,15})\.ts$/.exec(file!);
      const seg = hub && m && layer === layerName(hub.opts.nominalKbps) ? hub.segment(Number(m[1])) : undefined;
      if (!seg) return notFound(`No such segment '${layer}/${file}' for stream '${id}'.`, requestId);
      return { status: '200 OK', headers: SEGMENT_HEADERS, body: seg.data };
    });
  }
}
