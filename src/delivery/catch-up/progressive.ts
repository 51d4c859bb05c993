/**
 * Progressive catch-up (docs/behaviour.md "Catch-up radio", docs/icecast.md "Listeners"):
 * `GET|HEAD /listen/<id>.<ext>?start=<t>` (and `/listen/<id>/<kbps>.<ext>?start=<t>`, and the
 * Icecast port's mounts with `?start=`) plays the kept audio of the layer from instant `t` — Unix
 * seconds or ISO 8601 UTC, as the HLS catch-up addresses read it (`parseInstant`) — at real-time
 * pace after a burst of BURST_MS, and runs on into live: it follows the layer's segments by media
 * sequence number (the live layer's memory first, then the archive on disk), across broadcasts,
 * with one header and no gap. With `Icy-MetaData: 1`, `StreamTitle` is the play log's title
 * (docs/behaviour.md §11) at the air time of the audio being written, else the stream's title.
 *
 * Refusals: a malformed `t` 400; catch-up off, an unknown stream or layer, another extension than
 * the stream's codec, `t` before the window or after now, nothing kept from `t` 404; `playback:
 * "token"` streams need `?token=` exactly as live `/listen` (401/403). The same per-address and
 * node-wide caps as live listening (429, 503); a listener is a registry session (`protocol:
 * "icecast"`, `mode: "catch_up"`). A listener more than SLOW_MS behind (its writes blocked that
 * long) is cut (`listen_slow_client`); one whose token expired or whose stream was deleted or
 * turned to tokens without it is closed. Each listener holds one segment of audio at a time (read
 * from disk when it is its turn), never the window.
 */
import type { ProgressiveAnswer, ProgressiveClient, ProgressiveRequest, ProgressiveSink, RawReply } from '../../base/http/server.js';
import { errorBody, NO_CLIENT, statusLine } from '../../base/http/server.js';
import { ApiError, type ErrorCode } from '../../base/errors/errors.js';
import type { CatchUpRepo, CatchUpTitle } from '../../base/db/catch-up-repo.js';
import type { Logger } from '../../base/logger.js';
import type { MediaRegistry } from '../../live/media/registry.js';
import { clientAddress } from '../../base/http/client-address.js';
import { countryOf } from '../../base/geo.js';
import { queryParam } from '../listeners/hls-access.js';
import type { ListenerRegistry } from '../listeners/registry.js';
import { TooManyListenersError, type Session } from '../listeners/session.js';
import { tokenCheck, type ListenContext } from '../progressive/routes.js';
import { ListenEncoder, type ListenChunk } from '../progressive/encoder.js';
import { ICY_EMPTY_BLOCK, ICY_METAINT, icyTitleBlock } from '../progressive/icy.js';
import { SLOW_MS } from '../progressive/queue.js';
import type { CatchUpArchive } from './archive.js';
import { parseInstant } from './routes.js';

/** What progressive catch-up reads. Times in ms since the epoch. */
export interface CatchUpListenDeps {
  repo: CatchUpRepo;
  archive: CatchUpArchive;
  /** The live hubs: segments still in a live layer's memory are read from there. */
  media: MediaRegistry;
  registry: ListenerRegistry;
  /** The stream's ingest codec ('aac', 'opus', 'mp3'): the one extension served; null for an unknown stream. */
  codecOf(streamId: string): string | null;
  log: Logger;
  now: () => number;
}

/** Audio written at once when a listener starts (ms), and kept ahead of real time after. */
export const BURST_MS = 3000;
/** How often a listener's pacing runs (ms). */
const TICK_MS = 250;
/** A listener waiting this long for the next segment (the stream went off the air) is ended (ms). */
const EDGE_WAIT_MS = 30_000;
/** Every this many ticks, the stream's playback rule is checked again (about once a second). */
const QUALIFY_TICKS = 4;
const CONTENT_TYPES: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache, no-store'], ['Access-Control-Allow-Origin', '*']] as const;
const STREAM = /^stm_[A-Za-z0-9]{1,64}$/;

