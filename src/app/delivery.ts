/**
 * The composition root's delivery plane, built after live and before control: the listeners room
 * (the control services count listeners through it from the start), then the rooms that serve the
 * hubs — HLS, progressive listening on `/listen` and on the Icecast port, WHEP, the edge log
 * receiver — and the HTTP worker threads that serve HLS and listening beside the main thread.
 */
import type { Base } from './base.js';
import type { Feature } from '../base/background.js';
import { ListenersRepo } from '../base/db/listeners-repo.js';
import type { StreamsRepo } from '../base/db/streams-repo.js';
import { createEdgeLog, createListeners, type Listeners } from '../delivery/listeners/room.js';
import type { EdgeLogReceiver } from '../delivery/listeners/edge-log.js';
import { listenerTimeoutMs, publicPartHead, registerHlsRoutes } from '../delivery/hls/routes.js';
import { NativeParts } from '../delivery/hls/native-parts.js';
import { NativeReloads } from '../delivery/hls/native-reloads.js';
import { deleteHeldReload, deleteHttpObject, drainHeldReloads, putHeldReload, putHeldReloadCells, putHttpObject, setHeldReloadListeners, setHeldReloads } from '../native/http-front.js';
import { MAX_LISTENERS } from '../delivery/listeners/session.js';
import { nativeRequestIdPrefix } from '../base/ids.js';
import { HubSource } from '../delivery/hls/source.js';
import { startHttpThreads, type HttpWorkers, type RunningThreads, type ThreadCounts } from '../delivery/threads/index.js';
import type { MediaRegistry } from '../live/media/registry.js';
import { registerListenRoutes, type ListenFeature } from '../delivery/progressive/main-routes.js';
import { icecastListening, keepProgressive } from '../delivery/progressive/icecast-port.js';
import { registerWhep, type WhepStats } from '../delivery/webrtc/whep.js';
import { registerWhip, type WhipIngestPort, type WhipStats } from '../delivery/webrtc/whip.js';
import { PublishTokens } from '../base/auth/publish-tokens.js';
import { RtpFanout, rtpFanoutAvailable } from '../native/rtp-fanout.js';

/** Builds the listeners room (docs/behaviour.md §3–§4): registry, listener tokens, HLS access, held-request caps. */
export function buildListenersRoom(b: Base): Listeners {
  return createListeners({ config: b.config, db: b.db, repo: new ListenersRepo(b.db), streams: b.repos.streams, outbox: b.outbox, nodeSecret: b.nodeSecret, log: b.log, limits: b.limits, now: b.now });
}

/** The delivery rooms, registered on the HTTP server. */
export interface Delivery {
  /** Playlists of the hubs (rendered into shared memory with worker threads). */
  hlsSource: HubSource;
  /** Requests the main thread answered (tests and diagnostics: which thread served). */
  mainCounts: ThreadCounts;
  /** The edge log receiver (docs/behaviour.md §12), or null when it is off. */
  edgeLog: EdgeLogReceiver | null;
  /** The main thread's listening (worker threads read its queues). */
  listen: ListenFeature;
  /** What the Icecast port answers listeners and `/status-json.xsl` (docs/icecast.md "Listeners"). */
  icecastListeners: ReturnType<typeof icecastListening>;
  /** WHEP's counts (peers, packets and bytes sent: docs/metrics.md). */
  whep: { stats(): WhepStats };
  /** WHIP's counts (sessions, pending offers, RTP packets received). */
  whip: { stats(): WhipStats };
  /** In start order (closed in reverse). */
  features: Feature[];
}

/**
 * Registers HLS, listening (`/listen` and the Icecast port's), WHEP, WHIP (over `whipIngest`) and builds the edge log
 * receiver, over the hubs of `media` and the listeners room.
 * @throws Error when the `/listen/:file` route could not be kept for the Icecast port
 */
