/**
 * HLS serving (PRODUCT.md §3, §4, §9): `/hls/<stream_id>/index.m3u8` (multivariant),
 * `/hls/<stream_id>/<layer>/index.m3u8` (media playlist), `/hls/<stream_id>/<layer>/<seq>.ts`.
 * Everything comes from memory: playlists pre-rendered once per hub change as templates (a
 * session's `?sid=`/`?token=` spliced in with one allocation), segments are the native buffers
 * themselves. Segments are immutable (cache a year); playlists live ≤ half a target duration.
 *
 * Listener sessions and token-gated playback go through an optional `HlsAccess` (the listeners
 * feature): it mints the session id on the multivariant fetch, checks listener tokens, and counts
 * the listener on each media request. Without it, HLS is public and untracked.
 */
import type { HttpServer, RawReply, RawRequestInfo } from '../http/server.js';
import { errorBody } from '../http/server.js';
import { ApiError } from '../errors/errors.js';
import type { MediaRegistry, StreamHub } from '../media/hub.js';
import { fill, layerName, mediaTemplate, multivariantTemplate, targetDurationSeconds, type Template } from './playlists.js';

const SEGMENT_HEADERS = [
  ['Content-Type', 'video/mp2t'],
  ['Cache-Control', 'public, max-age=31536000, immutable'],
  ['Access-Control-Allow-Origin', '*'],
] as const;

/** An access decision: go on with `query` (ASCII, no `?`; '' for none) after every URI handed out, or refuse. */
export type HlsDecision = { ok: true; query: string } | { ok: false; status: 401 | 403 | 404 | 503; code: string; message: string };

/** What decides who may play and who is counted (implemented by src/listeners/hls-access.ts). */
export interface HlsAccess {
  /** Multivariant fetch: checks the token; mints a session id for the variant URIs. */
  enter(streamId: string, query: string): HlsDecision;
  /**
   * A media request (media playlist or segment): checks the token and joins or touches the
   * session named by the query (`sid`, or the token's subject). `timeoutMs`: inactivity after
   * which the listener leaves (3 target durations). The query is what the playlist's URIs carry.
   */
  media(streamId: string, query: string, info: RawRequestInfo, timeoutMs: number): HlsDecision;
}

interface Cached {
  version: number;
  multivariant: Template;
  media: Template;
  headers: ReadonlyArray<readonly [string, string]>;
  timeoutMs: number;
}

const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache'], ['Access-Control-Allow-Origin', '*']] as const;

/** Registers the HLS routes on `http`; `access` gates and counts listeners (public and untracked without it). */
export function registerHlsRoutes(http: HttpServer, media: MediaRegistry, access?: HlsAccess): void {
  const cache = new WeakMap<StreamHub, Cached>();
  const refuse = (status: number, code: string, message: string, requestId: string): RawReply => ({
    status: status === 401 ? '401 Unauthorized' : status === 403 ? '403 Forbidden' : status === 503 ? '503 Service Unavailable' : '404 Not Found',
    headers: status === 401 ? [...JSON_HEADERS, ['WWW-Authenticate', 'Bearer realm="listener"']] : JSON_HEADERS,
    body: Buffer.from(JSON.stringify(errorBody(new ApiError(status, code, message), requestId))),
  });
  const notFound = (what: string, requestId: string) => refuse(404, 'resource_missing', what, requestId);
  const playlists = (hub: StreamHub): Cached => {
    let c = cache.get(hub);
    if (!c || c.version !== hub.version) {
      const target = targetDurationSeconds(hub);
      const maxAge = Math.max(0, Math.floor(target / 2));
      c = {
        version: hub.version,
        multivariant: multivariantTemplate(hub, layerName(hub.opts.nominalKbps)),
        media: mediaTemplate(hub),
        headers: [
          ['Content-Type', 'application/vnd.apple.mpegurl'],
          ['Cache-Control', hub.ended ? 'public, max-age=60' : maxAge > 0 ? `public, max-age=${maxAge}` : 'no-cache'],
          ['Access-Control-Allow-Origin', '*'],
        ],
        timeoutMs: 3 * target * 1000,
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
    http.raw(method, '/hls/:id/index.m3u8', ([id], query, requestId) => {
      const hub = ready(id!);
      if (!hub) return notFound(`No live HLS for stream '${id}'.`, requestId);
      const c = playlists(hub);
      if (!access) return { status: '200 OK', headers: c.headers, body: c.multivariant.plain };
      const d = access.enter(id!, query);
      if (!d.ok) return refuse(d.status, d.code, d.message, requestId);
      return { status: '200 OK', headers: c.headers, body: fill(c.multivariant, d.query) };
    });
    http.raw(method, '/hls/:id/:layer/index.m3u8', ([id, layer], query, requestId, info) => {
      const hub = ready(id!);
      if (!hub || layer !== layerName(hub.opts.nominalKbps)) return notFound(`No such HLS layer '${layer}' for stream '${id}'.`, requestId);
      const c = playlists(hub);
      if (!access) return { status: '200 OK', headers: c.headers, body: c.media.plain };
      const d = access.media(id!, query, info, c.timeoutMs);
      if (!d.ok) return refuse(d.status, d.code, d.message, requestId);
      return { status: '200 OK', headers: c.headers, body: fill(c.media, d.query) };
    });
    http.raw(method, '/hls/:id/:layer/:file', ([id, layer, file], query, requestId, info) => {
      const hub = media.get(id!);
      const m = /^(\d{1,15})\.ts$/.exec(file!);
      const seg = hub && m && layer === layerName(hub.opts.nominalKbps) ? hub.segment(Number(m[1])) : undefined;
      if (!seg) return notFound(`No such segment '${layer}/${file}' for stream '${id}'.`, requestId);
      if (access) {
        const d = access.media(id!, query, info, playlists(hub!).timeoutMs);
        if (!d.ok) return refuse(d.status, d.code, d.message, requestId);
      }
      return { status: '200 OK', headers: SEGMENT_HEADERS, body: seg.data };
    });
  }
}
