/**
 * Catch-up addresses (docs/behaviour.md "Catch-up radio", docs/http.md "Catch-up"), each a
 * multivariant playlist over the stream's layers with one media playlist per layer beside it:
 * - `/hls/<id>/rewind.m3u8` → `rewind/<layer>.m3u8`: the whole window (sliding), with
 *   `CAN-SKIP-UNTIL` and its delta update for `_HLS_skip=YES` (rfc8216bis §6.2.5.1);
 * - `/hls/<id>/from/<t>.m3u8` → `from/<t>/<layer>.m3u8`: from instant `t` on, an `EVENT` playlist;
 * - `/hls/<id>/archive/<t>-<seconds>.m3u8` → `archive/<t>-<seconds>/<layer>.m3u8`: that span, `VOD`
 *   with `EXT-X-ENDLIST`, across broadcasts;
 * - `/hls/<id>/broadcasts/<brd>.m3u8` → `broadcasts/<brd>/<layer>.m3u8`: one broadcast, `EVENT`
 *   while it runs, `VOD` once it ended;
 * - `/hls/<id>/catchup/<layer>/<seq>.<m4s|ts>`, `init-<id>.mp4`: the kept objects (from the live
 *   layer's memory while it still holds them, else from disk).
 * `t` is Unix seconds or ISO 8601 UTC (`2026-11-29T06:00:00Z`). A time before the window or after
 * now is 404, a malformed one 400; a stream without catch-up is 404. Token streams need the
 * listener token on every request (the same check as live HLS: `HlsAccess`) and every answer is
 * `private, no-store`; on public streams, archive playlists (once their span is in the past),
 * ended broadcasts' playlists and every object are `public, max-age=31536000, immutable`.
 * Media playlist requests count the listener like live HLS (`HlsAccess.media`).
 */
import type { DeferredReply, HttpServer, RawReply, RawRequestInfo } from '../../base/http/server.js';
import { errorBody, headerBytes, statusLine, STATUS_200 } from '../../base/http/server.js';
import { ApiError, type ErrorCode } from '../../base/errors/errors.js';
import type { CatchUpRepo, CatchUpSegmentRow } from '../../base/db/catch-up-repo.js';
import type { HlsAccess } from '../hls/routes.js';
import type { HlsSource } from '../hls/source.js';
import type { CatchUpArchive } from './archive.js';
import { catchUpMediaPlaylist, catchUpMultivariant, discontinuityBefore, mediaHead, segmentRuns, targetSecondsOf, type CatchUpVariant } from './playlists.js';

/** What the catch-up routes read. */
export interface CatchUpRoutesDeps {
  repo: CatchUpRepo;
  archive: CatchUpArchive;
  /** The live hubs (objects still in memory are served from there). */
  source: HlsSource;
  /** Token checks and listener counting (as live HLS); absent: public and untracked. */
  access?: HlsAccess | undefined;
  /** The stream's running broadcast id, or null. */
  openBroadcast(streamId: string): string | null;
  /** The stream's ingest codec ('aac', 'opus', 'mp3'), or null for an unknown stream. */
  codecOf(streamId: string): string | null;
  /** The configured segment target duration (ms). */
  targetDurationMs: number;
  now: () => number;
}