const refuse = (status: number, code: ErrorCode, message: string, requestId: string, extra: ReadonlyArray<readonly [string, string]> = []): RawReply => ({
  status: statusLine(status),
  headers: [...JSON_HEADERS, ...extra],
  body: Buffer.from(JSON.stringify(errorBody(new ApiError(code, message, { status }), requestId))),
});

/** One segment as a listener plays it: where it is in time and what it needs. */
interface Seg {
  sequence: number;
  startMs: number;
  durationMs: number;
  initId: string;
  container: 'fmp4' | 'ts';
}

/**
 * The `?start=` handler of the listening routes, made from the thread's listening context (its
 * caps, tokens, playback rules, station identity): `ListenFeature.useCatchUp(c => catchUpListen(d, c))`.
 */
export function catchUpListen(d: CatchUpListenDeps, c: ListenContext<Session>): (req: ProgressiveRequest, id: string, kbps: number | null, ext: string) => ProgressiveAnswer {
  return (req, id, kbps, ext) => answer(d, c, req, id, kbps, ext);
}

/** The layer `kbps` names (null: the top one) among the kept layers, or null. */
function layerOf(d: CatchUpListenDeps, id: string, kbps: number | null): string | null {
  const kept = d.archive.layers(id);
  if (kbps !== null) return kept.includes(`a${kbps}`) ? `a${kbps}` : null;
  const top = d.media.get(id)?.top.name;
  if (top && kept.includes(top)) return top;
  return kept.sort((a, b) => Number(b.slice(1)) - Number(a.slice(1)))[0] ?? null;
}

/** The answer to one `GET|HEAD /listen/…?start=<t>` (see the file comment). */
function answer(d: CatchUpListenDeps, c: ListenContext<Session>, req: ProgressiveRequest, id: string, kbps: number | null, ext: string): ProgressiveAnswer {
  const { requestId } = req;
  const raw = queryParam(req.query, 'start');
  const t = parseInstant(raw);
  if (Number.isNaN(t)) return refuse(400, 'parameter_invalid', `start '${raw.slice(0, 64)}' is not a time: Unix seconds or ISO 8601 UTC (2026-11-29T06:00:00Z).`, requestId);
  const notFound = (why: string) => refuse(404, 'resource_missing', why, requestId);
  const hours = STREAM.test(id) ? d.repo.hours(id) : 0;
  const pol = hours > 0 ? c.policy(id) : null;
  if (!pol || CONTENT_TYPES[ext] === undefined || d.codecOf(id) !== ext) return notFound(`No catch-up listening at this URL for stream '${id}'.`);
  const now = d.now();
  if (t < now - hours * 3_600_000) return notFound(`${new Date(t).toISOString()} is before the catch-up window of stream '${id}' (${hours} h).`);
  if (t > now) return notFound(`${new Date(t).toISOString()} is after now.`);
  const layer = layerOf(d, id, kbps);
  // The segment playing at t, else (t between broadcasts) the next one kept.
  const index = layer ? d.archive.layer(id, layer) : undefined;
  const row = index ? (index.span(t, t + 1).find((r) => r.start_ms + r.duration_ms > t) ?? index.firstFrom(t)) : undefined;
  if (!layer || !row) return notFound(`Nothing of stream '${id}' is kept from ${new Date(t).toISOString()}.`);
  const tok = tokenCheck(c, req, id, pol);
  if ('refused' in tok) return tok.refused;
  const icy = req.header('icy-metadata') === '1';
  const station = c.station(id);
  const headers: Array<readonly [string, string]> = [
    ['Content-Type', CONTENT_TYPES[ext]!],
    ['Cache-Control', 'no-cache, no-store'],
    ['Access-Control-Allow-Origin', '*'],
    ['Access-Control-Expose-Headers', 'icy-name, icy-description, icy-genre, icy-url, icy-br, icy-metaint'],
    ...station,
    ['icy-br', layer.slice(1)],
  ];
  if (icy) headers.push(['icy-metaint', String(ICY_METAINT)]);
  if (req.method === 'HEAD') return { stream: { headers, open: () => NO_CLIENT } };
  const ip = clientAddress(req.remoteAddress, req.header('x-forwarded-for'), c.trusted);
  const cap = c.caps.tryAcquire(ip);
  if (cap !== 'ok') {
    c.limits.hit(cap === 'total' ? 'listen_connections' : 'listen_connections_per_ip', ip);
    const which = cap === 'total' ? 'This node has as many listening connections as it takes' : 'This address has as many listening connections as it may';
    return refuse(429, 'too_many_connections', `${which}; retry later.`, requestId, [['Retry-After', '5']]);
  }
  if (c.full()) {
    c.caps.release(ip);
    return refuse(503, 'listener_capacity', 'This node serves as many listeners as it can; try again later.', requestId);
  }
  const userAgent = req.header('user-agent') || null;
  const seg: Seg = { sequence: row.sequence, startMs: row.start_ms, durationMs: row.duration_ms, initId: row.init_id, container: row.ext === 'ts' ? 'ts' : 'fmp4' };
  const stationTitle = station.find(([k]) => k === 'icy-name')?.[1] ?? '';
  return {
    stream: {
      headers,
      open: (sink) => {
        const p = new CatchUpPlayer({ d, c, id, layer, ip, icy, tokenExpiresAt: tok.expiresAt, tokenPublishable: tok.publishable, stationTitle, from: t, first: seg }, sink);
        return p.open(pol.accountId, userAgent);
      },
    },
  };
}

