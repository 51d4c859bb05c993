/**
 * HLS serving (docs/behaviour.md §3, §4, §9; RFC 8216 and the LL-HLS additions of rfc8216bis):
 * - `/hls/<stream_id>/index.m3u8` — the multivariant playlist (every ladder layer);
 * - `/hls/<stream_id>/<layer>/index.m3u8` — a layer's media playlist; with `_HLS_msn` (and
 *   `_HLS_part`) it is a blocking playlist reload (§6.2.5.2): answered once that segment (part)
 *   exists — a part index past the last part of a finished segment is part 0 of the next one —,
 *   the layer ends, or 3 target durations pass; `_HLS_msn` more than two segments past the last
 *   segment listed is 400. With `_HLS_skip=YES` an LL-HLS layer answers its delta update
 *   (§6.2.5.1: the oldest segments replaced by `EXT-X-SKIP`). The three directives are read as a
 *   caching edge keys on them (nginx's `$arg_…` matches names in any case and takes the first): a
 *   query that repeats one, or spells one in another case, is 400 (docs/ll-hls.md);
 * - `/hls/<stream_id>/<layer>/<seq>.m4s|.ts`, `<seq>.<part>.m4s`, `init-<id>.mp4` — segments, parts,
 *   init sections (`<id>`: 16 hex digits of the init section's SHA-256). A request for the part a
 *   preload hint names waits for it (§6.2.6). No name ever answers other bytes, also across
 *   restarts (docs/streams.md "One timeline"): what they are cached as immutable holds.
 * Everything comes from memory: playlists pre-rendered once per layer change, media bytes are the
 * native buffers themselves. Public streams (docs/behaviour.md §12): the multivariant playlist hands out
 * variant URIs with the listener's `?sid=`, so every media playlist request names its session; the
 * media playlist itself and every segment, part and init URI in it are the same for every
 * listener (the same bytes, shareable by any cache; a blocking reload's answer depends only on the
 * path and `_HLS_msn`/`_HLS_part`). Token streams carry `?token=` on every URI (spliced into the
 * pre-rendered playlist with one allocation). Segments, parts and init sections of public streams are immutable (cached a year);
 * playlists live ≤ half a target duration (LL-HLS layers: no-cache). A multivariant playlist that
 * carries a freshly minted `sid` is `private` (a shared cache must not hand one session to many).
 * A blocking reload answered because the requested segment (part) exists is shareable for one
 * target duration (`public, max-age=<target>`): an edge keys it on the path and
 * `_HLS_msn`/`_HLS_part` and fetches it once for all its listeners (docs/behaviour.md §12); answered for
 * any other reason (the wait timed out, a held cap was hit) it is `no-store`, so no cache keeps a
 * playlist without the part under the query that asked for it. Every object of a token stream is
 * `private, no-store` (docs/behaviour.md §12): a shared cache keyed on the path must never hand a gated
 * stream to someone else.
 *
 * Listener sessions and token-gated playback go through an optional `HlsAccess` (the listeners
 * feature): it mints the session id on the multivariant fetch, checks listener tokens, and counts
 * the listener on each media request. Without it, HLS is public and untracked.
 *
 * Held requests (blocking reloads, part waits) cost a timer and memory each while held; an
 * optional `HoldGate` caps them per client address and in total (docs/listeners.md). Over a cap a
 * request that would be held is answered 503 with `Retry-After: 1` — a blocking reload too: the
 * playlist as it is would send the client straight back with the same request.
 */
import type { Answer, DeferredReply, HttpServer, RawReply, RawRequestInfo } from '../../base/http/server.js';
import { errorBody, headerBytes, REQUEST_ID_HEADER, STATUS_200, statusLine } from '../../base/http/server.js';
import { ApiError, type ErrorCode } from '../../base/errors/errors.js';
import type { Layer } from '../../live/media/layer.js';
import { fill, targetDurationSeconds } from './playlists.js';
import type { HlsLayerView, HlsSource } from './source.js';