const IMMUTABLE = 'public, max-age=31536000, immutable';
const PRIVATE = 'private, no-store';
const M3U8 = 'application/vnd.apple.mpegurl';
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache'], ['Access-Control-Allow-Origin', '*']] as const;
const headersOf = (type: string, cache: string) => headerBytes([['Content-Type', type], ['Cache-Control', cache], ['Access-Control-Allow-Origin', '*']]);
const HEADERS = new Map<string, ReturnType<typeof headersOf>>();
const headers = (type: string, cache: string) => {
  const k = `${type}\n${cache}`;
  let h = HEADERS.get(k);
  if (!h) HEADERS.set(k, (h = headersOf(type, cache)));
  return h;
};
const TYPES: Record<string, string> = { m4s: 'video/iso.segment', ts: 'video/mp2t', mp4: 'video/mp4' };
/** Codecs of a layer by the stream's ingest codec (RFC 6381). */
const CODECS: Record<string, string> = { aac: 'mp4a.40.2', opus: 'opus', mp3: 'mp4a.40.34' };
/** Kept object names: `<seq>.m4s|.ts`, `init-<16 hex>.mp4`. */
const OBJECT = /^(?:(\d{1,15})\.(m4s|ts)|init-([0-9a-f]{16})\.mp4)$/;
const LAYER = /^a\d{1,4}$/;
const STREAM = /^stm_[A-Za-z0-9]{1,64}$/;
const BROADCAST = /^brd_[A-Za-z0-9]{1,64}$/;
/** Playlists rendered and kept (by what they list), across every stream: at most this many… */
const RENDER_CACHE = 256;
/** Runs of segment lines kept at most (a week of two layers' 2 s segments is ~20,000 runs). */
const RUN_CACHE = 50_000;
/** …and at most this many characters in all (a week-long window's playlist is ~27 M): older ones go first. */
const RENDER_CACHE_CHARS = 64 * 1024 * 1024;

/**
 * Rendered playlists by key, oldest first out, bounded in count and in characters (a stranger
 * asking for many long spans must not make the node hold them all); a text longer than half the
 * bound is answered and not kept.
 */
export class RenderCache<T extends { length: number } = string> {
  private readonly texts = new Map<string, T>();
  private chars = 0;

  constructor(private readonly maxEntries = RENDER_CACHE, private readonly maxChars = RENDER_CACHE_CHARS) {}

  /** The text of `key`, rendered by `render` when not kept. */
  get(key: string, render: () => T): T {
    const kept = this.texts.get(key);
    if (kept !== undefined) return kept;
    const text = render();
    if (text.length > this.maxChars / 2) return text;
    this.texts.set(key, text);
    this.chars += text.length;
    while (this.texts.size > this.maxEntries || this.chars > this.maxChars) {
      const [k, v] = this.texts.entries().next().value!;
      this.texts.delete(k);
      this.chars -= v.length;
    }
    return text;
  }

  /** Characters kept now. */
  get size(): number {
    return this.chars;
  }
}

/** A refusal: the API's error envelope. */
function refuse(code: ErrorCode, message: string, requestId: string, status?: number): RawReply {
  const err = new ApiError(code, message, { status });
  return {
    status: statusLine(err.status),
    headers: err.status === 401 ? [...JSON_HEADERS, ['WWW-Authenticate', 'Bearer realm="listener"']] : JSON_HEADERS,
    body: Buffer.from(JSON.stringify(errorBody(err, requestId))),
  };
}
const notFound = (what: string, requestId: string) => refuse('resource_missing', what, requestId);
const malformed = (what: string, requestId: string) => refuse('parameter_invalid', what, requestId);

/**
 * An instant of a catch-up address (ms): Unix seconds (1–12 digits) or ISO 8601 UTC
 * (`YYYY-MM-DDTHH:MM:SS[.fff]Z`, percent-encoded or not); NaN when malformed.
 */
export function parseInstant(raw: string): number {
  let s = raw;
  if (s.includes('%')) {
    try {
      s = decodeURIComponent(s);
    } catch {
      return NaN;
    }
  }
  if (/^\d{1,12}$/.test(s)) return Number(s) * 1000;
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/.test(s)) return NaN;
  const ms = Date.parse(s);
  return Number.isFinite(ms) ? ms : NaN;
}

/** What a request of an address was admitted with: the query after URIs and whether it is private (token stream). */
interface Admitted {
  query: string;
  private: boolean;
}

/** The catch-up routes' shared state. */
class CatchUp {
  private readonly rendered = new RenderCache<Buffer>();
  /** Runs of segment lines of the rewind windows, rendered once (`segmentRuns`); bounded like the playlists. */
  readonly runs = new RenderCache<Buffer>(RUN_CACHE, RENDER_CACHE_CHARS);

  constructor(readonly d: CatchUpRoutesDeps) {}

