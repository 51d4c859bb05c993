/**
 * Composition root: `startServer` builds the planes in plane order (docs/architecture.md "One
 * composition root") — base (src/app/base.ts: database, repositories, secret, limits, outbox, HTTP
 * server, Guard), live (src/app/live.ts: the fallback cache and publishing, whose port is the
 * stream lifecycle, bound once), delivery (src/app/delivery.ts: the listeners room, HLS, listening,
 * WHEP), control (src/app/control.ts: the services, the API and the other control features) —
 * then the ingest servers and the operator endpoints; listens, starts the features and returns the
 * running server. Nothing is set late: every dependency is given at construction; what is known
 * only once listening (ports, URLs, threads) is one handle, `Listening`, filled once by the
 * listening step. `startServer` is what `skylark serve` and the tests run.
 */
import type { Config, PublicUrls } from './base/config.js';
import type { Database } from './base/db/database.js';
import type { Outbox } from './base/outbox.js';
import type { Guard } from './base/auth/guard.js';
import type { Feature } from './base/background.js';
import type { Logger } from './base/logger.js';
import type { Limits } from './base/limits/limits.js';
import { HTTP_LIBRARY_BUILD, HTTP_LIBRARY_OBJECT, type HttpServer } from './base/http/server.js';
import { Http10Front, Http10Ports } from './base/http/http10.js';
import { isTrustedProxy, trustedProxies } from './base/http/client-address.js';
import { coalesceLoop, httpFrontStatus, installHttpFront } from './native/http-front.js';
import { trimAfterMajorGc, type GcTrimmer } from './native/memory.js';
import type { Publishing } from './live/ingest/publishing.js';
import type { AccountsService } from './control/services/accounts.js';
import type { EdgeLogReceiver } from './delivery/listeners/edge-log.js';
import { assertPortFree } from './base/http/port-probe.js';
import { HttpWorkers, freePort, privateSocketPath, type RunningThreads, type ThreadCounts } from './delivery/threads/index.js';
import type { MediaRegistry } from './live/media/registry.js';
import { buildBase, type Base } from './app/base.js';
import { buildFallbackCache, buildIngestServers, buildPublishing, ingestPortOf, type IngestServers } from './app/live.js';
import { buildDelivery, buildListenersRoom, startDeliveryThreads, type Delivery } from './app/delivery.js';
import { buildServices, buildStreamsService, mountControl, serviceFeatures, type Services } from './app/control.js';
import type { Listeners } from './delivery/listeners/room.js';
import { mountOperations } from './app/operate.js';
import { buildCatchUp, type CatchUp } from './app/catch-up.js';
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
  /** WHIP's counters (docs/behaviour.md "Go live over WHIP"; tests, benches). */
  whip: Delivery['whip'];
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
  media: MediaRegistry;
  /** In start order (closed in reverse). */
  features: Feature[];
  metrics: NodeMetrics;
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
export async function startServer(config: Config, log: Logger, now: () => number = Date.now, proc: ServerProcess = processServers()): Promise<RunningServer> {
  const built = build(config, log, now);
  const bound = await listenAll(built, proc);
  const { base, services } = built;
  const urls = base.listening.listened({ http: bound.httpPort, rtmp: bound.rtmpPort, icecast: bound.icecastPort }, bound.threads);
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
    whip: built.delivery.whip,
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

/**
 * Builds every plane in plane order — base, live, delivery, control — then the ingest servers and
 * the operator endpoints; no route is added after `http.finish()`.
 */
function build(config: Config, log: Logger, now: () => number): Built {
  const base = buildBase(config, log, now);
  // Live: the fallback's renditions and publishing, whose port is the stream lifecycle (control,
  // built below; ingest calls it only once the node runs).
  const fallbackCache = buildFallbackCache(base);
  const live = buildPublishing(base, ingestPortOf(() => control.lifecycle), fallbackCache);
  // Delivery: the listeners room, then the rooms that serve the hubs.
  const room = buildListenersRoom(base);
  const delivery = buildDelivery(base, room, live.media, live.whip);
  // Control: the services (told of episode audio gone, for the fallback's renditions), the streams
  // service over publishing, the API and the other control features.
  let catchUpKept: CatchUp['archive'] | undefined; // the catch-up archive, built below
  const control = buildServices(base, room, (episodeId) => fallbackCache.forget(episodeId), () => catchUpKept);
  const services = buildStreamsService(base, control, room, live.ingest);
  // Catch-up radio: the archive watches every hub; its addresses sit beside live HLS.
  const catchUp = buildCatchUp(base, room, live.media, delivery.hlsSource, (id, e) => control.lifecycle.onError(id, e), delivery.listen);
  catchUpKept = catchUp.archive;
  const controlFeatures = mountControl(base, services, room);
  // Live's doors, once what they answer to exists: the lifecycle and the Icecast port's listening side.
  const servers = buildIngestServers(base, live, control.lifecycle, delivery.icecastListeners);
  const metrics = mountOperations({ base, room, media: live.media, icecast: servers.icecast, whep: delivery.whep, services, front: httpFrontStatus });
  base.http.finish();
  // The play log and broadcasts stop after the listeners room (features stop in reverse): their last events count.
  const features = [{ close: () => fallbackCache.close() }, ...serviceFeatures(services), room, ...delivery.features, catchUp.feature, ...controlFeatures];
  return { base, room, services, ingest: live.ingest, delivery, servers, media: live.media, features, metrics };
}

/**
 * Binds HTTP (and its private unix socket, the HTTP/1.0 front, the worker threads), RTMP, the
 * Icecast port and the edge log receiver; on a failure closes what was opened and the database.
 * @throws Error when a port cannot be bound
 */
async function listenAll(b: Built, proc: ServerProcess): Promise<Bound> {
  const { config, log, http } = b.base;
  const { rtmp, icecast } = b.servers;
  const edgeLog = b.delivery.edgeLog;
  let threads: RunningThreads | null = null;
  // The main thread's private unix socket: requests forwarded by worker threads and by the HTTP/1.0 front.
  const socket = privateSocketPath();
  const proxies = trustedProxies(config.trustedProxies);
  const http10 = new Http10Front({
    ports: proc.http10,
    socketPath: socket.socketPath,
    maxConnections: config.limits.listenMaxConnections,
    maxConnectionsPerAddress: config.limits.listenMaxConnectionsPerIp,
    trusted: (ip) => isTrustedProxy(proxies, ip),
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
    if (config.http10 && proc.installHttpFront(config.limits.listenSendBufferBytes, log)) coalesceLoop(config.httpWakeIntervalUs, config.httpWakeMinConnections);
    proc.trimAfterGc();
    threads = await startDeliveryThreads(b.base, b.room, b.media, b.delivery, { port: httpPort, socketPath: socket.socketPath, workers: proc.workers });
    const rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
    const icecastPort = await icecast.listen(config.icecastHost, config.icecastPort);
    const edgeLogPort = edgeLog ? await edgeLog.listen(config.edgeLogHost!, config.edgeLogPort!) : null;
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
  b.base.listening.close();
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

/**
 * What every server of a process shares (several run in one process as the tests run them): the
 * native HTTP front's hooks, which are process-wide (installed once; they hand each HTTP/1.0
 * connection to the front of the port it reached, `http10`), and the HTTP worker threads, which
 * the process must stop before it exits (`workers`). `skylark serve` makes one and passes it to
 * `startServer`; a caller that passes none shares `processServers()`.
 */
export class ServerProcess {
  /** The HTTP/1.0 fronts by local port. */
  readonly http10 = new Http10Ports();
  /** The HTTP worker threads not ended yet. */
  readonly workers = new HttpWorkers();
  /** The outcome of installing the HTTP front's hooks ('' = installed), or null before the first try. */
  private frontOutcome: string | null = null;
  /** Trims the C heap after major collections (src/native/memory.ts), once started. */
  trimmer: GcTrimmer | null = null;

  /** Starts giving freed C heap back to the kernel after major collections (docs/decisions.md "Giving freed memory back"), once per process. */
  trimAfterGc(): void {
    this.trimmer ??= trimAfterMajorGc();
  }

  /**
   * Installs the native hooks of the HTTP/1.0 front (docs/http.md "HTTP/1.0") the first time a
   * server of this process starts: HTTP/1.0 connections then reach the front of the port they came
   * to (src/base/http/http10.ts), and `/listen/` connections get `sendBufferBytes` of kernel send
   * buffer. A failure is logged (HTTP/1.0 requests are then refused as by the bare HTTP server).
   * @returns whether the hooks are installed
   */
  installHttpFront(sendBufferBytes: number, log: Logger): boolean {
    this.frontOutcome ??= installHttpFront(HTTP_LIBRARY_OBJECT, ['/listen/'], sendBufferBytes, this.http10.adopt);
    if (this.frontOutcome !== '') log.warn('HTTP/1.0 requests cannot be answered: the HTTP front could not be installed', { reason: this.frontOutcome });
    else log.info('HTTP front hooks installed', { ...httpFrontStatus(), library: HTTP_LIBRARY_BUILD });
    return this.frontOutcome === '';
  }
}

let shared: ServerProcess | null = null;
/** The `ServerProcess` of servers started without one (the native hooks exist once per process). */
export function processServers(): ServerProcess {
  return (shared ??= new ServerProcess());
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