const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Every object of a token stream (docs/behaviour.md §12). */
const PRIVATE = 'private, no-store';
const TS = 'video/mp2t';
const M4S = 'video/iso.segment';
const MP4 = 'video/mp4';
const M3U8 = 'application/vnd.apple.mpegurl';
type HeaderList = ReadonlyArray<readonly [Uint8Array, Uint8Array]>;
const objectHeaders = (type: string, cache: string): HeaderList => headerBytes([['Content-Type', type], ['Cache-Control', cache], ['Access-Control-Allow-Origin', '*']]);
/** Media object headers by `private` (token stream): [public, private]. */
const TS_HEADERS = [objectHeaders(TS, IMMUTABLE), objectHeaders(TS, PRIVATE)] as const;
const M4S_HEADERS = [objectHeaders(M4S, IMMUTABLE), objectHeaders(M4S, PRIVATE)] as const;

/**
 * The head of a public part's 200 answer as the native object store keeps it (./native-parts.ts,
 * docs/http.md "Media objects answered in native code"): the status line and the very headers
 * `mediaObject` writes for it, then `X-Request-ID: ` and `requestIdPrefix` (the store appends each
 * answer's counter, Date, Content-Length and the bytes).
 */
export function publicPartHead(requestIdPrefix: string): Uint8Array {
  return storedHead(M4S_HEADERS[0], requestIdPrefix);
}

/** A 200 answer's status line and `headers`, then `X-Request-ID: ` and `requestIdPrefix`, as the native front stores it. */
const storedHead = (headers: HeaderList, requestIdPrefix: string): Uint8Array => {
  const lines = headers.map(([k, v]) => `${Buffer.from(k).toString('latin1')}: ${Buffer.from(v).toString('latin1')}\r\n`).join('');
  return Buffer.from(`HTTP/1.1 200 OK\r\n${lines}${REQUEST_ID_HEADER}: ${requestIdPrefix}`, 'latin1');
};

/**
 * The heads of a public LL-HLS layer's blocking reload answers as the native front keeps them
 * (./native-reloads.ts, docs/http.md "Blocking reloads held in native code"), each the status
 * line and the very headers `mediaPlaylist` writes, then `X-Request-ID: ` and `requestIdPrefix`:
 * `reached` (what was asked for is listed: shareable for one target duration, `targetSeconds`),
 * `unreached` (the wait ran out: `no-store`) and `ended` (the layer's final playlist).
 */
export function publicReloadHeads(requestIdPrefix: string, targetSeconds: number): { reached: Uint8Array; unreached: Uint8Array; ended: Uint8Array } {
  return {
    reached: storedHead(blockingHit(targetSeconds), requestIdPrefix),
    unreached: storedHead(PLAYLIST_UNREACHED, requestIdPrefix),
    ended: storedHead(playlistHeaders(true, targetSeconds, true), requestIdPrefix),
  };
}
const INIT_HEADERS = [objectHeaders(MP4, IMMUTABLE), objectHeaders(MP4, PRIVATE)] as const;
const PLAYLIST_PRIVATE = objectHeaders(M3U8, PRIVATE);
/** A blocking reload answered without what it asked for (the wait timed out): never cached under its blocking query. */
const PLAYLIST_UNREACHED = objectHeaders(M3U8, 'no-store');
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache'], ['Access-Control-Allow-Origin', '*']] as const;

/**
 * An access decision: go on with `query` (ASCII, no `?`; '' for none) after every URI handed out
 * — `private` for a token stream (answered `Cache-Control: private, no-store`) — or refuse.
 */
export type HlsDecision = { ok: true; query: string; private: boolean } | { ok: false; status: 401 | 403 | 404 | 503; code: ErrorCode; message: string };

/** What decides who may play and who is counted (implemented by src/delivery/listeners/hls-access.ts). */
export interface HlsAccess {
  /** Multivariant fetch: checks the token; mints a session id for the variant URIs. */
  enter(streamId: string, query: string): HlsDecision;
  /**
   * A media playlist request: checks the token and joins or touches the session named by the
   * query (`sid`, or the token's subject). `timeoutMs`: inactivity after which the listener leaves
   * (3 target durations). The query of a public stream's decision is not used (its media
   * playlist is the same for every listener). `mode`: the request is of a catch-up playlist
   * (docs/behaviour.md §17): a new session is recorded with `mode: "catch_up"`.
   */
  media(streamId: string, query: string, info: RawRequestInfo, timeoutMs: number, mode?: 'catch_up'): HlsDecision;
  /**
   * A media object request (segment, part, init): a token stream's token is checked; nothing is
   * tracked (public objects carry no per-listener query, docs/behaviour.md §12).
   */
  object(streamId: string, query: string): HlsDecision;
}

/**
 * Admits requests the server holds open (blocking playlist reloads, part waits) under caps per
 * client address and in total (implemented by src/delivery/listeners/held.ts).
 */