/** What a player is made with. */
interface PlayerOptions {
  d: CatchUpListenDeps;
  c: ListenContext<Session>;
  id: string;
  layer: string;
  ip: string;
  icy: boolean;
  tokenExpiresAt: number | null;
  tokenPublishable: boolean;
  /** The ICY title when the play log has none. */
  stationTitle: string;
  /** The asked instant (ms): audio of the first segment before it is skipped. */
  from: number;
  first: Seg;
}

/** A chunk of the segment being played, with its air time and title. */
interface Timed {
  chunk: ListenChunk;
  title: string;
}

/**
 * One catch-up listener: reads the layer's segments one at a time from `first` on, encodes each
 * in the listening format (one encoder: Ogg pages continue across segments), and writes them at
 * real-time pace, ICY metadata interleaved.
 */
class CatchUpPlayer implements ProgressiveClient {
  private readonly encoder: ListenEncoder;
  private session: Session | undefined;
  private timer: NodeJS.Timeout | null = null;
  private cur: Seg | null = null;
  private chunks: Timed[] = [];
  private index = 0;
  private init: { id: string; data: Uint8Array; version: number } | null = null;
  private initVersions = 0;
  private startedAt = 0;
  private sentMs = 0;
  private blockedAt = 0;
  private waitingSince = 0;
  private ticks = 0;
  private icyLeft: number;
  /** ICY: the title of the audio being written, and the one the listener got last. */
  private title: string | null = null;
  private lastTitle: string | null = null;
  private done = false;

  constructor(
    private readonly o: PlayerOptions,
    private readonly sink: ProgressiveSink,
  ) {
    this.encoder = new ListenEncoder(o.first.container);
    this.icyLeft = o.icy ? ICY_METAINT : -1;
  }

