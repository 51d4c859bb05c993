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
import type { AppContext, Feature } from '../../context.js';
import type { HttpServer, ProgressiveAnswer, ProgressiveRequest, RawReply } from '../../base/http/server.js';
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
import { TooManyListenersError, MAX_LISTENERS, type Session } from '../listeners/registry.js';
import { SharedAddressCounter } from '../listeners/shared-counter.js';
import { randomBase62 } from '../../base/ids.js';
import { ICY_METAINT } from './icy.js';
import { stationHeaders } from './icecast-port.js';
import { Mount } from './mount.js';
import { ListenFeed, SharedQueues, type ListenFeedMessage } from './shared.js';

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
/** How long a stream's title is cached (ms); a `stream.now_playing` event drops it at once. */
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
  const sweep = () => {
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
  };
  const timer = setInterval(() => {
    if (open.size > 0) sweep();
  }, QUALIFY_SWEEP_MS);
  timer.unref();

  const handle = (req: ProgressiveRequest, id: string, kbps: number | null, ext: string): ProgressiveAnswer => {
    const { requestId } = req;
    if (c.counts) c.counts.listen++;
    const notFound = () => refuse(404, 'resource_missing', `No live listening stream at this URL for stream '${id}'.`, requestId);
    const s = c.stream(id);
    if (!s || s.ended || !s.playable || CONTENT_TYPES[ext] === undefined || s.codec !== ext) return notFound();
    let layer: ListenLayerView | undefined;
    for (const l of s.layers()) {
      if (kbps === null || (l.kbps === kbps && !l.failed)) {
        layer = l;
        break;
      }
    }
    if (!layer || !layer.ready || layer.ended) return notFound();
    const pol = c.policy(id);
    if (!pol) return notFound();
    const token = queryParam(req.query, 'token');
    let tokenExpiresAt: number | null = null;
    if (pol.playback === 'token') {
      if (token === '') return refuse(401, 'missing_token', 'This stream needs a listener token: add ?token=<token> to the URL.', requestId, [['WWW-Authenticate', 'Bearer realm="listener"']]);
      const r = c.tokens.verifySync(token);
      if (!r.ok && r.reason === 'expired') return refuse(403, 'token_expired', 'The listener token has expired; get a new one.', requestId);
      if (!r.ok) return refuse(403, 'invalid_token', 'The listener token is malformed or its signature is invalid.', requestId);
      if (r.claims.streamId !== id) return refuse(403, 'invalid_token', 'The listener token is for another stream.', requestId);
      tokenExpiresAt = r.claims.expiresAt;
    } else if (token !== '') {
      // A public stream needs none, but a valid one keeps the connection if the stream turns to tokens.
      const r = c.tokens.verifySync(token);
      if (r.ok && r.claims.streamId === id) tokenExpiresAt = r.claims.expiresAt;
    }
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
    const userAgent = req.header('user-agent') || null;
    const target = layer;
    return {
      stream: {
        headers,
        open: (sink) => {
          let session: ListenSession | null = null;
          let done = false;
          const entry: OpenListen = { streamId: id, tokenExpiresAt, close: () => sink.close() };
          const finish = () => {
            if (done) return;
            done = true;
            open.delete(entry);
            session?.close();
            c.caps.release(ip);
          };
          try {
            session = c.open({ streamId: id, accountId: pol.accountId, key: `icy_${randomBase62(16)}`, ip, userAgent });
          } catch (e) {
            finish();
            if (e instanceof TooManyListenersError) {
              sink.close();
              return () => {};
            }
            throw e;
          }
          const ses = session;
          let h: { remove(): void };
          try {
            h = c.mount(id, target).add({
              sink,
              icy,
              seen: () => ses.seen(),
              left: (reason) => {
                if (reason === 'slow') c.limits.hit('listen_slow_client', ip, { streamId: id });
                finish();
              },
            });
          } catch (e) {
            finish();
            throw e;
          }
          open.add(entry);
          return () => {
            h.remove();
            finish();
          };
        },
      },
    };
  };

  const file = /^([A-Za-z0-9_-]{1,64})\.([a-z0-9]{1,8})$/;
  http.progressive('/listen/:file', (req) => {
    const m = file.exec(req.params[0]!);
    if (!m) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return handle(req, m[1]!, null, m[2]!);
  });
  http.progressive('/listen/:id/:file', (req) => {
    const m = file.exec(req.params[1]!);
    const id = req.params[0]!;
    if (!m || !/^\d{1,5}$/.test(m[1]!) || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return handle(req, id, Number(m[1]), m[2]!);
  });
  return {
    close() {
      clearInterval(timer);
      open.clear();
    },
  };
}