export function buildDelivery(b: Base, room: Listeners, media: MediaRegistry, whipIngest: WhipIngestPort): Delivery {
  const { http, config } = b;
  const shared = config.httpThreads > 1;
  // With worker threads, playlists are rendered into shared memory (once per version, for every thread).
  const hlsSource = new HubSource(media, shared);
  const mainCounts: ThreadCounts = { hls: 0, listen: 0, forwarded: 0 };
  registerHlsRoutes(http, hlsSource, { access: room.access, hold: room.held, served: mainCounts });
  // Public LL-HLS parts answered by the native HTTP front (its hooks come with the HTTP/1.0 front).
  const native = config.hlsNativeParts && config.http10;
  const nativeReloads = native && config.hlsNativeReloads ? buildNativeReloads(hlsSource, room) : undefined;
  if (!nativeReloads) setHeldReloads(false);
  const nativeParts = native ? buildNativeParts(hlsSource, room, media, b.repos.streams, nativeReloads) : null;
  // Listeners behind nginx edges (docs/behaviour.md §12): counted from the edges' access log lines, with
  // the same timeout as a direct request to the same layer.
  const edgeLog = createEdgeLog(b, room, (id, name) => {
    const layer = media.get(id)?.layer(name);
    return layer && !layer.failed ? listenerTimeoutMs(layer) : null;
  });
  // The Icecast port serves listeners with the very `/listen` handler (docs/icecast.md).
  const kept = keepProgressive(http);
  const streams = b.repos.streams;
  const listen = registerListenRoutes(kept.http, {
    media,
    listeners: room,
    identity: (id) => streams.getAny(id),
    maxConnections: config.limits.listenMaxConnections,
    maxConnectionsPerIp: config.limits.listenMaxConnectionsPerIp,
    log: b.log,
    limits: b.limits,
    now: b.now,
    shared,
    counts: mainCounts,
  });
  const listenHandler = kept.handler('/listen/:file');
  if (!listenHandler) throw new Error('the /listen/:file route was not registered');
  const icecastListeners = icecastListening({
    handler: () => listenHandler,
    row: (id) => streams.getAny(id),
    onAir: () => streams.allOnAir(),
    layer: (id) => {
      const hub = media.get(id);
      return hub && !hub.ended && hub.top.ready ? { kbps: hub.top.o.kbps } : null;
    },
    stats: (id) => {
      const s = room.registry.stats(id);
      return { listeners: s.listenerCount, peak: s.peakListenerCount };
    },
    icecastUrl: () => b.listening.urls().icecastUrl,
    now: b.now,
  });
  const whep = registerWhep({ http, media, registry: room.registry, tokens: room.tokens, access: room.access, trusted: room.trusted, config, log: b.log.child('webrtc'), urls: b.listening.urls, limits: b.limits, fanout: rtpFanoutAvailable ? () => new RtpFanout() : null });
  const whip = registerWhip({ http, ingest: whipIngest, tokens: new PublishTokens(b.nodeSecret, b.now), trusted: room.trusted, config, log: b.log.child('whip'), limits: b.limits });
  const features: Feature[] = [];
  if (nativeParts) features.push({ close: () => nativeParts.close() });
  if (nativeReloads) {
    features.push({
      close: () => {
        setHeldReloads(false);
        nativeReloads.close();
      },
    });
  }
  if (edgeLog) features.push({ close: () => edgeLog.close() });
  features.push(listen, { close: () => whep.close() }, { close: () => whip.close() });
  return { hlsSource, mainCounts, edgeLog, listen, icecastListeners, whep, whip, features };
}

/** The store of public LL-HLS parts in the native HTTP front (docs/http.md "Media objects answered in native code"), watching every hub opened. */
function buildNativeParts(source: HubSource, room: Listeners, media: MediaRegistry, streams: StreamsRepo, reloads: NativeReloads | undefined): NativeParts {
  const parts = new NativeParts({
    store: { put: putHttpObject, delete: deleteHttpObject },
    source,
    isPublic: (id) => {
      const p = room.access.policy(id);
      return p !== null && p.playback !== 'token';
    },
    current: (id) => media.get(id),
    head: publicPartHead(nativeRequestIdPrefix),
    changes: (fn) => streams.onChange(fn),
    reloads,
  });
  media.onOpen((hub) => parts.watch(hub));
  return parts;
}

/**
 * Blocking reloads of public LL-HLS layers held in the native HTTP front (docs/http.md "Blocking
 * reloads held in native code"), counted into the node's held-request caps and sessions. The front
 * holds nothing when its cells are refused.
 */
function buildNativeReloads(source: HubSource, room: Listeners): NativeReloads | undefined {
  const caps = room.held.nativeCaps();
  if (!setHeldReloadListeners(room.registry.countCell, MAX_LISTENERS) || !setHeldReloads(true, caps)) return undefined;
  return new NativeReloads({
    front: { put: putHeldReload, delete: deleteHeldReload, putCells: putHeldReloadCells, drain: drainHeldReloads },
    source,
    access: room.access,
    cellsOf: caps.cellsOf,
    requestIdPrefix: nativeRequestIdPrefix,
  });
}

/**
 * Starts the HTTP worker threads (`SKYLARK_HTTP_THREADS` > 1) on the main thread's host:port
 * (SO_REUSEPORT); what they do not serve comes to the main thread over its private unix socket
 * `at.socketPath`. `at.workers`: the process's running workers.
 * @returns null with one thread
 */
export async function startDeliveryThreads(b: Base, room: Listeners, media: MediaRegistry, d: Delivery, at: { port: number; socketPath: string; workers: HttpWorkers }): Promise<RunningThreads | null> {
  const { config } = b;
  if (config.httpThreads <= 1) return null;
  return startHttpThreads({
    count: config.httpThreads,
    host: config.httpHost,
    port: at.port,
    socketPath: at.socketPath,
    workers: at.workers,
    media,
    source: d.hlsSource,
    registry: room.registry,
    policy: (id) => room.access.policy(id),
    changes: (fn) => b.repos.streams.onChange(fn),
    listen: d.listen,
    log: b.log.child('http-threads'),
    limits: b.limits,
    init: {
      nodeSecret: b.nodeSecret,
      trustedProxies: config.trustedProxies,
      maxJsonBodyBytes: config.maxJsonBodyBytes,
      logLevel: config.logLevel,
      heldMemory: room.held.memory,
      httpMaxHeld: config.limits.httpMaxHeld,
      httpMaxHeldPerIp: config.limits.httpMaxHeldPerIp,
      listenMaxConnections: config.limits.listenMaxConnections,
      listenMaxConnectionsPerIp: config.limits.listenMaxConnectionsPerIp,
      wakeIntervalUs: config.http10 ? config.httpWakeIntervalUs : 0,
      wakeMinConnections: config.httpWakeMinConnections,
    },
  });
}
