/**
 * Progressive (Icecast-style) listening (docs/behaviour.md §10 "Listening", §13):
 * - `GET|HEAD /listen/<stream_id>.<ext>` — the passthrough layer (the ingest, not re-encoded);
 * - `GET|HEAD /listen/<stream_id>/<kbps>.<ext>` — a ladder layer by its nominal bitrate;
 * `ext` is the stream's codec: `mp3` (`audio/mpeg`), `aac` (`audio/aac`, ADTS), `opus`
 * (`audio/ogg`, Ogg Opus); another one is 404. One long response per listener from a shared
 * mount per layer (src/delivery/progressive/mount.ts): a 2–4 s burst, then real time; ICY metadata with
 * `Icy-MetaData: 1`. Every answer carries `icy-name` (the stream's title), `icy-br` (the layer's
 * kbps), `Cache-Control: no-cache, no-store` and `Access-Control-Allow-Origin: *`.
 *
 * The same handlers serve on the main thread (`registerListenRoutes`: the hubs themselves, the
 * registry) and on a worker thread (`registerListenHandlers` with the worker's mirror, its mounts
 * over the main thread's shared chunk queues, its session batches: src/delivery/threads/worker.ts); the
 * connection caps are counted node-wide in shared memory (src/delivery/listeners/shared-counter.ts).
 *
 * 404 before the stream's passthrough layer has audio and after the stream ended. `playback:
 * "token"` streams need `?token=<listener token>` (401 without, 403 invalid/expired/other stream).
 * Each GET is a listener (`protocol: "icecast"`) in the registry from connect to close, with its
 * country and user agent. Connections are capped per client address and in total
 * (`listenMaxConnectionsPerIp`, `listenMaxConnections`: 429 with `Retry-After`). A listener more
 * than 10 s behind is disconnected (`listen_slow_client`). A connection that stops qualifying is
 * closed within a few seconds (docs/listeners.md "Connections that stop qualifying"): its stream
 * was deleted, or it turned to `playback: "token"` and the connection brought no valid token, or
 * its token expired.
 */
import type { BlockList } from 'node:net';
import type { Feature } from '../../base/feature.js';
import type { HttpServer, ProgressiveAnswer, ProgressiveRequest, ProgressiveSink, RawReply } from '../../base/http/server.js';
import { errorBody, statusLine } from '../../base/http/server.js';
import { ApiError } from '../../base/errors/errors.js';
import type { ErrorCode } from '../../base/errors/codes.js';
import type { Layer, MediaRegistry } from '../../live/media/hub.js';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import type { Listeners } from '../listeners/feature.js';
import type { ListenerTokens } from '../../base/auth/listener-tokens.js';
import { queryParam, type StreamPolicy } from '../listeners/hls-access.js';
import { clientAddress, countryOf } from '../listeners/geo.js';
import { TooManyListenersError, MAX_LISTENERS, type ListenerRegistry, type Session } from '../listeners/registry.js';
import { SharedAddressCounter } from '../listeners/shared-counter.js';
import { randomBase62 } from '../../base/ids.js';
import { ICY_METAINT } from './icy.js';
import { stationHeaders } from './icecast-port.js';
import { Mount, type LeaveReason, type MountClient, type MountHandle } from './mount.js';
import { ListenFanout, SharedQueues, type ListenMessage } from './shared.js';

/** One layer as listening sees it. */
export interface ListenLayerView {
  readonly name: string;
  /** Nominal bitrate (kbps): the `/<kbps>.<ext>` of its URL. */
  readonly kbps: number;
  readonly ready: boolean;
  readonly ended: boolean;
  readonly failed: boolean;
}

/** One stream as listening sees it. */
export interface ListenStreamView {
  readonly ended: boolean;
  /** The ingest codec: the one extension served. */
  readonly codec: string;
  /** The top (passthrough) layer has audio. */
  readonly playable: boolean;
  /** Top first. */
  layers(): Iterable<ListenLayerView>;
}

