/**
 * The main thread's progressive listening (docs/behaviour.md §10 "Listening", §11, §13): the
 * `/listen` handlers of src/delivery/progressive/routes.ts over the live hubs and the listener
 * registry, one mount per layer over shared chunk queues (which worker threads read too), each
 * stream's station identity (cached) and its ICY title.
 */
import type { Feature } from '../../base/background.js';
import type { HttpServer } from '../../base/http/server.js';
import type { Layer } from '../../live/media/layer.js';
import type { MediaRegistry } from '../../live/media/registry.js';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import type { Listeners } from '../listeners/room.js';
import { countryOf } from '../../base/geo.js';
import { MAX_LISTENERS, type Session } from '../listeners/session.js';
import { SharedAddressCounter } from '../listeners/shared-counter.js';
import { stationHeaders } from './icecast-port.js';
import { Mount } from './mount.js';
import { ListenFanout, SharedQueues, type ListenMessage } from './shared.js';
import { registerListenHandlers, type ListenContext, type ListenLayerView } from './routes.js';

/** How long a stream's station identity (title, metadata) is cached (ms). */
const TITLE_TTL_MS = 2000;
/** A mount logs its first read-back failure, then every this-many. */
const LOG_EVERY = 100;

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
  /** Hands `?start=<t>` requests to progressive catch-up, made from this thread's listening context. */
  useCatchUp(make: (c: ListenContext<Session>) => NonNullable<ListenContext['catchUp']>): void;
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
  const ctx: ListenContext<Session> = {
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
    open: (j) => registry.join({ streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: 'icecast', country: countryOf(j.ip), userAgent: j.userAgent, timeoutMs: 0 }),
    seen: (s) => registry.touch(s.streamId, s.key),
    close: (s) => registry.leave(s),
    counts: d.counts,
  };
  const handlers = registerListenHandlers<Session>(http, ctx);

  let fanout: ListenFanout | null = null;
  const liveLayer = (id: string, name: string) => {
    const l = media.get(id)?.layer(name);
    return l && !l.ended && !l.failed ? l : null;
  };
  return {
    station: stationOf,
    caps,
    fanout: (post) => (fanout ??= new ListenFanout(queues, liveLayer, post)),
    useCatchUp: (make) => void (ctx.catchUp = make(ctx)),
    close() {
      handlers.close();
      fanout?.close();
      for (const m of [...mounts.values()]) m.close();
      mounts.clear();
      queues.close();
    },
  };
}
