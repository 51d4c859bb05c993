/**
 * Composition root: `startServer` builds the planes in construction order — the base plane
 * (src/app/base.ts: database, repositories, secret, limits, outbox, HTTP server, Guard), the
 * listeners room and the control services (src/app/delivery.ts, src/app/control.ts: the stream
 * lifecycle counts listeners and hands recordings over from the start), publishing (src/app/live.ts),
 * the delivery rooms (HLS, listening, WHEP), the API and the other control features, then the
 * ingest servers — listens, starts the features and returns the running server. Nothing is set
 * late: every dependency is given at construction. `startServer` is what `skylark serve` and the
 * tests run.
 */
import type { Config, PublicUrls } from './base/config.js';
import { resolvePublicUrls } from './base/config.js';
import type { Database } from './base/db/database.js';
import type { Outbox } from './base/outbox.js';
import type { Guard } from './base/auth/guard.js';
import type { Feature } from './base/feature.js';
import type { Logger } from './base/logger.js';
import type { Limits } from './base/limits/limits.js';
import { HTTP_LIBRARY_BUILD, HTTP_LIBRARY_OBJECT, type HttpServer } from './base/http/server.js';
import { Http10Front, adoptHttp10Connection } from './base/http/http10.js';
import { cidrMatcher } from './base/auth/ratelimit/client-ip.js';
import { httpFrontStatus, installHttpFront } from './live/native/http-front.js';
import type { Publishing } from './live/ingest/publishing.js';
import type { AccountsService } from './control/services/accounts.js';
import type { EdgeLogReceiver } from './delivery/listeners/edge-log.js';
import { assertPortFree } from './base/http/port-probe.js';
import { freePort, privateSocketPath, type RunningThreads, type ThreadCounts, type WatchedMediaRegistry } from './delivery/threads/index.js';
export { stopAllHttpThreads } from './delivery/threads/index.js';
import { buildBase, type Base } from './app/base.js';
import { buildFallbackCache, buildIngestServers, buildPublishing, type IngestServers } from './app/live.js';
import { buildDelivery, buildListenersRoom, startDeliveryThreads, type Delivery } from './app/delivery.js';
import { buildServices, buildStreamsService, mountControl, serviceFeatures, type Services } from './app/control.js';
import type { Listeners } from './delivery/listeners/feature.js';
import { ListeningCell, mountOperations } from './app/operate.js';
import { buildCatchUp } from './app/catch-up.js';
import type { NodeMetrics } from './base/metrics/node-metrics.js';

/** A running server. Ports as bound. */
export interface RunningServer {
  httpPort: number;
  rtmpPort: number;
  /** The Icecast source ingest port as bound. */
  icecastPort: number;
  /** The edge log receiver's UDP port as bound (docs/behaviour.md §12), or null when it is off. */
  edgeLogPort: number | null;
  /** The edge log receiver (its counts: tests, diagnostics), or null when it is off. */
  edgeLog: EdgeLogReceiver | null;
  urls: PublicUrls;
  db: Database;
  outbox: Outbox;
  accounts: AccountsService;
  /** Every service (tests and diagnostics). */
  services: Services;
  /** The HTTP server (its routes, observed responses: tests). */
  http: HttpServer;
  guard: Guard;
  /** Counts of the node's limits hit (docs/behaviour.md §13). */
  limits: Limits;
  /** The metrics `GET /metrics` renders (docs/metrics.md; tests, benches). */
  metrics: NodeMetrics;
  /** The node secret (32 bytes; tests sign listener tokens with it). */
  nodeSecret: Buffer;
  /** Publishers and the live state machine (ingest). */
  ingest: Publishing;
  /** Live listeners of a stream: every protocol (docs/behaviour.md §4). */
  listenerCount(streamId: string): number;
  /** Threads serving HTTP, the main thread included (`SKYLARK_HTTP_THREADS`). */
  httpThreads: number;
  /** Requests each HTTP thread answered so far (index 0: the main thread; tests and diagnostics). */
  threadCounts(): Promise<Map<number, ThreadCounts>>;
  /** Makes HTTP worker thread `index` (1, 2, …) throw an uncaught exception: tests check that it is replaced. */
  failHttpThread(index: number): void;
  /** Stops listening, ends timers and closes the database. */
  close(): Promise<void>;
}