/** A listening connection's session in the registry (directly, or through a worker's batches). */
export interface ListenSession {
  /** The listener took audio. */
  seen(): void;
  /** The connection closed. */
  close(): void;
}

/** A main-thread listening connection's registry session (one object: no closures per listener). */
class RegistrySession implements ListenSession {
  constructor(
    private readonly registry: ListenerRegistry,
    private readonly s: Session,
  ) {}

  seen(): void {
    this.registry.touch(this.s.streamId, this.s.key);
  }

  close(): void {
    this.registry.leave(this.s);
  }
}

/**
 * A worker thread's listening connection's session: its handle in the worker's batches
 * (src/delivery/listeners/remote.ts `RemoteSessions.open`); one object, no closures per listener.
 */
export class HandleSession implements ListenSession {
  constructor(
    private readonly sessions: { seenNow(h: number): void; close(h: number): void },
    private readonly h: number,
  ) {}

  seen(): void {
    this.sessions.seenNow(this.h);
  }

  close(): void {
    this.sessions.close(this.h);
  }
}

/** What the listening handlers need of the thread they run on. */
export interface ListenContext {
  log: Logger;
  limits: Pick<Limits, 'hit'>;
  /** Connections per client address and in total, node-wide. */
  caps: SharedAddressCounter;
  trusted: BlockList;
  tokens: ListenerTokens;
  policy(streamId: string): StreamPolicy | null;
  /**
   * The station identity headers of a stream (docs/icecast.md "Station identity"): `icy-name` =
   * its title, `icy-description`/`icy-genre`/`icy-url` from its metadata when set.
   */
  station(streamId: string): ReadonlyArray<readonly [string, string]>;
  stream(streamId: string): ListenStreamView | undefined;
  /** The open mount of a layer (made on first use). */
  mount(streamId: string, layer: ListenLayerView): Mount;
  /** The node tracks MAX_LISTENERS already. */
  full(): boolean;
  /** @throws TooManyListenersError when the node is full */
  open(j: { streamId: string; accountId: string; key: string; ip: string; userAgent: string | null }): ListenSession;
  /** Counts the requests answered (tests: which thread served). */
  counts?: { listen: number };
}

const CONTENT_TYPES: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache, no-store'], ['Access-Control-Allow-Origin', '*']] as const;
/** Seconds a client over a connection cap is told to wait. */
const RETRY_AFTER_S = '5';
/** How long a stream's station identity (title, metadata) is cached (ms). */
const TITLE_TTL_MS = 2000;
/** How often open connections are checked against their stream's playback rule (ms). */
export const QUALIFY_SWEEP_MS = 1000;
/** A mount logs its first read-back failure, then every this-many. */
const LOG_EVERY = 100;

/** Header values are sent as they are: no control characters (no header injection). */
const headerSafe = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, ' ');

const refuse = (status: number, code: ErrorCode, message: string, requestId: string, extra: ReadonlyArray<readonly [string, string]> = []): RawReply => ({
  status: statusLine(status),
  headers: [...JSON_HEADERS, ...extra],
  body: Buffer.from(JSON.stringify(errorBody(new ApiError(code, message, { status }), requestId))),
});

/** An open listening connection, as the qualify sweep sees it. */
interface OpenListen {
  streamId: string;
  /** When the valid listener token for this stream the URL carried expires (ms since the epoch); null: none. */
  tokenExpiresAt: number | null;
  /** Closes the connection (its cleanup then runs). */
  close(): void;
}

/**
 * Registers the listening routes of `c` on `http` (either thread). Returns what stops the sweep
 * that closes connections which no longer qualify (see the file comment).
 */
