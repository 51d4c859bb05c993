/**
 * HLS serving (PRODUCT.md §3, §4, §9; RFC 8216 and the LL-HLS additions of rfc8216bis):
 * - `/hls/<stream_id>/index.m3u8` — the multivariant playlist (every ladder layer);
 * - `/hls/<stream_id>/<layer>/index.m3u8` — a layer's media playlist; with `_HLS_msn` (and
 *   `_HLS_part`) it is a blocking playlist reload (§6.2.5.2): answered once that segment (part)
 *   exists, the layer ends, or 3 target durations pass;
 * - `/hls/<stream_id>/<layer>/<seq>.m4s|.ts`, `<seq>.<part>.m4s`, `init-<v>.mp4` — segments, parts,
 *   init sections. A request for the part a preload hint names waits for it (§6.2.6).
 * Everything comes from memory: playlists pre-rendered once per layer change, media bytes are the
 * native buffers themselves. Public streams (PRODUCT.md §12): the multivariant playlist hands out
 * variant URIs with the listener's `?sid=`, so every media playlist request names its session; the
 * media playlist itself and every segment, part and init URI in it are the same for every
 * listener (the same bytes, shareable by any cache; a blocking reload's answer depends only on the
 * path and `_HLS_msn`/`_HLS_part`). Token streams carry `?token=` on every URI (spliced into the
 * pre-rendered playlist with one allocation). Segments, parts and init sections of public streams are immutable (cached a year);
 * playlists live ≤ half a target duration (LL-HLS layers: no-cache). A multivariant playlist that
 * carries a freshly minted `sid` is `private` (a shared cache must not hand one session to many).
 * A blocking reload answered because the requested segment (part) exists is shareable for one
 * target duration (`public, max-age=<target>`): an edge keys it on the path and
 * `_HLS_msn`/`_HLS_part` and fetches it once for all its listeners (PRODUCT.md §12); answered for
 * any other reason (the wait timed out, a held cap was hit) it is `no-store`, so no cache keeps a
 * playlist without the part under the query that asked for it. Every object of a token stream is
 * `private, no-store` (PRODUCT.md §12): a shared cache keyed on the path must never hand a gated
 * stream to someone else.
 *
 * Listener sessions and token-gated playback go through an optional `HlsAccess` (the listeners
 * feature): it mints the session id on the multivariant fetch, checks listener tokens, and counts
 * the listener on each media request. Without it, HLS is public and untracked.
 *
 * Held requests (blocking reloads, part waits) cost a timer and memory each while held; an
 * optional `HoldGate` caps them per client address and in total (PRODUCT.md §13). Over a cap the
 * request is not held but answered at once with what exists: the current playlist (a valid answer
 * to a blocking reload when the server cannot wait, rfc8216bis §6.2.5.2; `no-store`, so no cache
 * keeps it under the blocking query), or 503 with `Retry-After: 1` for a part not there yet.
 */
import type { DeferredReply, HttpServer, RawReply, RawRequestInfo } from '../http/server.js';
import { errorBody, headerBytes, STATUS_200, statusLine } from '../http/server.js';
import { ApiError, type ErrorCode } from '../errors/errors.js';
import type { Layer, MediaRegistry, StreamHub } from '../media/hub.js';
import { fill, mediaTemplate, multivariantTemplate, targetDurationSeconds, type Template } from './playlists.js';

const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Every object of a token stream (PRODUCT.md §12). */
const PRIVATE = 'private, no-store';
const TS = 'video/mp2t';
const M4S = 'video/iso.segment';
const MP4 = 'video/mp4';
const M3U8 = 'application/vnd.apple.mpegurl';
const objectHeaders = (type: string, cache: string) => headerBytes([['Content-Type', type], ['Cache-Control', cache], ['Access-Control-Allow-Origin', '*']]);
/** Media object headers by `private` (token stream): [public, private]. */
const TS_HEADERS = [objectHeaders(TS, IMMUTABLE), objectHeaders(TS, PRIVATE)] as const;
const M4S_HEADERS = [objectHeaders(M4S, IMMUTABLE), objectHeaders(M4S, PRIVATE)] as const;
const INIT_HEADERS = [objectHeaders(MP4, IMMUTABLE), objectHeaders(MP4, PRIVATE)] as const;
const PLAYLIST_PRIVATE = objectHeaders(M3U8, PRIVATE);
/** A blocking reload answered at once over the held cap: never cached under its blocking query. */
const PLAYLIST_NOW = [objectHeaders(M3U8, 'no-store'), PLAYLIST_PRIVATE] as const;
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache'], ['Access-Control-Allow-Origin', '*']] as const;