/** Everything built, before listening. */
interface Built {
  base: Base;
  room: Listeners;
  services: Services;
  ingest: Publishing;
  delivery: Delivery;
  servers: IngestServers;
  /** The hubs of live streams (worker threads mirror them). */
  media: WatchedMediaRegistry;
  /** In start order (closed in reverse). */
  features: Feature[];
  metrics: NodeMetrics;
  /** The bound ports and threads, for `/readyz` and `/metrics`. */
  listening: ListeningCell;
}

/** What listening bound. */
interface Bound {
  httpPort: number;
  rtmpPort: number;
  icecastPort: number;
  edgeLogPort: number | null;
  threads: RunningThreads | null;
  http10: Http10Front;
  socket: ReturnType<typeof privateSocketPath>;
}

/**
 * Starts Skylark with `config`.
 * @throws Error when a port cannot be bound or the database cannot be opened.
 */
export async function startServer(config: Config, log: Logger, now: () => number = Date.now): Promise<RunningServer> {
  const built = build(config, log, now);
  const bound = await listenAll(built);
  const { base, services } = built;
  const urls = base.urls.resolve(resolvePublicUrls(config, bound.httpPort, bound.rtmpPort, bound.icecastPort));
  built.ingest.recover();
  for (const f of built.features) await f.start?.();
  return {
    httpPort: bound.httpPort,
    rtmpPort: bound.rtmpPort,
    icecastPort: bound.icecastPort,
    edgeLogPort: bound.edgeLogPort,
    edgeLog: built.delivery.edgeLog,
    urls,
    db: base.db,
    outbox: base.outbox,
    accounts: services.accounts,
    services,
    http: base.http,
    guard: base.guard,
    limits: base.limits,
    metrics: built.metrics,
    nodeSecret: base.nodeSecret,
    ingest: built.ingest,
    listenerCount: (id) => built.room.registry.listenerCount(id),
    httpThreads: config.httpThreads,
    async threadCounts() {
      const out = new Map<number, ThreadCounts>([[0, { ...built.delivery.mainCounts }]]);
      if (bound.threads) for (const [i, c] of await bound.threads.counts()) out.set(i, c);
      return out;
    },
    failHttpThread: (index) => bound.threads?.fail(index),
    close: () => closeAll(built, bound),
  };
}

/** Builds every plane in construction order; no route is added after `http.finish()`. */
function build(config: Config, log: Logger, now: () => number): Built {
  const base = buildBase(config, log, now);
  const room = buildListenersRoom(base);
  // The fallback's renditions: control tells it of episode audio gone, publishing plays from it.
  const fallbackCache = buildFallbackCache(base);
  const control = buildServices(base, room, (episodeId) => fallbackCache.forget(episodeId));
  const live = buildPublishing(base, control.lifecycle, fallbackCache);
  const services = buildStreamsService(base, control, room, live.ingest);
  const delivery = buildDelivery(base, room, live.media);
  const catchUp = buildCatchUp(base, room, live.media, delivery.hlsSource, (id, e) => control.lifecycle.onError(id, e));
  const controlFeatures = mountControl(base, services, room);
  const servers = buildIngestServers(base, live, control.lifecycle, delivery.icecastListeners);
  const listening = new ListeningCell();
  const metrics = mountOperations({ base, room, media: live.media, icecast: servers.icecast, whep: delivery.whep, services, front: httpFrontStatus, listening });
  base.http.finish();
  // The play log and broadcasts stop after the listeners room (features stop in reverse): their last events count.
  const features = [{ close: () => fallbackCache.close() }, ...serviceFeatures(services), room, ...delivery.features, catchUp.feature, ...controlFeatures];
  return { base, room, services, ingest: live.ingest, delivery, servers, media: live.media, features, metrics, listening };
}

/**
 * Binds HTTP (and its private unix socket, the HTTP/1.0 front, the worker threads), RTMP, the
 * Icecast port and the edge log receiver; on a failure closes what was opened and the database.
 * @throws Error when a port cannot be bound
 */