  /** Joins the registry and writes the header and burst; the client the HTTP layer reports to. */
  open(accountId: string, userAgent: string | null): ProgressiveClient {
    const { d } = this.o;
    try {
      this.session = d.registry.join({ streamId: this.o.id, accountId, key: '', protocol: 'icecast', country: countryOf(this.o.ip), userAgent, timeoutMs: 0, mode: 'catch_up' });
    } catch (e) {
      this.finish();
      if (e instanceof TooManyListenersError) {
        this.sink.close();
        return NO_CLIENT;
      }
      throw e;
    }
    this.startedAt = d.now();
    this.load(this.o.first);
    // Ogg: the stream's header (OpusHead, OpusTags pages) once, before the first page.
    const header = this.encoder.header;
    if (header.length > 0) this.out(header);
    this.pump();
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
    return this;
  }

  /** The socket drained. */
  writable(): void {
    this.blockedAt = 0;
    this.pump();
  }

  /** The client went away (or the connection was closed). */
  gone(): void {
    this.finish();
  }

  private tick(): void {
    if (this.done) return;
    const now = this.o.d.now();
    if (this.blockedAt > 0 && now - this.blockedAt > SLOW_MS) {
      this.o.c.limits.hit('listen_slow_client', this.o.ip, { streamId: this.o.id });
      return this.close();
    }
    if (++this.ticks % QUALIFY_TICKS === 0 && !this.qualifies(now)) return this.close();
    this.pump();
  }

  /** Whether the connection may go on: the stream exists, and a token stream's token is still valid. */
  private qualifies(now: number): boolean {
    let pol;
    try {
      pol = this.o.c.policy(this.o.id);
    } catch {
      return true; // unreadable now: judged again later
    }
    if (!pol) return false;
    if (pol.playback !== 'token') return true;
    const exp = this.o.tokenExpiresAt;
    return exp !== null && exp > now && !(this.o.tokenPublishable && !pol.publishableKeyTokens);
  }

  /** Writes what real time (plus the burst) allows, in one cork. */
  private pump(): void {
    if (this.done || this.blockedAt > 0) return;
    try {
      this.sink.cork(() => this.writeDue());
    } catch {
      // The connection is gone (its abort is on the way).
    }
  }

  private writeDue(): void {
    const now = this.o.d.now();
    const allowed = now - this.startedAt + BURST_MS;
    while (!this.done && this.blockedAt === 0 && this.sentMs < allowed) {
      const next = this.next(now);
      if (!next) return;
      this.title = next.title;
      this.sentMs += next.chunk.ms;
      if (!this.out(next.chunk.data)) this.blockedAt = now;
    }
  }

  /** The next chunk to write, loading the next segment when the current one is written; null when none is there yet. */
  private next(now: number): Timed | null {
    while (this.index >= this.chunks.length) {
      const seg = this.cur ? this.following(this.cur) : null;
      if (!seg) {
        this.waitingSince ||= now;
        if (now - this.waitingSince > EDGE_WAIT_MS) this.end();
        return null;
      }
      this.waitingSince = 0;
      this.load(seg);
    }
    return this.chunks[this.index++]!;
  }

  /** The segment after `s`: the live layer's next one while it holds it, else the next one kept. */
  private following(s: Seg): Seg | null {
    const { d, id, layer } = this.o;
    const live = d.media.get(id)?.layer(layer);
    const n = live?.segment(s.sequence + 1);
    if (n) return { sequence: n.sequence, startMs: n.programDateMs, durationMs: n.durationMs, initId: n.initId, container: live!.o.container };
    const r = d.archive.layer(id, layer)?.firstFrom(s.startMs + 1);
    return r ? { sequence: r.sequence, startMs: r.start_ms, durationMs: r.duration_ms, initId: r.init_id, container: r.ext === 'ts' ? 'ts' : 'fmp4' } : null;
  }