  /** The stream's window start (ms) and its hours, or null when catch-up is off. */
  window(id: string): { start: number; hours: number } | null {
    const hours = this.d.repo.hours(id);
    return hours > 0 ? { start: this.d.now() - hours * 3_600_000, hours } : null;
  }

  variants(id: string): CatchUpVariant[] {
    const codecs = CODECS[this.d.codecOf(id) ?? ''] ?? 'mp4a.40.2';
    const layers = this.d.archive.layers(id).sort((a, b) => Number(b.slice(1)) - Number(a.slice(1)));
    return layers.map((layer) => ({ layer, bandwidth: Math.round(Number(layer.slice(1)) * 1100), codecs }));
  }

  /** A playlist rendered once per key (what it lists), kept while the render cache holds it. */
  cached(key: string, render: () => Buffer): Buffer {
    return this.rendered.get(key, render);
  }

  /** Multivariant fetch: token check (and a session id for public streams). */
  enter(id: string, query: string, requestId: string): Admitted | RawReply {
    if (!this.d.access) return { query: '', private: false };
    const d = this.d.access.enter(id, query);
    return d.ok ? d : refuse(d.code, d.message, requestId, d.status);
  }

  /** Media playlist fetch: token check; the listener is counted (timeout 3 target durations). */
  media(id: string, query: string, info: RawRequestInfo, requestId: string): Admitted | RawReply {
    if (!this.d.access) return { query: '', private: false };
    const d = this.d.access.media(id, query, info, 3 * Math.round(this.d.targetDurationMs / 1000) * 1000, 'catch_up');
    return d.ok ? d : refuse(d.code, d.message, requestId, d.status);
  }

  /** Object fetch: token check only. */
  object(id: string, query: string, requestId: string): Admitted | RawReply {
    if (!this.d.access) return { query: '', private: false };
    const d = this.d.access.object(id, query);
    return d.ok ? d : refuse(d.code, d.message, requestId, d.status);
  }
}

/** A playlist answer: `private` ones are `private, no-store`, else `cache`. */
function m3u8(text: string | Buffer, a: Admitted, cache: string): RawReply {
  return { status: STATUS_200, headers: headers(M3U8, a.private ? PRIVATE : cache), body: typeof text === 'string' ? Buffer.from(text) : text };
}

/** `<name>.m3u8` → name, or null. */
const stem = (file: string): string | null => (file.endsWith('.m3u8') ? file.slice(0, -5) : null);