async function listenAll(b: Built): Promise<Bound> {
  const { config, log, http } = b.base;
  const { rtmp, icecast } = b.servers;
  const edgeLog = b.delivery.edgeLog;
  let threads: RunningThreads | null = null;
  // The main thread's private unix socket: requests forwarded by worker threads and by the HTTP/1.0 front.
  const socket = privateSocketPath();
  const http10 = new Http10Front({
    socketPath: socket.socketPath,
    maxConnections: config.limits.listenMaxConnections,
    maxConnectionsPerAddress: config.limits.listenMaxConnectionsPerIp,
    trusted: cidrMatcher(config.trustedProxies),
    headTimeoutMs: config.limits.http10HeadTimeoutMs,
    idleTimeoutMs: config.limits.http10IdleTimeoutMs,
    limits: b.base.limits,
    log: log.child('http10'),
  });
  try {
    // One server per port: another process on any of them stops this start (docs/behaviour.md §1).
    await assertPortFree('HTTP', config.httpHost, config.httpPort);
    await assertPortFree('RTMP', config.rtmpHost, config.rtmpPort);
    await assertPortFree('Icecast', config.icecastHost, config.icecastPort);
    const httpPort = await listenHttp(http, config.httpHost, config.httpPort, config.httpThreads > 1);
    await http.listenUnix(socket.socketPath);
    http10.attach(httpPort);
    if (config.http10) installHttpFrontOnce(config.limits.listenSendBufferBytes, log);
    threads = await startDeliveryThreads(b.base, b.room, b.media, b.delivery, httpPort, socket.socketPath);
    const rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
    const icecastPort = await icecast.listen(config.icecastHost, config.icecastPort);
    const edgeLogPort = edgeLog ? await edgeLog.listen(config.edgeLogHost!, config.edgeLogPort!) : null;
    b.listening.resolve({ http: httpPort, rtmp: rtmpPort, icecast: icecastPort }, threads);
    return { httpPort, rtmpPort, icecastPort, edgeLogPort, threads, http10, socket };
  } catch (e) {
    await edgeLog?.close();
    await threads?.close();
    http10.close();
    http.close();
    socket.cleanup();
    await rtmp.close().catch(() => {});
    await icecast.close().catch(() => {});
    b.base.writes.close();
    b.base.db.close();
    throw e;
  }
}

/** Stops listening, then every feature in reverse order (each even when another fails), then the database. */
async function closeAll(b: Built, bound: Bound): Promise<void> {
  const { http, log, writes, db } = b.base;
  b.listening.close();
  // Worker threads first: each closes its connections and sends its last session batch.
  await bound.threads?.close();
  bound.http10.close();
  http.close(); // closes every HTTP connection too (idle keep-alive, held LL-HLS reloads)
  bound.socket.cleanup();
  await b.servers.rtmp.close();
  await b.servers.icecast.close();
  await b.ingest.close(); // codec processes stop; recordings are closed and kept for the next run
  let failure: unknown = null;
  for (const f of [...b.features].reverse()) {
    try {
      await f.close?.();
    } catch (e) {
      failure ??= e;
      log.error('a feature failed to stop', { err: (e as Error).message });
    }
  }
  writes.drain();
  db.close();
  if (failure) throw failure;
}

/** The outcome of installing the HTTP/1.0 front's hooks ('' = installed), once per process. */
let httpFrontOutcome: string | null = null;

/**
 * Installs the native hooks of the HTTP/1.0 front (docs/http.md "HTTP/1.0") the first time a
 * server starts in this process: HTTP/1.0 connections then reach the front of the port they came
 * to (src/base/http/http10.ts), and `/listen/` connections get `sendBufferBytes` of kernel send buffer.
 * A failure is logged (HTTP/1.0 requests are then refused as by the bare HTTP server).
 */
function installHttpFrontOnce(sendBufferBytes: number, log: Logger): void {
  if (httpFrontOutcome === null) httpFrontOutcome = installHttpFront(HTTP_LIBRARY_OBJECT, ['/listen/'], sendBufferBytes, adoptHttp10Connection);
  if (httpFrontOutcome !== '') log.warn('HTTP/1.0 requests cannot be answered: the HTTP front could not be installed', { reason: httpFrontOutcome });
  else log.info('HTTP front hooks installed', { ...httpFrontStatus(), library: HTTP_LIBRARY_BUILD });
}

/**
 * Listens on host:port. With worker threads (`shared`), port 0 is resolved to a free port first and
 * bound explicitly, so the workers can bind it too; a port taken in between is picked again.
 * @returns the bound port. @throws Error when the port is taken
 */
async function listenHttp(http: HttpServer, host: string, port: number, shared: boolean): Promise<number> {
  if (!shared || port !== 0) return http.listen(host, port);
  for (let attempt = 1; ; attempt++) {
    try {
      return await http.listen(host, await freePort(host));
    } catch (e) {
      if (attempt >= 5) throw e;
    }
  }
}