/**
 * An access decision: go on with `query` (ASCII, no `?`; '' for none) after every URI handed out
 * — `private` for a token stream (answered `Cache-Control: private, no-store`) — or refuse.
 */
export type HlsDecision = { ok: true; query: string; private: boolean } | { ok: false; status: 401 | 403 | 404 | 503; code: ErrorCode; message: string };

/** What decides who may play and who is counted (implemented by src/listeners/hls-access.ts). */
export interface HlsAccess {
  /** Multivariant fetch: checks the token; mints a session id for the variant URIs. */
  enter(streamId: string, query: string): HlsDecision;
  /**
   * A media playlist request: checks the token and joins or touches the session named by the
   * query (`sid`, or the token's subject). `timeoutMs`: inactivity after which the listener leaves
   * (3 target durations).
   */
  media(streamId: string, query: string, info: RawRequestInfo, timeoutMs: number): HlsDecision;
  /**
   * A media object request (segment, part, init): a token stream's token is checked; nothing is
   * tracked (public objects carry no per-listener query, PRODUCT.md §12).
   */
  object(streamId: string, query: string): HlsDecision;
}

/**
 * Admits requests the server holds open (blocking playlist reloads, part waits) under caps per
 * client address and in total (implemented by src/listeners/held.ts).
 */
export interface HoldGate {
  /**
   * One more held request from the client of `info` (read synchronously, during the handler): a
   * release function (safe to call more than once; gives the slot back on the first call), or
   * null when a cap is reached (the hit is counted and logged by the gate).
   */
  acquire(info: RawRequestInfo): (() => void) | null;
}

/** What `registerHlsRoutes` may be given besides the media. */
export interface HlsRouteOptions {
  /** Gates and counts listeners; without it HLS is public and untracked. */
  access?: HlsAccess | undefined;
  /** Caps held requests; without it every blocking request is held. */
  hold?: HoldGate | undefined;
}

interface Cached {
  version: number;
  template: Template;
  headers: ReadonlyArray<readonly [Uint8Array, Uint8Array]>;
}

type HeaderList = ReadonlyArray<readonly [Uint8Array, Uint8Array]>;

/** Headers of a blocking reload answered with the part it asked for, by target duration (s): shareable for one target duration. */
const BLOCKING_HIT = new Map<number, HeaderList>();
const blockingHit = (targetSeconds: number): HeaderList => {
  let h = BLOCKING_HIT.get(targetSeconds);
  if (!h) BLOCKING_HIT.set(targetSeconds, (h = objectHeaders(M3U8, `public, max-age=${targetSeconds}`)));
  return h;
};
/** Multivariant headers by max-age (s) when the body carries a minted session id: never in a shared cache. */
const MULTIVARIANT_SESSION = new Map<number, HeaderList>();
const multivariantSession = (maxAge: number): HeaderList => {
  let h = MULTIVARIANT_SESSION.get(maxAge);
  if (!h) MULTIVARIANT_SESSION.set(maxAge, (h = objectHeaders(M3U8, maxAge > 0 ? `private, max-age=${maxAge}` : 'private, no-cache')));
  return h;
};

/** `_HLS_msn` / `_HLS_part` of a query, or null without `_HLS_msn`; NaN marks a malformed value. */
function blockingParams(query: string): { msn: number; part: number | undefined } | null {
  if (!query.includes('_HLS_')) return null;
  const q = new URLSearchParams(query);
  const msn = q.get('_HLS_msn');
  if (msn === null) return null;
  const part = q.get('_HLS_part');
  const num = (s: string) => (/^\d{1,15}$/.test(s) ? Number(s) : NaN);
  return { msn: num(msn), part: part === null ? undefined : num(part) };
}

/** The query without the LL-HLS delivery directives (what the session and token checks see). */
function stripDirectives(query: string): string {
  if (!query.includes('_HLS_')) return query;
  return query
    .split('&')
    .filter((kv) => !kv.startsWith('_HLS_'))
    .join('&');
}

/** A listener of `layer` leaves after this long without a media playlist request (ms): 3 target durations (PRODUCT.md §4). */
export const listenerTimeoutMs = (layer: Layer): number => 3 * targetDurationSeconds(layer) * 1000;