export interface HoldGate {
  /**
   * One more held request from the client of `info` (read synchronously, during the handler): the
   * key to `release` it with (exactly once), or null when a cap is reached (the hit is counted and
   * logged by the gate).
   */
  acquire(info: RawRequestInfo): string | null;
  release(key: string): void;
}

/** What `registerHlsRoutes` may be given besides the media. */
export interface HlsRouteOptions {
  /** Gates and counts listeners; without it HLS is public and untracked. */
  access?: HlsAccess | undefined;
  /** Caps held requests; without it every blocking request is held. */
  hold?: HoldGate | undefined;
  /** Counts the requests these routes answered (tests and diagnostics: which thread served). */
  served?: { hls: number } | undefined;
}

/** Headers by Cache-Control value, built once each (a handful of values per node). */
const HEADERS_BY_CACHE = new Map<string, HeaderList>();
const m3u8Headers = (cache: string): HeaderList => {
  let h = HEADERS_BY_CACHE.get(cache);
  if (!h) HEADERS_BY_CACHE.set(cache, (h = objectHeaders(M3U8, cache)));
  return h;
};
/** Header lists by a small integer key, so the hot path builds no string: see the users below. */
const byKey = (make: (k: number) => HeaderList) => {
  const m = new Map<number, HeaderList>();
  return (k: number): HeaderList => {
    let h = m.get(k);
    if (!h) m.set(k, (h = make(k)));
    return h;
  };
};
/** Headers of a blocking reload answered with the part it asked for: shareable for one target duration (s). */
const blockingHit = byKey((targetSeconds) => m3u8Headers(`public, max-age=${targetSeconds}`));
/** Multivariant headers when the body carries a minted session id (max-age s): never in a shared cache. */
const multivariantSession = byKey((maxAge) => m3u8Headers(maxAge > 0 ? `private, max-age=${maxAge}` : 'private, no-cache'));
/** Playlist headers by key: -1 ended (cached a minute), -2 LL-HLS (not cached), else half a target duration (s). */
const playlistHeadersByKey = byKey((k) => m3u8Headers(k === -1 ? 'public, max-age=60' : k === -2 || k === 0 ? 'no-cache' : `public, max-age=${k}`));
/** A playlist's headers: ended ones are cached a minute, LL-HLS ones not at all, classic ones half a target duration. */
const playlistHeaders = (ended: boolean, targetSeconds: number, lowLatency: boolean): HeaderList => playlistHeadersByKey(ended ? -1 : lowLatency ? -2 : Math.floor(targetSeconds / 2));

/** A non-negative integer of 1–15 digits, else NaN. */
const integer = (s: string): number => (s.length > 0 && s.length <= 15 && /^\d+$/.test(s) ? Number(s) : NaN);

/** The delivery directives of a media playlist request (rfc8216bis §6.2.5): raw values, null when absent. */
interface Directives {
  msn: string | null;
  part: string | null;
  skip: string | null;
}
const NO_DIRECTIVES: Directives = Object.freeze({ msn: null, part: null, skip: null });
const DIRECTIVE_KEYS: Record<string, keyof Directives> = { _hls_msn: 'msn', _hls_part: 'part', _hls_skip: 'skip' };
const DIRECTIVE_NAMES: Record<keyof Directives, string> = { msn: '_HLS_msn', part: '_HLS_part', skip: '_HLS_skip' };

/**
 * `_HLS_msn`, `_HLS_part` and `_HLS_skip` of a query string (no `?`; values raw, not decoded), read
 * as a caching edge keys on them — nginx's `$arg_<name>` matches the name in any case and takes the
 * first — so that no edge can store an answer under a key other than the one the origin read: a
 * name repeated, spelled in another case, or without `=`, is the error message returned (string).
 */
function directives(query: string): Directives | string {
  if (!/_hls_/i.test(query)) return NO_DIRECTIVES;
  const out: Directives = { msn: null, part: null, skip: null };
  for (const piece of query.split('&')) {
    const eq = piece.indexOf('=');
    const name = eq < 0 ? piece : piece.slice(0, eq);
    if (name.length < 8 || name.length > 9) continue;
    const key = DIRECTIVE_KEYS[name.toLowerCase()];
    if (key === undefined) continue;
    const canonical = DIRECTIVE_NAMES[key];
    if (name !== canonical) return `Delivery directive '${name}' must be spelled '${canonical}'.`;
    if (eq < 0) return `${canonical} needs a value.`;
    if (out[key] !== null) return `${canonical} may appear only once.`;
    out[key] = piece.slice(eq + 1);
  }
  return out;
}