export function registerListenHandlers(http: HttpServer, c: ListenContext): { close(): void } {
  const open = new Set<OpenListen>();
  const timer = setInterval(() => {
    if (open.size > 0) sweepQualified(c, open);
  }, QUALIFY_SWEEP_MS);
  timer.unref();

  const file = /^([A-Za-z0-9_-]{1,64})\.([a-z0-9]{1,8})$/;
  http.progressive('/listen/:file', (req) => {
    const m = file.exec(req.params[0]!);
    if (!m) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return listenAnswer(c, open, req, m[1]!, null, m[2]!);
  });
  http.progressive('/listen/:id/:file', (req) => {
    const m = file.exec(req.params[1]!);
    const id = req.params[0]!;
    if (!m || !/^\d{1,5}$/.test(m[1]!) || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return listenAnswer(c, open, req, id, Number(m[1]), m[2]!);
  });
  return {
    close() {
      clearInterval(timer);
      open.clear();
    },
  };
}

/** Closes the open connections whose stream was deleted, or needs a token they do not carry (any more). */
function sweepQualified(c: ListenContext, open: Set<OpenListen>): void {
  const now = Date.now();
  const policies = new Map<string, StreamPolicy | null>();
  for (const o of [...open]) {
    let pol = policies.get(o.streamId);
    try {
      if (pol === undefined) policies.set(o.streamId, (pol = c.policy(o.streamId)));
    } catch (e) {
      // The policy could not be read (database): judged again at the next sweep.
      c.log.warn('listening: stream policy unreadable', { streamId: o.streamId, err: (e as Error).message });
      return;
    }
    if (!pol || (pol.playback === 'token' && (o.tokenExpiresAt === null || o.tokenExpiresAt <= now))) {
      open.delete(o);
      o.close();
    }
  }
}

/** The layer `kbps` names (null: the passthrough, top layer) when it can be listened to now, else undefined. */
function listenLayer(s: ListenStreamView | undefined, kbps: number | null, ext: string): ListenLayerView | undefined {
  if (!s || s.ended || !s.playable || CONTENT_TYPES[ext] === undefined || s.codec !== ext) return undefined;
  for (const l of s.layers()) {
    if (kbps === null || (l.kbps === kbps && !l.failed)) return l.ready && !l.ended ? l : undefined;
  }
  return undefined;
}

/**
 * The `?token=` check of a stream (docs/behaviour.md §3): a refusal, or when the valid listener
 * token the URL carried expires (ms since the epoch; null: none — a public stream needs none).
 */
function tokenCheck(c: ListenContext, req: ProgressiveRequest, id: string, pol: StreamPolicy): { refused: RawReply } | { expiresAt: number | null } {
  const { requestId } = req;
  const token = queryParam(req.query, 'token');
  if (pol.playback === 'token') {
    if (token === '') return { refused: refuse(401, 'missing_token', 'This stream needs a listener token: add ?token=<token> to the URL.', requestId, [['WWW-Authenticate', 'Bearer realm="listener"']]) };
    const r = c.tokens.verifySync(token);
    if (!r.ok && r.reason === 'expired') return { refused: refuse(403, 'token_expired', 'The listener token has expired; get a new one.', requestId) };
    if (!r.ok) return { refused: refuse(403, 'invalid_token', 'The listener token is malformed or its signature is invalid.', requestId) };
    if (r.claims.streamId !== id) return { refused: refuse(403, 'invalid_token', 'The listener token is for another stream.', requestId) };
    return { expiresAt: r.claims.expiresAt };
  }
  if (token === '') return { expiresAt: null };
  // A public stream needs none, but a valid one keeps the connection if the stream turns to tokens.
  const r = c.tokens.verifySync(token);
  return { expiresAt: r.ok && r.claims.streamId === id ? r.claims.expiresAt : null };
}

/** The answer to one `GET|HEAD /listen/…`: a refusal, or the response headers and what opens the listener. */
function listenAnswer(c: ListenContext, open: Set<OpenListen>, req: ProgressiveRequest, id: string, kbps: number | null, ext: string): ProgressiveAnswer {
  const { requestId } = req;
  if (c.counts) c.counts.listen++;
  const notFound = () => refuse(404, 'resource_missing', `No live listening stream at this URL for stream '${id}'.`, requestId);
  const layer = listenLayer(c.stream(id), kbps, ext);
  if (!layer) return notFound();
  const pol = c.policy(id);
  if (!pol) return notFound();
  const tok = tokenCheck(c, req, id, pol);
  if ('refused' in tok) return tok.refused;
  const icy = req.header('icy-metadata') === '1';
  const headers: Array<readonly [string, string]> = [
    ['Content-Type', CONTENT_TYPES[ext]!],
    ['Cache-Control', 'no-cache, no-store'],
    ['Access-Control-Allow-Origin', '*'],
    ['Access-Control-Expose-Headers', 'icy-name, icy-description, icy-genre, icy-url, icy-br, icy-metaint'],
    ...c.station(id),
    ['icy-br', String(layer.kbps)],
  ];
  if (icy) headers.push(['icy-metaint', String(ICY_METAINT)]);
  if (req.method === 'HEAD') return { stream: { headers, open: () => () => {} } };

  const ip = clientAddress(req.remoteAddress, req.header('x-forwarded-for'), c.trusted);
  const cap = c.caps.tryAcquire(ip);
  if (cap !== 'ok') {
    c.limits.hit(cap === 'total' ? 'listen_connections' : 'listen_connections_per_ip', ip);
    const which = cap === 'total' ? 'This node has as many listening connections as it takes' : 'This address has as many listening connections as it may';
    return refuse(429, 'too_many_connections', `${which}; retry later.`, requestId, [['Retry-After', RETRY_AFTER_S]]);
  }
  if (c.full()) {
    c.caps.release(ip);
    return refuse(503, 'listener_capacity', 'This node serves as many listeners as it can; try again later.', requestId);
  }
  const listener: Admitted = { streamId: id, accountId: pol.accountId, layer, icy, ip, userAgent: req.header('user-agent') || null, tokenExpiresAt: tok.expiresAt };
  return { stream: { headers, open: (sink) => openListener(c, open, listener, sink) } };
}

/** A listener admitted by `listenAnswer` (its connection cap taken), before its body starts. */
interface Admitted {
  streamId: string;
  accountId: string;
  layer: ListenLayerView;
  icy: boolean;
  ip: string;
  userAgent: string | null;
  tokenExpiresAt: number | null;
}

/** `s` copied into a string of its own: a slice of a request's text (URL, header) would keep all of it alive. */
const own = (s: string): string => Buffer.from(s, 'utf8').toString('utf8');

/**
 * One listening connection from its body's start to its end: what the qualify sweep sees of it
 * (`OpenListen`), the mount's client (`MountClient`), and what it took (a registry session, a
 * connection cap), given back once by `finish`. One object per listener with its methods on the
 * prototype: a listener lives for hours, and closures per listener are memory per listener
 * (docs/benchmarks.md "Where a listener's memory goes").
 */
class ListenConnection implements OpenListen, MountClient {
  streamId: string;
  readonly tokenExpiresAt: number | null;
  readonly icy: boolean;
  private readonly ip: string;
  session: ListenSession | null = null;
  handle: MountHandle | null = null;
  private done = false;

  constructor(
    private readonly c: ListenContext,
    private readonly open: Set<OpenListen>,
    l: Admitted,
    readonly sink: ProgressiveSink,
  ) {
    this.streamId = l.streamId;
    this.tokenExpiresAt = l.tokenExpiresAt;
    this.icy = l.icy;
    this.ip = own(l.ip);
  }

  /** The qualify sweep closes it. */
  close(): void {
    this.sink.close();
  }

  /** The listener took audio (the mount says so). */
  seen(): void {
    this.session?.seen();
  }

  /** The mount let the listener go. */
  left(reason: LeaveReason): void {
    if (reason === 'slow') this.c.limits.hit('listen_slow_client', this.ip, { streamId: this.streamId });
    this.finish();
  }

  /** The client went away (the function `open` returns, bound). */
  gone(): void {
    this.handle?.remove();
    this.finish();
  }

  /** Gives back what the connection took, once. */
  finish(): void {
    if (this.done) return;
    this.done = true;
    this.open.delete(this);
    this.session?.close();
    this.c.caps.release(this.ip);
  }
}

const NOTHING = (): void => {};

/**
 * Starts a listener's body: its registry session, its place on the layer's mount and in the
 * qualify sweep. Returns what ends it; everything it took (session, cap) is given back once.
 */
function openListener(c: ListenContext, open: Set<OpenListen>, l: Admitted, sink: ProgressiveSink): () => void {
  const conn = new ListenConnection(c, open, l, sink);
  try {
    conn.session = c.open({ streamId: l.streamId, accountId: l.accountId, key: `icy_${randomBase62(16)}`, ip: l.ip, userAgent: l.userAgent });
  } catch (e) {
    conn.finish();
    if (e instanceof TooManyListenersError) {
      sink.close();
      return NOTHING;
    }
    throw e;
  }
  try {
    const mount = c.mount(l.streamId, l.layer);
    // The mount's own copy of the stream id: one string for all its listeners.
    conn.streamId = mount.streamId;
    conn.handle = mount.add(conn);
  } catch (e) {
    conn.finish();
    throw e;
  }
  open.add(conn);
  return conn.gone.bind(conn);
}

/** A stream's station identity as stored (docs/icecast.md "Station identity"): its title and `metadata` JSON. */
export interface StationIdentity {
  title: string;
  /** The stream's `metadata` (a JSON object), or null/undefined for none. */
  metadata?: string | null;
}

/** What the main thread's listening routes are given by the composition root (src/app/delivery.ts). */
export interface ListenDeps {
  /** The hubs of live streams: their layers, and what plays now (`nowPlaying`, docs/behaviour.md §11). */
  media: MediaRegistry;
  listeners: Pick<Listeners, 'registry' | 'access' | 'tokens' | 'trusted'>;
  /** A stream's station identity (its row's title and metadata), or undefined for an unknown stream. */
  identity(streamId: string): StationIdentity | undefined;
  /** Listening connections node-wide and per client address (`SKYLARK_LISTEN_MAX_CONNECTIONS[_PER_IP]`). */
  maxConnections: number;
  maxConnectionsPerIp: number;
  log: Logger;
  limits: Pick<Limits, 'hit'>;
  now: () => number;
  /**
   * The ICY title of a stream now (`<artist> - <title>`), or null for none. Default: what plays
   * now on the stream's hub (docs/behaviour.md §11), else its title; a block carries it when it changed.
   */
  nowPlaying?: (streamId: string) => string | null;
  /** Chunk bytes in shared memory (worker threads serve listeners too). */
  shared?: boolean;
  counts?: { listen: number };
}

/** The main thread's listening: its feature (closes every mount at shutdown) and what worker threads read. */
export interface ListenFeature extends Feature {
  /** The station identity headers (`icy-name`, …) worker threads are told. */
  station(streamId: string): ReadonlyArray<readonly [string, string]>;
  /** The node-wide connection counts (worker threads count into them). */
  caps: SharedAddressCounter;
  /** The chunk queues worker threads read (src/delivery/progressive/shared.ts). */
  fanout(post: (worker: number, m: ListenMessage) => void): ListenFanout;
}

/**
 * A stream's station identity, cached TITLE_TTL_MS per stream: the identity headers and its title
 * (what the ICY title falls back to when nothing plays).
 */
function stationCache(d: ListenDeps): (id: string) => { headers: ReadonlyArray<readonly [string, string]>; title: string } {
  const stations = new Map<string, { headers: ReadonlyArray<readonly [string, string]>; title: string; until: number }>();
  return (id) => {
    const now = d.now();
    const c = stations.get(id);
    if (c && c.until > now) return c;
    const row = d.identity(id);
    const entry = { headers: stationHeaders(row?.title ?? '', row?.metadata), title: row?.title ?? '', until: now + TITLE_TTL_MS };
    if (stations.size > 10_000) stations.clear();
    stations.set(id, entry);
    return entry;
  };
}

/** The ICY title of a stream now: its hub's now playing (`<artist> - <title>`), else its title; null for neither. */
function hubTitle(media: MediaRegistry, stationTitle: (id: string) => string): (id: string) => string | null {
  return (id) => {
    const np = media.get(id)?.nowPlaying;
    const title = np ? (np.artist ? `${np.artist} - ${np.title}` : np.title) : stationTitle(id);
    return title || null;
  };
}

/** The open mount of each layer (made on first use, forgotten when it disposes). */
function layerMounts(queues: SharedQueues): { mounts: Map<Layer, Mount>; mount(id: string, layer: Layer): Mount } {
  const mounts = new Map<Layer, Mount>();
  const mount = (id: string, layer: Layer): Mount => {
    const m = mounts.get(layer);
    if (m?.open) return m;
    const q = queues.acquire(id, layer);
    const made: Mount = new Mount({
      streamId: id,
      queue: q,
      onDispose: () => {
        if (mounts.get(layer) === made) mounts.delete(layer);
        queues.release(layer, q);
      },
    });
    if (made.open) mounts.set(layer, made);
    return made;
  };
  return { mounts, mount };
}

/** Registers the main thread's listening routes. */
export function registerListenRoutes(http: HttpServer, d: ListenDeps): ListenFeature {
  const { media, listeners } = d;
  const { registry, access, tokens, trusted } = listeners;
  const log = d.log.child('listen');
  const caps = new SharedAddressCounter(d.maxConnections, d.maxConnectionsPerIp);
  const station = stationCache(d);
  const stationOf = (id: string) => station(id).headers;
  const failures = new WeakMap<Layer, number>();
  const queues = new SharedQueues(d.shared ?? false, d.nowPlaying ?? hubTitle(media, (id) => station(id).title), (id, layer, e) => {
    const n = failures.get(layer) ?? 0;
    failures.set(layer, n + 1);
    if (n % LOG_EVERY === 0) log.warn('listening: a part/segment could not be read back; skipped', { streamId: id, layer: layer.name, err: e.message, failures: n + 1 });
  });
  const { mounts, mount } = layerMounts(queues);

  const layerView = (l: Layer): ListenLayerView & { layer: Layer } => ({ layer: l, name: l.name, kbps: l.o.kbps, ready: l.ready, ended: l.ended, failed: l.failed });
  const handlers = registerListenHandlers(http, {
    log,
    limits: d.limits,
    caps,
    trusted,
    tokens,
    policy: (id) => access.policy(id),
    station: stationOf,
    stream: (id) => {
      const hub = media.get(id);
      return hub ? { ended: hub.ended, codec: hub.opts.codec, playable: hub.top.ready, layers: () => hub.layers.map(layerView) } : undefined;
    },
    mount: (id, v) => mount(id, (v as ListenLayerView & { layer: Layer }).layer),
    full: () => registry.total() >= MAX_LISTENERS,
    open: (j) => new RegistrySession(registry, registry.join({ streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: 'icecast', country: countryOf(j.ip), userAgent: j.userAgent, timeoutMs: 0 })),
    counts: d.counts,
  });

  let fanout: ListenFanout | null = null;
  const liveLayer = (id: string, name: string) => {
    const l = media.get(id)?.layer(name);
    return l && !l.ended && !l.failed ? l : null;
  };
  return {
    station: stationOf,
    caps,
    fanout: (post) => (fanout ??= new ListenFanout(queues, liveLayer, post)),
    close() {
      handlers.close();
      fanout?.close();
      for (const m of [...mounts.values()]) m.close();
      mounts.clear();
      queues.close();
    },
  };
}