  /** Reads and encodes segment `s` (a segment that cannot be read is skipped: its chunks are none). */
  private load(s: Seg): void {
    this.cur = s;
    this.chunks = [];
    this.index = 0;
    const data = this.bytes(s);
    const init = s.container === 'fmp4' ? this.initOf(s) : null;
    if (!data || (s.container === 'fmp4' && !init)) return;
    let chunks: ListenChunk[];
    try {
      chunks = this.encoder.encode({ data, durationMs: s.durationMs, initVersion: init?.version ?? 0 }, init?.data ?? null, init?.version ?? 0);
    } catch (e) {
      this.o.d.log.warn('catch-up listening: a kept segment could not be read back; skipped', { streamId: this.o.id, layer: this.o.layer, sequence: s.sequence, err: (e as Error).message });
      return;
    }
    const titles = this.o.d.repo.titles(this.o.id, s.startMs, s.startMs + s.durationMs);
    let at = s.startMs;
    const first = this.cur === this.o.first;
    for (const chunk of chunks) {
      const air = at;
      at += chunk.ms;
      // The first segment starts at the chunk that holds the asked instant.
      if (first && at <= this.o.from && chunk.ms > 0) continue;
      this.chunks.push({ chunk, title: titleAt(titles, air) ?? this.o.stationTitle });
    }
  }

  /** A segment's bytes: from the live layer's memory while it holds them, else from disk. */
  private bytes(s: Seg): Uint8Array | undefined {
    const { d, id, layer } = this.o;
    const live = d.media.get(id)?.layer(layer)?.segment(s.sequence);
    if (live && live.programDateMs === s.startMs) return live.data;
    return d.archive.object(id, layer, `${s.sequence}.${s.container === 'ts' ? 'ts' : 'm4s'}`, s.sequence);
  }

  /** The init section a fMP4 segment needs (the last one read is kept), or null when it is not there. */
  private initOf(s: Seg): { id: string; data: Uint8Array; version: number } | null {
    if (this.init?.id === s.initId) return this.init;
    const { d, id, layer } = this.o;
    const live = d.media.get(id)?.layer(layer);
    const data = live && live.initId === s.initId && live.init ? live.init : d.archive.object(id, layer, `init-${s.initId}.mp4`, null);
    if (!data) return null;
    this.init = { id: s.initId, data, version: ++this.initVersions };
    return this.init;
  }

  /** Writes `data`, ICY metadata blocks interleaved every ICY_METAINT bytes; false on backpressure. */
  private out(data: Uint8Array): boolean {
    if (this.icyLeft < 0) return this.sink.write(data);
    let ok = true;
    let rest = data;
    while (rest.length > 0) {
      const n = Math.min(this.icyLeft, rest.length);
      ok = this.sink.write(n === rest.length ? rest : rest.subarray(0, n)) && ok;
      this.icyLeft -= n;
      rest = rest.subarray(n);
      if (this.icyLeft === 0) {
        const changed = this.title !== null && this.title !== this.lastTitle;
        if (changed) this.lastTitle = this.title;
        ok = this.sink.write(changed ? icyTitleBlock(this.title!) : ICY_EMPTY_BLOCK) && ok;
        this.icyLeft = ICY_METAINT;
      }
    }
    return ok;
  }

  /** Closes the connection now (slow, or no longer qualifies). */
  private close(): void {
    this.finish();
    try {
      this.sink.close();
    } catch {
      // already gone
    }
  }

  /** Ends the response after what was written (nothing more to play). */
  private end(): void {
    this.finish();
    try {
      this.sink.end();
    } catch {
      // already gone
    }
  }

  /** Gives back what the connection took, once. */
  private finish(): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.chunks = [];
    if (this.session !== undefined) this.o.d.registry.leave(this.session);
    this.o.c.caps.release(this.o.ip);
  }
}

/** The title of the play log airing at `ms` (`<artist> - <title>`), or null before the first. */
function titleAt(titles: CatchUpTitle[], ms: number): string | null {
  let cur: CatchUpTitle | null = null;
  for (const t of titles) {
    if (t.startMs > ms) break;
    cur = t;
  }
  if (!cur) return null;
  return cur.artist ? `${cur.artist} - ${cur.title}` : cur.title;
}