/** Registers the HLS routes on `http` (see the module comment for `access` and `hold`). */
export function registerHlsRoutes(http: HttpServer, media: MediaRegistry, opts: HlsRouteOptions = {}): void {
  const { access, hold } = opts;
  const multiCache = new WeakMap<StreamHub, Cached>();
  const mediaCache = new WeakMap<Layer, Cached>();
  /** The error envelope of `code` (its status from src/errors/codes.ts, or `status` where the table allows it). */
  const refuse = (code: ErrorCode, message: string, requestId: string, opts: { status?: number; retryAfter?: string } = {}): RawReply => {
    const err = new ApiError(code, message, { status: opts.status });
    return {
      status: statusLine(err.status),
      headers: err.status === 401 ? [...JSON_HEADERS, ['WWW-Authenticate', 'Bearer realm="listener"']] : opts.retryAfter ? [...JSON_HEADERS, ['Retry-After', opts.retryAfter]] : JSON_HEADERS,
      body: Buffer.from(JSON.stringify(errorBody(err, requestId))),
    };
  };
  const notFound = (what: string, requestId: string) => refuse('resource_missing', what, requestId);
  /** 503 + `Retry-After: 1`: a request that would be held, over the held caps. */
  const busy = (requestId: string) => refuse('too_many_held_requests', 'Too many requests held open; retry in a second.', requestId, { retryAfter: '1' });
  const playlistHeaders = (ended: boolean, target: number, lowLatency: boolean): ReadonlyArray<readonly [Uint8Array, Uint8Array]> => {
    const maxAge = Math.floor(target / 2);
    const cache = ended ? 'public, max-age=60' : lowLatency ? 'no-cache' : maxAge > 0 ? `public, max-age=${maxAge}` : 'no-cache';
    return objectHeaders(M3U8, cache);
  };
  const multivariant = (hub: StreamHub): Cached => {
    let c = multiCache.get(hub);
    if (!c || c.version !== hub.version) {
      c = { version: hub.version, template: multivariantTemplate(hub), headers: playlistHeaders(hub.ended, targetDurationSeconds(hub.top), false) };
      multiCache.set(hub, c);
    }
    return c;
  };
  const mediaPlaylist = (layer: Layer): Cached => {
    let c = mediaCache.get(layer);
    if (!c || c.version !== layer.version) {
      c = { version: layer.version, template: mediaTemplate(layer), headers: playlistHeaders(layer.ended, targetDurationSeconds(layer), layer.lowLatency) };
      mediaCache.set(layer, c);
    }
    return c;
  };
  const timeoutMs = listenerTimeoutMs;
  /** Token check and listener accounting for a media request: the refusal, or the query and privacy to answer with. */
  const admit = (id: string, query: string, info: RawRequestInfo, layer: Layer, requestId: string): RawReply | { query: string; private: boolean } => {
    if (!access) return { query: '', private: false };
    const d = access.media(id, query, info, timeoutMs(layer));
    return d.ok ? d : refuse(d.code, d.message, requestId, { status: d.status });
  };
  /**
   * Answers with `reply` once `layer.has(msn, part)` (or the layer ends, or the wait times out):
   * at once when it already holds; held (deferred reply) when the gate admits it; else `now()`.
   * The held slot is given back exactly once: on the answer, the client's abort or the timeout.
   */
  const when = (layer: Layer, msn: number, part: number | undefined, info: RawRequestInfo, reply: () => RawReply, now: () => RawReply): RawReply | DeferredReply => {
    if (layer.ended || layer.has(msn, part)) return reply();
    const release = hold ? hold.acquire(info) : noop;
    if (!release) return now();
    return {
      defer: (answer) => {
        const cancel = layer.waitFor(msn, part, () => {
          release();
          answer(reply);
        });
        return () => {
          release();
          cancel();
        };
      },
    };
  };

  for (const method of ['get', 'head'] as const) {
    http.raw(method, '/hls/:id/index.m3u8', ([id], query, requestId) => {
      const hub = media.get(id!);
      if (!hub || hub.listed().length === 0) return notFound(`No live HLS for stream '${id}'.`, requestId);
      const c = multivariant(hub);
      if (!access) return { status: STATUS_200, headers: c.headers, body: c.template.plain };
      const d = access.enter(id!, query);
      if (!d.ok) return refuse(d.code, d.message, requestId, { status: d.status });
      const headers = d.private ? PLAYLIST_PRIVATE : d.query === '' ? c.headers : multivariantSession(Math.floor(targetDurationSeconds(hub.top) / 2));
      return { status: STATUS_200, headers, body: fill(c.template, d.query) };
    });

    http.raw(method, '/hls/:id/:layer/index.m3u8', ([id, name], rawQuery, requestId, info) => {
      const hub = media.get(id!);
      const layer = hub?.layer(name!);
      if (!hub || !layer || layer.failed || !hub.top.ready) return notFound(`No such HLS layer '${name}' for stream '${id}'.`, requestId);
      const block = blockingParams(rawQuery);
      const query = stripDirectives(rawQuery);
      const admitted = admit(id!, query, info, layer, requestId);
      if ('status' in admitted) return admitted;
      const render = (): RawReply => {
        if (!layer.ready) return notFound(`HLS layer '${name}' of stream '${id}' has no segment yet.`, requestId);
        const c = mediaPlaylist(layer);
        return admitted.private ? { status: STATUS_200, headers: PLAYLIST_PRIVATE, body: fill(c.template, admitted.query) } : { status: STATUS_200, headers: c.headers, body: c.template.plain };
      };
      /** Over the held caps: the playlist as it is now (rfc8216bis §6.2.5.2), never cached under the blocking query. */
      const current = (): RawReply => {
        if (!layer.ready) return busy(requestId);
        const t = mediaPlaylist(layer).template;
        return { status: STATUS_200, headers: PLAYLIST_NOW[admitted.private ? 1 : 0], body: admitted.private ? fill(t, admitted.query) : t.plain };
      };
      if (block) {
        if (!layer.lowLatency) return refuse('parameter_invalid', 'This layer does not support blocking playlist reload.', requestId);
        if (Number.isNaN(block.msn) || Number.isNaN(block.part ?? 0)) return refuse('parameter_invalid', '_HLS_msn and _HLS_part must be integers.', requestId);
        // §6.2.5.2: a request more than two segments ahead of the playlist is refused.
        if (block.msn > layer.nextSequence + 2) return refuse('parameter_invalid', `_HLS_msn ${block.msn} is too far ahead of the playlist.`, requestId);
        /** The answer to the blocking reload: shareable when it lists what was asked for (PRODUCT.md §12), else `no-store`. */
        const answer = (): RawReply => {
          if (admitted.private || layer.ended || !layer.ready) return render();
          const t = mediaPlaylist(layer).template;
          return { status: STATUS_200, headers: layer.has(block.msn, block.part) ? blockingHit(targetDurationSeconds(layer)) : PLAYLIST_NOW[0], body: t.plain };
        };
        return when(layer, block.msn, block.part, info, answer, current);
      }
      // A ladder layer whose codec process has not cut its first segment (part) yet: wait for it.
      if (!layer.ready) return when(layer, layer.nextSequence, layer.lowLatency ? 0 : undefined, info, render, () => busy(requestId));
      return render();
    });

    http.raw(method, '/hls/:id/:layer/:file', ([id, name, file], query, requestId, info) => {
      const hub = media.get(id!);
      const layer = hub?.layer(name!);
      const m = /^(?:(\d{1,15})(?:\.(\d{1,4}))?\.(m4s|ts)|init-(\d{1,9})\.mp4)$/.exec(file!);
      if (!hub || !layer || !m) return notFound(`No such file '${name}/${file}' for stream '${id}'.`, requestId);
      let p: 0 | 1 = 0;
      if (access) {
        const d = access.object(id!, query);
        if (!d.ok) return refuse(d.code, d.message, requestId, { status: d.status });
        if (d.private) p = 1;
      }
      if (m[4] !== undefined) {
        if (!layer.init || Number(m[4]) !== layer.initVersion) return notFound(`No such init section '${name}/${file}'.`, requestId);
        return { status: STATUS_200, headers: INIT_HEADERS[p], body: layer.init };
      }
      const seq = Number(m[1]);
      const ext = m[3]!;
      if ((ext === 'ts') !== (layer.o.container === 'ts')) return notFound(`No such file '${name}/${file}'.`, requestId);
      const headers = ext === 'ts' ? TS_HEADERS[p] : M4S_HEADERS[p];
      if (m[2] === undefined) {
        const seg = layer.segment(seq);
        return seg ? { status: STATUS_200, headers, body: seg.data } : notFound(`No such segment '${name}/${file}' for stream '${id}'.`, requestId);
      }
      const index = Number(m[2]);
      const serve = (): RawReply => {
        const part = layer.part(seq, index);
        return part ? { status: STATUS_200, headers, body: part.data } : notFound(`No such part '${name}/${file}' for stream '${id}'.`, requestId);
      };
      // The part a preload hint names (the next one) is answered as soon as it exists.
      if (!layer.has(seq, index) && !layer.ended && seq === layer.nextSequence && index <= layer.openParts.length) return when(layer, seq, index, info, serve, () => busy(requestId));
      return serve();
    });
  }
}

const noop = () => {};