/** A listener of `layer` leaves after this long without a media playlist request (ms): 3 target durations (docs/behaviour.md §4). */
export const listenerTimeoutMs = (layer: Layer): number => 3 * targetDurationSeconds(layer) * 1000;

/** Media object file names: `<seq>.m4s|.ts`, `<seq>.<part>.m4s`, `init-<id>.mp4` (`Layer.initId`). */
const FILE = /^(?:(\d{1,15})(?:\.(\d{1,4}))?\.(m4s|ts)|init-([0-9a-f]{16})\.mp4)$/;

/** What the HLS handlers share: bound once by `registerHlsRoutes` (see the module comment for `access` and `hold`). */
interface HlsRoutes {
  source: HlsSource;
  access: HlsAccess | undefined;
  hold: HoldGate | undefined;
  served: { hls: number };
}

/** A `raw()` route handler (src/base/http/server.ts). */
type RawHandler = (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply | DeferredReply;

/** Registers the HLS routes on `http`, serving the streams of `source` (see the module comment for `access` and `hold`). */
export function registerHlsRoutes(http: HttpServer, source: HlsSource, opts: HlsRouteOptions = {}): void {
  const h: HlsRoutes = { source, access: opts.access, hold: opts.hold, served: opts.served ?? { hls: 0 } };
  const multivariant: RawHandler = (params, query, requestId) => multivariantPlaylist(h, params, query, requestId);
  const media: RawHandler = (params, query, requestId, info) => mediaPlaylist(h, params, query, requestId, info);
  const object: RawHandler = (params, query, requestId, info) => mediaObject(h, params, query, requestId, info);
  for (const method of ['get', 'head'] as const) {
    http.raw(method, '/hls/:id/index.m3u8', multivariant);
    http.raw(method, '/hls/:id/:layer/index.m3u8', media);
    http.raw(method, '/hls/:id/:layer/:file', object);
  }
}

/** The error envelope of `code` (its status from src/base/errors/codes.ts, or `status` where the table allows it). */
function refuse(code: ErrorCode, message: string, requestId: string, opts: { status?: number; retryAfter?: string } = {}): RawReply {
  const err = new ApiError(code, message, { status: opts.status });
  return {
    status: statusLine(err.status),
    headers: err.status === 401 ? [...JSON_HEADERS, ['WWW-Authenticate', 'Bearer realm="listener"']] : opts.retryAfter ? [...JSON_HEADERS, ['Retry-After', opts.retryAfter]] : JSON_HEADERS,
    body: Buffer.from(JSON.stringify(errorBody(err, requestId))),
  };
}
const notFound = (what: string, requestId: string) => refuse('resource_missing', what, requestId);
/** 503 + `Retry-After: 1`: a request that would be held, over the held caps. */
const busy = (requestId: string) => refuse('too_many_held_requests', 'Too many requests held open; retry in a second.', requestId, { retryAfter: '1' });

/** Token check and listener accounting for a media request: the refusal, or the query and privacy to answer with. */
function admit(h: HlsRoutes, id: string, query: string, info: RawRequestInfo, layer: HlsLayerView, requestId: string): RawReply | { query: string; private: boolean } {
  if (!h.access) return PUBLIC_ADMIT;
  const d = h.access.media(id, query, info, 3 * layer.targetSeconds * 1000);
  return d.ok ? d : refuse(d.code, d.message, requestId, { status: d.status });
}

/** The media playlist of the current version (`skip`: its delta update, when the layer has one). */
const template = (layer: HlsLayerView, skip: boolean) => (skip && !layer.ended && layer.deltaPlaylist()) || layer.playlist();

/** The media playlist as it is now, for `admitted`: the shared bytes, or a token stream's own copy. */
const playlist = (layer: HlsLayerView, admitted: { query: string; private: boolean }, skip: boolean): RawReply =>
  admitted.private
    ? { status: STATUS_200, headers: PLAYLIST_PRIVATE, body: fill(template(layer, skip), admitted.query) }
    : { status: STATUS_200, headers: playlistHeaders(layer.ended, layer.targetSeconds, layer.lowLatency), body: template(layer, skip).plain };

/**
 * Answers with `reply` once `layer.has(msn, part)` (`reload`: `layer.reached(msn, part)`, a
 * blocking playlist reload) — or the layer ends, or the wait times out: at once when it already
 * holds; held (deferred reply) when the gate admits it; else `over()`. The held slot is given
 * back exactly once: on the answer, the client's abort or the timeout.
 */
function when(h: HlsRoutes, layer: HlsLayerView, msn: number, part: number | undefined, info: RawRequestInfo, reply: () => RawReply, over: () => RawReply, reload = false): RawReply | DeferredReply {
  if (layer.ended || (reload ? layer.reached(msn, part) : layer.has(msn, part))) return reply();
  const key = h.hold ? h.hold.acquire(info) : '';
  if (key === null) return over();
  return new Held(layer, msn, part, reload, h.hold, key, reply);
}

/** `/hls/:id/index.m3u8`: the multivariant playlist (variant URIs carry the listener's `?sid=` or `?token=`). */
function multivariantPlaylist(h: HlsRoutes, [id]: string[], query: string, requestId: string): RawReply {
  h.served.hls++;
  const s = h.source.get(id!);
  const t = s?.multivariant();
  if (!s || !t) return notFound(`No live HLS for stream '${id}'.`, requestId);
  if (!h.access) return { status: STATUS_200, headers: playlistHeaders(s.ended, s.topTargetSeconds, false), body: t.plain };
  const d = h.access.enter(id!, query);
  if (!d.ok) return refuse(d.code, d.message, requestId, { status: d.status });
  const headers = d.private ? PLAYLIST_PRIVATE : d.query === '' ? playlistHeaders(s.ended, s.topTargetSeconds, false) : multivariantSession(Math.floor(s.topTargetSeconds / 2));
  return { status: STATUS_200, headers, body: fill(t, d.query) };
}

/** `/hls/:id/:layer/index.m3u8`: a layer's media playlist, its delta update (`_HLS_skip`), or a blocking reload (`_HLS_msn`, `_HLS_part`). */
function mediaPlaylist(h: HlsRoutes, [id, name]: string[], query: string, requestId: string, info: RawRequestInfo): RawReply | DeferredReply {
  h.served.hls++;
  const s = h.source.get(id!);
  const layer = s?.layer(name!);
  if (!s || !layer || layer.failed || !s.playable) return notFound(`No such HLS layer '${name}' for stream '${id}'.`, requestId);
  const d = directives(query);
  if (typeof d === 'string') return refuse('parameter_invalid', d, requestId);
  if (d.part !== null && d.msn === null) return refuse('parameter_invalid', '_HLS_part needs _HLS_msn (rfc8216bis §6.2.5.2).', requestId);
  if (d.skip !== null && d.skip !== 'YES' && d.skip !== 'v2') return refuse('parameter_invalid', '_HLS_skip must be YES or v2.', requestId);
  // Delta updates are offered by live LL-HLS layers (CAN-SKIP-UNTIL); elsewhere `_HLS_skip` is ignored (§6.2.5.1).
  const skip = d.skip !== null && layer.lowLatency && !layer.ended;
  if (skip && d.skip === 'v2') return refuse('parameter_invalid', 'Date ranges are not skipped here (no CAN-SKIP-DATERANGES): use _HLS_skip=YES.', requestId);
  // The session and token checks read `sid` and `token` only: the delivery directives stay in the query.
  const admitted = admit(h, id!, query, info, layer, requestId);
  if ('status' in admitted) return admitted;
  if (d.msn === null) {
    if (layer.ready) return playlist(layer, admitted, skip);
    // A ladder layer whose codec process has not cut its first segment (part) yet: wait for it.
    const render = () => (layer.ready ? playlist(layer, admitted, skip) : notFound(`HLS layer '${name}' of stream '${id}' has no segment yet.`, requestId));
    return when(h, layer, layer.nextSequence, layer.lowLatency ? 0 : undefined, info, render, () => busy(requestId));
  }
  if (!layer.lowLatency) return refuse('parameter_invalid', 'This layer does not support blocking playlist reload.', requestId);
  const msn = integer(d.msn);
  const part = d.part === null ? undefined : integer(d.part);
  if (Number.isNaN(msn) || Number.isNaN(part ?? 0)) return refuse('parameter_invalid', '_HLS_msn and _HLS_part must be integers.', requestId);
  // §6.2.5.2: more than two segments past the last segment listed (nextSequence − 1) is refused;
  // an ended layer ignores the directives (it answers its final playlist).
  if (!layer.ended && msn > layer.nextSequence + 1) return refuse('parameter_invalid', `_HLS_msn ${msn} is more than two segments past the last segment of the playlist.`, requestId);
  /** The answer to the blocking reload: shareable when it lists what was asked for (docs/behaviour.md §12), else `no-store`. */
  const answer = (): RawReply => {
    if (admitted.private || layer.ended || !layer.ready) {
      return layer.ready ? playlist(layer, admitted, skip) : notFound(`HLS layer '${name}' of stream '${id}' has no segment yet.`, requestId);
    }
    return { status: STATUS_200, headers: layer.reached(msn, part) ? blockingHit(layer.targetSeconds) : PLAYLIST_UNREACHED, body: template(layer, skip).plain };
  };
  // Over the held caps: 503 + Retry-After, never the playlist as it is (the client would ask again at once).
  return when(h, layer, msn, part, info, answer, () => busy(requestId), true);
}

/** `/hls/:id/:layer/:file`: a segment, a part (the one a preload hint names is waited for) or an init section. */
function mediaObject(h: HlsRoutes, [id, name, file]: string[], query: string, requestId: string, info: RawRequestInfo): RawReply | DeferredReply {
  h.served.hls++;
  const s = h.source.get(id!);
  const layer = s?.layer(name!);
  const m = FILE.exec(file!);
  if (!s || !layer || !m) return notFound(`No such file '${name}/${file}' for stream '${id}'.`, requestId);
  let p: 0 | 1 = 0;
  if (h.access) {
    const d = h.access.object(id!, query);
    if (!d.ok) return refuse(d.code, d.message, requestId, { status: d.status });
    if (d.private) p = 1;
  }
  if (m[4] !== undefined) {
    const init = layer.init;
    if (!init || m[4] !== layer.initId) return notFound(`No such init section '${name}/${file}'.`, requestId);
    return { status: STATUS_200, headers: INIT_HEADERS[p], body: init };
  }
  const seq = Number(m[1]);
  const ext = m[3]!;
  if ((ext === 'ts') !== (layer.container === 'ts')) return notFound(`No such file '${name}/${file}'.`, requestId);
  const headers = ext === 'ts' ? TS_HEADERS[p] : M4S_HEADERS[p];
  if (m[2] === undefined) {
    const seg = layer.segment(seq);
    return seg ? { status: STATUS_200, headers, body: seg } : notFound(`No such segment '${name}/${file}' for stream '${id}'.`, requestId);
  }
  const index = Number(m[2]);
  const serve = (): RawReply => {
    const part = layer.part(seq, index);
    return part ? { status: STATUS_200, headers, body: part } : notFound(`No such part '${name}/${file}' for stream '${id}'.`, requestId);
  };
  // The part a preload hint names (the next one) is answered as soon as it exists.
  if (!layer.has(seq, index) && !layer.ended && seq === layer.nextSequence && index <= layer.openParts) return when(h, layer, seq, index, info, serve, () => busy(requestId));
  return serve();
}

/**
 * A held request (blocking reload, part wait): one object for its whole wait — the deferred reply,
 * the layer's waiter callback and the held slot — answered with `reply()` when the layer has what
 * it waits for (or ends, or the wait times out), or let go when the client leaves.
 */
class Held implements DeferredReply {
  private to: Answer | null = null;
  private cancelWait: (() => void) | null = null;
  private released = false;

  constructor(
    private readonly layer: HlsLayerView,
    private readonly msn: number,
    private readonly part: number | undefined,
    /** A blocking playlist reload (waits for `reached`, else for `has`). */
    private readonly reload: boolean,
    private readonly hold: HoldGate | undefined,
    private readonly key: string,
    private readonly reply: () => RawReply,
  ) {}

  defer(to: Answer): void {
    this.to = to;
    this.cancelWait = this.layer.waitFor(this.msn, this.part, this.ready, this.reload);
  }

  cancel(): void {
    this.release();
    this.cancelWait?.();
  }

  /** The layer has it (or ended, or the wait timed out). */
  private readonly ready = (): void => {
    this.release();
    this.to?.answer(this.reply);
  };

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.hold?.release(this.key);
  }
}

/** What an untracked public request is answered with (no access check configured). */
const PUBLIC_ADMIT = Object.freeze({ query: '', private: false });