/** What the main thread's listening routes are given besides the HTTP server and the media. */
export interface ListenDeps {
  ctx: AppContext;
  listeners: Pick<Listeners, 'registry' | 'access' | 'tokens' | 'trusted'>;
  /**
   * The ICY title of a stream now (`<artist> - <title>`), or null for none. Default: the stream's
   * now playing (docs/behaviour.md §11), else its title; a block carries it when it changed.
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
  feed(post: (worker: number, m: ListenFeedMessage) => void): ListenFeed;
}

/** Registers the main thread's listening routes. */
export function registerListenRoutes(http: HttpServer, media: MediaRegistry, d: ListenDeps): ListenFeature {
  const { ctx, listeners } = d;
  const { registry, access, tokens, trusted } = listeners;
  const log = ctx.log.child('listen');
  const caps = new SharedAddressCounter(ctx.config.limits.listenMaxConnections, ctx.config.limits.listenMaxConnectionsPerIp);
  const mounts = new Map<Layer, Mount>();
  const titles = new Map<string, { title: string; until: number }>();

  const titleOf = (id: string): string => {
    const now = ctx.now();
    const c = titles.get(id);
    if (c && c.until > now) return c.title;
    const row = ctx.streams.getAny(id);
    const np = row?.now_playing ? (JSON.parse(row.now_playing) as { title: string; artist: string | null }) : null;
    const title = np ? (np.artist ? `${np.artist} - ${np.title}` : np.title) : (row?.title ?? '');
    if (titles.size > 10_000) titles.clear();
    titles.set(id, { title, until: now + TITLE_TTL_MS });
    return title;
  };
  const stations = new Map<string, { headers: ReadonlyArray<readonly [string, string]>; until: number }>();
  const stationOf = (id: string): ReadonlyArray<readonly [string, string]> => {
    const now = ctx.now();
    const c = stations.get(id);
    if (c && c.until > now) return c.headers;
    const row = ctx.streams.getAny(id);
    const headers = stationHeaders(row?.title ?? '', row?.metadata);
    if (stations.size > 10_000) stations.clear();
    stations.set(id, { headers, until: now + TITLE_TTL_MS });
    return headers;
  };
  const nowPlaying = d.nowPlaying ?? ((id: string) => titleOf(id) || null);
  // A change of what plays now reaches the next metadata block, not one up to TITLE_TTL_MS later.
  const unsubscribe = ctx.outbox.subscribe((e) => {
    const o = e.type === 'stream.now_playing' ? (e.data.object as { id?: unknown } | null) : null;
    if (typeof o?.id === 'string') titles.delete(o.id);
  });
  const failures = new WeakMap<Layer, number>();
  const queues = new SharedQueues(d.shared ?? false, nowPlaying, (id, layer, e) => {
    const n = failures.get(layer) ?? 0;
    failures.set(layer, n + 1);
    if (n % LOG_EVERY === 0) log.warn('listening: a part/segment could not be read back; skipped', { streamId: id, layer: layer.name, err: e.message, failures: n + 1 });
  });

  const layerView = (l: Layer): ListenLayerView & { layer: Layer } => ({ layer: l, name: l.name, kbps: l.o.kbps, ready: l.ready, ended: l.ended, failed: l.failed });
  const handlers = registerListenHandlers(http, {
    log,
    limits: ctx.limits,
    caps,
    trusted,
    tokens,
    policy: (id) => access.policy(id),
    station: stationOf,
    stream: (id) => {
      const hub = media.get(id);
      return hub ? { ended: hub.ended, codec: hub.opts.codec, playable: hub.top.ready, layers: () => hub.layers.map(layerView) } : undefined;
    },
    mount: (id, v) => {
      const layer = (v as ListenLayerView & { layer: Layer }).layer;
      let m = mounts.get(layer);
      if (m?.open) return m;
      const q = queues.acquire(id, layer);
      const mount: Mount = new Mount({
        streamId: id,
        queue: q,
        onDispose: () => {
          if (mounts.get(layer) === mount) mounts.delete(layer);
          queues.release(layer, q);
        },
      });
      m = mount;
      if (m.open) mounts.set(layer, m);
      return m;
    },
    full: () => registry.total() >= MAX_LISTENERS,
    open: (j) => {
      const s: Session = registry.join({ streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: 'icecast', country: countryOf(j.ip), userAgent: j.userAgent, timeoutMs: 0 });
      return { seen: () => registry.touch(j.streamId, s.key), close: () => registry.leave(s) };
    },
    counts: d.counts,
  });

  let feed: ListenFeed | null = null;
  return {
    station: stationOf,
    caps,
    feed: (post) =>
      (feed ??= new ListenFeed(
        queues,
        (id, name) => {
          const l = media.get(id)?.layer(name);
          return l && !l.ended && !l.failed ? l : null;
        },
        post,
      )),
    close() {
      handlers.close();
      unsubscribe();
      feed?.close();
      for (const m of [...mounts.values()]) m.close();
      mounts.clear();
      queues.close();
    },
  };
}