type Handler = (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply | DeferredReply;

/** Registers the catch-up routes on `http` (the main thread: they read SQLite and the disk). */
export function registerCatchUpRoutes(http: HttpServer, d: CatchUpRoutesDeps): void {
  const c = new CatchUp(d);
  const routes: Array<[string, Handler]> = [
    ['/hls/:id/rewind.m3u8', ([id], q, r) => multivariant(c, id!, 'rewind/', q, r, () => rewindCheck(c, id!, r))],
    ['/hls/:id/rewind/:file', ([id, file], q, r, info) => rewindMedia(c, id!, file!, q, r, info)],
    ['/hls/:id/from/:file', ([id, file], q, r) => addressMultivariant(c, 'from', id!, file!, q, r)],
    ['/hls/:id/from/:t/:file', ([id, t, file], q, r, info) => spanMedia(c, 'from', id!, t!, file!, q, r, info)],
    ['/hls/:id/archive/:file', ([id, file], q, r) => addressMultivariant(c, 'archive', id!, file!, q, r)],
    ['/hls/:id/archive/:span/:file', ([id, span, file], q, r, info) => spanMedia(c, 'archive', id!, span!, file!, q, r, info)],
    ['/hls/:id/broadcasts/:file', ([id, file], q, r) => addressMultivariant(c, 'broadcasts', id!, file!, q, r)],
    ['/hls/:id/broadcasts/:brd/:file', ([id, brd, file], q, r, info) => spanMedia(c, 'broadcasts', id!, brd!, file!, q, r, info)],
    ['/hls/:id/catchup/:layer/:file', ([id, layer, file], q, r) => keptObject(c, id!, layer!, file!, q, r)],
  ];
  for (const method of ['get', 'head'] as const) for (const [pattern, handler] of routes) http.raw(method, pattern, handler);
}

/** A multivariant answer once `check` passes (null) for the stream. */
function multivariant(c: CatchUp, id: string, folder: string, query: string, requestId: string, check: () => RawReply | null): RawReply {
  if (!STREAM.test(id) || !c.window(id)) return notFound(`No catch-up for stream '${id}'.`, requestId);
  const refused = check();
  if (refused) return refused;
  const a = c.enter(id, query, requestId);
  if ('status' in a) return a;
  const variants = c.variants(id);
  if (variants.length === 0) return notFound(`No catch-up kept for stream '${id}'.`, requestId);
  return m3u8(catchUpMultivariant(variants, folder, a.query), a, a.query.startsWith('sid=') ? 'private, no-cache' : 'no-cache');
}

/** The rewind window holds something. */
function rewindCheck(c: CatchUp, id: string, requestId: string): RawReply | null {
  const w = c.window(id)!;
  const top = c.variants(id)[0];
  return top && c.d.archive.layer(id, top.layer)?.firstFrom(w.start) ? null : notFound(`No catch-up kept in the window of stream '${id}'.`, requestId);
}

/** `/hls/:id/from/<t>.m3u8`, `/archive/<t>-<s>.m3u8`, `/broadcasts/<brd>.m3u8`. */
function addressMultivariant(c: CatchUp, kind: 'from' | 'archive' | 'broadcasts', id: string, file: string, query: string, requestId: string): RawReply {
  const name = stem(file);
  if (name === null) return notFound(`No such catch-up address '${kind}/${file}'.`, requestId);
  if (!STREAM.test(id) || !c.window(id)) return notFound(`No catch-up for stream '${id}'.`, requestId);
  const top = c.variants(id)[0];
  if (!top) return notFound(`No catch-up kept for stream '${id}'.`, requestId);
  const rows = spanRows(c, kind, id, name, top.layer, requestId);
  if (!Array.isArray(rows)) return rows;
  const entered = c.enter(id, query, requestId);
  if ('status' in entered) return entered;
  // A settled archive span of a public stream is one immutable answer for everyone (edges keep it):
  // its variant URIs carry no session id (its listeners are counted by the edges' logs, §12).
  const immutable = kind === 'archive' && !entered.private && settled(c, name);
  const a = immutable ? { query: '', private: false } : entered;
  const cache = immutable ? IMMUTABLE : a.query.startsWith('sid=') ? 'private, no-cache' : 'no-cache';
  // `./`: a name with a colon (ISO 8601) must not read as a URI scheme (RFC 3986 §4.2).
  return m3u8(catchUpMultivariant(c.variants(id), `./${name}/`, a.query), a, cache);
}

/**
 * The rows of an address's layer: `from` (t on), `archive` (t-seconds), `broadcasts` (brd); a
 * refusal when the address is malformed (400), outside the window or empty (404).
 */
function spanRows(c: CatchUp, kind: 'from' | 'archive' | 'broadcasts', id: string, name: string, layer: string, requestId: string): CatchUpSegmentRow[] | RawReply {
  const w = c.window(id)!;
  const now = c.d.now();
  const index = c.d.archive.layer(id, layer);
  if (kind === 'broadcasts') {
    if (!BROADCAST.test(name)) return malformed(`'${name}' is not a broadcast id (brd_…).`, requestId);
    const rows = (index?.ofBroadcast(name) ?? []).filter((r) => r.start_ms >= w.start);
    return rows.length > 0 ? rows : notFound(`No catch-up kept of broadcast '${name}' of stream '${id}'.`, requestId);
  }
  let t: number;
  let end: number;
  if (kind === 'from') {
    t = parseInstant(name);
    if (Number.isNaN(t)) return malformed(`'${name}' is not a time: Unix seconds or ISO 8601 UTC (2026-11-29T06:00:00Z).`, requestId);
    end = now;
  } else {
    const dash = name.lastIndexOf('-');
    const secs = dash > 0 && /^\d{1,7}$/.test(name.slice(dash + 1)) ? Number(name.slice(dash + 1)) : NaN;
    t = dash > 0 ? parseInstant(name.slice(0, dash)) : NaN;
    if (Number.isNaN(t) || !(secs > 0)) return malformed(`'${name}' is not <t>-<seconds>: t in Unix seconds or ISO 8601 UTC, seconds a positive integer.`, requestId);
    end = t + secs * 1000;
    if (end > now) return notFound(`The span '${name}' ends after now.`, requestId);
  }
  if (t < w.start) return notFound(`${new Date(t).toISOString()} is before the catch-up window of stream '${id}' (${w.hours} h).`, requestId);
  if (t > now) return notFound(`${new Date(t).toISOString()} is after now.`, requestId);
  const rows = index ? index.span(t, kind === 'from' ? Number.MAX_SAFE_INTEGER : end) : [];
  // An hour is deleted whole: what it holds from before the window is not listed.
  while (rows.length > 0 && rows[0]!.start_ms + rows[0]!.duration_ms <= w.start) rows.shift();
  // The segment playing at t began before the window: it is listed only while kept.
  return rows.length > 0 ? rows : notFound(`Nothing of stream '${id}' is kept from ${new Date(t).toISOString()}.`, requestId);
}

/** `/hls/:id/{from,archive,broadcasts}/<name>/<layer>.m3u8`. */
function spanMedia(c: CatchUp, kind: 'from' | 'archive' | 'broadcasts', id: string, name: string, file: string, query: string, requestId: string, info: RawRequestInfo): RawReply {
  const layer = stem(file);
  if (layer === null || !LAYER.test(layer)) return notFound(`No such catch-up playlist '${kind}/${name}/${file}'.`, requestId);
  if (!STREAM.test(id) || !c.window(id)) return notFound(`No catch-up for stream '${id}'.`, requestId);
  const rows = spanRows(c, kind, id, name, layer, requestId);
  if (!Array.isArray(rows)) return rows;
  const a = c.media(id, query, info, requestId);
  if ('status' in a) return a;
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  const live = kind === 'from' || (kind === 'broadcasts' && c.d.openBroadcast(id) === name);
  const key = `${kind}/${id}/${layer}/${name}/${first.sequence}/${last.sequence}/${rows.length}/${live}/${a.query}`;
  const text = c.cached(key, () => {
    const titles = c.d.repo.titles(id, first.start_ms, last.start_ms + last.duration_ms);
    return Buffer.from(catchUpMediaPlaylist({
      rows,
      mediaSequence: first.sequence,
      discontinuitySequence: discontinuityBefore(first),
      skipped: 0,
      type: live ? 'EVENT' : 'VOD',
      ended: !live,
      targetSeconds: targetSecondsOf(rows, c.d.targetDurationMs),
      skipUntilSeconds: 0,
      gapTags: true,
      prefix: `../../catchup/${layer}/`,
      query: a.query.startsWith('token=') ? a.query : '',
      titles,
    }));
  });
  return m3u8(text, a, live ? 'no-cache' : kind === 'archive' && settled(c, name) ? IMMUTABLE : 'public, max-age=60');
}

/**
 * Whether an archive span `<t>-<s>` ended long enough ago that every segment of it is kept
 * (written and indexed: two target durations): its playlist never changes any more.
 */
function settled(c: CatchUp, name: string): boolean {
  const dash = name.lastIndexOf('-');
  const end = parseInstant(name.slice(0, dash)) + Number(name.slice(dash + 1)) * 1000;
  return end + 2 * c.d.targetDurationMs <= c.d.now();
}

/**
 * `/hls/:id/rewind/<layer>.m3u8`: the window, or with `_HLS_skip=YES` its delta update (the
 * segments that start more than the skip boundary before the newest's end replaced by `EXT-X-SKIP`).
 */
function rewindMedia(c: CatchUp, id: string, file: string, query: string, requestId: string, info: RawRequestInfo): RawReply {
  const layer = stem(file);
  if (layer === null || !LAYER.test(layer)) return notFound(`No such catch-up playlist 'rewind/${file}'.`, requestId);
  const w = STREAM.test(id) ? c.window(id) : null;
  if (!w) return notFound(`No catch-up for stream '${id}'.`, requestId);
  const skipParam = /(?:^|&)_HLS_skip=([^&]*)/.exec(query)?.[1];
  if (skipParam !== undefined && skipParam !== 'YES' && skipParam !== 'v2') return malformed('_HLS_skip must be YES or v2.', requestId);
  const index = c.d.archive.layer(id, layer);
  const first = index?.firstFrom(w.start);
  const newest = index?.newest();
  if (!first || !newest) return notFound(`No catch-up kept in the window of stream '${id}'.`, requestId);
  const a = c.media(id, query, info, requestId);
  if ('status' in a) return a;
  const q = a.query.startsWith('token=') ? a.query : '';
  const target = Math.max(1, Math.round(c.d.targetDurationMs / 1000));
  const boundaryS = 6 * target;
  const skip = skipParam !== undefined;
  const key = `rewind/${id}/${layer}/${first.sequence}/${newest.sequence}/${skip}/${q}`;
  const text = c.cached(key, () => {
    const tailFrom = newest.start_ms + newest.duration_ms - boundaryS * 1000;
    // A delta update skips the segments that end at least the skip boundary before the newest's end.
    const skipped = skip ? index!.count(first.start_ms, tailFrom - target * 1000) : 0;
    const m = {
      mediaSequence: first.sequence,
      discontinuitySequence: discontinuityBefore(first),
      skipped,
      type: null,
      ended: false,
      targetSeconds: Math.max(target, targetSecondsOf([newest], c.d.targetDurationMs)),
      skipUntilSeconds: boundaryS,
      gapTags: false,
      prefix: `../catchup/${layer}/`,
      query: q,
      titles: c.d.repo.titles(id, first.start_ms, newest.start_ms + newest.duration_ms),
    };
    if (skipped > 0) return Buffer.from(catchUpMediaPlaylist({ ...m, rows: index!.from(tailFrom - target * 1000) }));
    // The whole window: its finished runs of segments are rendered once (docs/behaviour.md §17).
    const fmp4 = first.ext === 'm4s';
    return Buffer.concat([Buffer.from(mediaHead(m, fmp4)), ...segmentRuns(index!, first.start_ms, { fmp4, gapTags: false, prefix: m.prefix, q: q ? `?${q}` : '' }, c.runs)]);
  });
  return m3u8(text, a, 'no-cache');
}

/** `/hls/:id/catchup/<layer>/<file>`: a kept segment or init section (memory first, then disk). */
function keptObject(c: CatchUp, id: string, layer: string, file: string, query: string, requestId: string): RawReply {
  const m = OBJECT.exec(file);
  if (!m || !LAYER.test(layer) || !STREAM.test(id)) return notFound(`No such catch-up object '${layer}/${file}'.`, requestId);
  const a = c.object(id, query, requestId);
  if ('status' in a) return a;
  const live = c.d.source.get(id)?.layer(layer);
  let body: Uint8Array | undefined;
  if (m[3] !== undefined) body = live && live.initId === m[3] ? (live.init ?? undefined) : undefined;
  else body = live?.container === (m[2] === 'ts' ? 'ts' : 'fmp4') ? live.segment(Number(m[1])) : undefined;
  body ??= c.d.archive.object(id, layer, file, m[1] !== undefined ? Number(m[1]) : null);
  if (!body) return notFound(`No such catch-up object '${layer}/${file}' for stream '${id}'.`, requestId);
  const type = TYPES[m[3] !== undefined ? 'mp4' : m[2]!]!;
  return { status: STATUS_200, headers: headers(type, a.private ? PRIVATE : IMMUTABLE), body };
}
