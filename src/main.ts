/**
 * Composition root: opens the database, builds the repositories and services, the HTTP server
 * with the delivery rooms (HLS, WHEP, feeds and episode audio), the API (`mountApi`, once) and the
 * other feature modules (OAuth, idempotency, the dashboard), the background features (listeners,
 * the publication scheduler, webhook delivery) and the RTMP ingest server, then starts listening.
 * `startServer` is what `skylark serve` and the tests run.
 */
import type { Config, PublicUrls } from './base/config.js';
import { resolvePublicUrls } from './base/config.js';
import { openDatabase, SERVER_BUSY_TIMEOUT_MS, type Database } from './base/db/database.js';
import { MIGRATIONS } from './base/db/migrations.js';
import { AccountsRepo } from './base/db/accounts-repo.js';
import { StreamsRepo } from './base/db/streams-repo.js';
import { EventsRepo, EventsQuery } from './base/db/events-repo.js';
import { PodcastsRepo } from './base/db/podcasts-repo.js';
import { WebhooksRepo } from './base/db/webhooks-repo.js';
import { OAuthRepo } from './base/db/oauth-repo.js';
import { Outbox } from './base/outbox.js';
import { loadNodeSecret } from './base/auth/secrets.js';
import { Guard } from './base/auth/guard.js';
import { AccountsService } from './control/services/accounts.js';
import { StreamsService } from './control/services/streams.js';
import { StreamLifecycle } from './control/services/lifecycle.js';
import { PlayLog } from './control/services/play-log.js';
import { TracksRepo } from './base/db/tracks-repo.js';
import { BroadcastsRepo } from './base/db/broadcasts-repo.js';
import { BroadcastLog } from './control/services/broadcasts.js';
import { WriteRetry } from './control/services/write-retry.js';
import { PodcastsService, feedUrlOf, recordingPodcastCheck, type FeedChanged } from './control/services/podcasts.js';
import { EpisodesService } from './control/services/episodes.js';
import { PublishScheduler } from './control/services/scheduler.js';
import { WebhooksService } from './control/services/webhooks.js';
import { EventsService } from './control/services/events.js';
import { MediaStore } from './control/episode-audio/store.js';
import { FfmpegPool, ffmpegPath } from './base/ffmpeg.js';
import { LoudnessAnalyzer } from './control/episode-audio/loudness.js';
import { LoudnessRepo } from './base/db/loudness-repo.js';
import { LoudnessService } from './control/services/loudness.js';
import { Publishing } from './live/ingest/publishing.js';
import { ICECAST_DEFAULTS, IcecastServer } from './live/ingest/icecast-server.js';
import { INGEST_DEFAULTS, RtmpServer } from './live/ingest/rtmp-server.js';
import path from 'node:path';
import { HTTP_LIBRARY_OBJECT, HttpServer } from './base/http/server.js';
import { Http10Front, adoptHttp10Connection } from './base/http/http10.js';
import { installHttpFront } from './live/native/http-front.js';
import { mountApi } from './control/api/index.js';
import { FeedService } from './control/feed/feed-service.js';
import { registerFeedRoutes } from './control/feed/routes.js';
import { createDownloads } from './control/downloads/feature.js';
import type { Logger } from './base/logger.js';
import { Limits } from './base/limits/limits.js';
import type { AppContext, Feature } from './context.js';
import { createEdgeLog, createListeners } from './delivery/listeners/feature.js';
import type { EdgeLogReceiver } from './delivery/listeners/edge-log.js';
import { listenerTimeoutMs, registerHlsRoutes } from './delivery/hls/routes.js';
import { HubSource } from './delivery/hls/source.js';
import { WatchedMediaRegistry, freePort, privateSocketPath, startHttpThreads, type RunningThreads, type ThreadCounts } from './delivery/threads/index.js';
export { stopAllHttpThreads } from './delivery/threads/index.js';
import { registerListenRoutes } from './delivery/progressive/routes.js';
import { icecastListening, keepProgressive } from './delivery/progressive/icecast-port.js';
import { registerWhep } from './delivery/webrtc/whep.js';
import { registerOAuth } from './control/oauth/routes.js';
import { registerIdempotency } from './control/api/idempotency/feature.js';
import { createDelivery, type Delivery } from './control/webhooks/index.js';
import { FeedNotifications, watchBroadcasts } from './control/webhooks/feed-notify.js';
import { registerDashboard } from './control/dashboard/feature.js';

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
  /** The shared context the feature modules were built with (tests reach services through it). */
  context: AppContext;
  /** Threads serving HTTP, the main thread included (`SKYLARK_HTTP_THREADS`). */
  httpThreads: number;
  /** Requests each HTTP thread answered so far (index 0: the main thread; tests and diagnostics). */
  threadCounts(): Promise<Map<number, ThreadCounts>>;
  /** Makes HTTP worker thread `index` (1, 2, …) throw an uncaught exception: tests check that it is replaced. */
  failHttpThread(index: number): void;
  /** Stops listening, ends timers and closes the database. */
  close(): Promise<void>;
}

/**
 * Starts Skylark with `config`.
 * @throws Error when a port cannot be bound or the database cannot be opened.
 */
export async function startServer(config: Config, log: Logger, now: () => number = Date.now): Promise<RunningServer> {
  const db = openDatabase(config.dataDir, MIGRATIONS, { busyTimeoutMs: SERVER_BUSY_TIMEOUT_MS });
  const nodeSecret = loadNodeSecret(config.dataDir);
  const accountsRepo = new AccountsRepo(db);
  const streamsRepo = new StreamsRepo(db);
  const podcastsRepo = new PodcastsRepo(db);
  const webhooksRepo = new WebhooksRepo(db);
  const outbox = new Outbox(new EventsRepo(db), now);
  const threadCount = config.httpThreads;
  const media = new WatchedMediaRegistry();
  const limits = new Limits(log.child('limits'), now);
  let urls: PublicUrls | null = null;
  const getUrls = () => {
    if (!urls) throw new Error('public URLs are not known before listening');
    return urls;
  };

  // Set once the listeners room exists (built below): events and stream objects carry the count.
  let listenerCount: (streamId: string) => number = () => 0;
  const writes = new WriteRetry(db, log.child('db'), limits, SERVER_BUSY_TIMEOUT_MS);
  const playLog = new PlayLog({ repo: new TracksRepo(db), outbox, writes, log: log.child('live') });
  // Broadcasts (docs/streams.md): each stretch of a stream from live to the end of its reconnect window.
  const broadcasts = new BroadcastLog({ repo: new BroadcastsRepo(db), outbox, writes, log: log.child('live'), now });
  const lifecycle = new StreamLifecycle({ db, streams: streamsRepo, outbox, log: log.child('live'), urls: getUrls, writes, listenerCount: (id) => listenerCount(id), playLog, broadcasts, nowPlayingMinIntervalMs: config.limits.nowPlayingMinIntervalMs, now });
  const ingest = new Publishing({
    port: lifecycle,
    media,
    log: log.child('live'),
    limits,
    now,
    options: {
      segmentDurationMs: config.segmentDurationMs,
      partTargetMs: Math.min(config.partDurationMs, config.segmentDurationMs),
      windowSegments: config.liveWindowSegments,
      abrLadder: config.abrLadder,
      ffmpeg: ffmpegPath,
      recordingsDir: path.join(config.dataDir, 'recordings'),
      maxAudioFrameBytes: config.limits.maxAudioFrameBytes,
      segmentBytesFactor: config.limits.segmentBytesFactor,
      minFreeDiskBytes: config.limits.minFreeDiskBytes,
      nowPlayingMinIntervalMs: config.limits.nowPlayingMinIntervalMs,
    },
  });

  // Services (docs/behaviour.md §2, §5, §6): what the API, the dashboard and the feed call.
  const accounts = new AccountsService(accountsRepo, now);
  const streams = new StreamsService({
    streams: streamsRepo,
    accounts: accountsRepo,
    nodeSecret,
    urls: getUrls,
    live: { listenerCount: (id) => listenerCount(id), endNow: (id) => ingest.endNow(id), disconnectPublisher: (id) => ingest.disconnectPublisher(id), nowPlaying: (id, np) => ingest.nowPlaying(id, np) },
    now,
    checkRecordingPodcast: recordingPodcastCheck(podcastsRepo),
    playLog,
    broadcasts,
  });
  // Podcasts: every change of a schedule pokes the publication scheduler (a Feature, started below).
  const podcastsLog = log.child('podcasts');
  const episodeMedia = new MediaStore(config.dataDir);
  const scheduler = new PublishScheduler({ nextDueAt: () => podcastsRepo.nextDueAt(), publishDue: () => episodes.publishDue(), now, log: podcastsLog });
  const poke = () => scheduler.poke();
  // Episode loudness (docs/podcasts.md "Loudness"): measured and normalised after storing, by capped low-priority FFmpeg processes.
  const loudnessBin = ffmpegPath();
  const loudnessPool = loudnessBin ? new FfmpegPool({ bin: loudnessBin, concurrency: config.limits.loudnessConcurrency }) : null;
  const loudness = loudnessPool
    ? new LoudnessService({ repo: new LoudnessRepo(db), media: episodeMedia, analyzer: new LoudnessAnalyzer(loudnessPool), pool: loudnessPool, concurrency: config.limits.loudnessConcurrency, now, log: podcastsLog, audioReplaced: (...a) => downloads.audioPlaced(...a) })
    : undefined;
  // Feed-update notifications (docs/podcasts.md): the WebSub hub and the notifiers, delivered by the webhook engine.
  const feedNotes = new FeedNotifications({ repo: webhooksRepo, hubUrl: config.websubHub, notify: config.feedNotifyUrls, now });
  const feedChanged: FeedChanged = (accountId, podcastId, change) => feedNotes.changed(accountId, podcastId, feedUrlOf(getUrls(), podcastId), change);
  const podcasts = new PodcastsService({ repo: podcastsRepo, urls: getUrls, now, onScheduleChange: poke, loudness, feedChanged });
  // Podcast download counting (docs/podcasts.md "Download counting"): observes episode audio bytes, writes in batches.
  const downloads = createDownloads({ db, podcasts: podcastsRepo, media: episodeMedia, trustedProxies: config.trustedProxies, log, now, enabled: config.downloadCounting });
  const episodes = new EpisodesService({ repo: podcastsRepo, outbox, media: episodeMedia, urls: getUrls, now, onScheduleChange: poke, audioPlaced: downloads.audioPlaced, loudness, feedChanged });
  lifecycle.setRecordingHandler(
    (r) => episodes.createFromRecording(r),
    (streamId) => episodes.hasRecordingOf(streamId),
  );
  const feed = new FeedService({ repo: podcastsRepo, recordingStreams: (id) => streamsRepo.recordingInto(id), urls: getUrls, now, hubUrl: config.websubHub });
  // Webhooks: a test event or a redelivery wakes the delivery engine (created below) at once.
  let delivery: Delivery | null = null;
  const wake = (id: string) => delivery?.engine.wake(id);
  const webhooks = new WebhooksService({ db, repo: webhooksRepo, outbox, nodeSecret, allowPrivate: config.webhooksAllowPrivate, wake, now });
  const events = new EventsService({ db, events: new EventsQuery(db), webhooks: webhooksRepo, wake, now });

  const http = new HttpServer({ maxJsonBodyBytes: config.maxJsonBodyBytes, log: log.child('http'), limits });
  const guard = new Guard(accountsRepo, { oauth: new OAuthRepo(db), nodeSecret, urls: getUrls, now, trustedProxies: config.trustedProxies });
  const context: AppContext = {
    config,
    db,
    nodeSecret,
    accounts: accountsRepo,
    streams: streamsRepo,
    outbox,
    http,
    guard,
    ingest,
    listenerCount: (id) => listenerCount(id),
    log,
    limits,
    urls: getUrls,
    now,
  };

  // The play log stops after the listeners room (features stop in reverse): their last events count.
  const features: Feature[] = [{ close: () => playLog.close() }, { close: () => broadcasts.close() }];
  const listeners = createListeners(context);
  features.push(listeners);
  listenerCount = (id) => listeners.registry.listenerCount(id);
  listeners.service.setBroadcasts((id) => broadcasts.stats(id));
  playLog.setListeners({
    countries: (id) => listeners.registry.active(id).map((s) => s.country),
    settle: () => listeners.registry.flush(),
  });

  // Delivery rooms: HLS, WebRTC (WHEP), the podcast feeds and episode audio.
  // With worker threads, playlists are rendered into shared memory (once per version, for every thread).
  const hlsSource = new HubSource(media, threadCount > 1);
  const mainCounts: ThreadCounts = { hls: 0, listen: 0, forwarded: 0 };
  registerHlsRoutes(http, hlsSource, { access: listeners.access, hold: listeners.held, served: mainCounts });
  // Listeners behind nginx edges (docs/behaviour.md §12): counted from the edges' access log lines, with
  // the same timeout as a direct request to the same layer.
  const edgeLog = createEdgeLog(context, listeners, (id, name) => {
    const layer = media.get(id)?.layer(name);
    return layer && !layer.failed ? listenerTimeoutMs(layer) : null;
  });
  if (edgeLog) features.push({ close: () => edgeLog.close() });
  // The Icecast port serves listeners with the very `/listen` handler (docs/icecast.md).
  const keptListen = keepProgressive(http);
  const listen = registerListenRoutes(keptListen.http, media, { ctx: context, listeners, shared: threadCount > 1, counts: mainCounts });
  const listenHandler = keptListen.handler('/listen/:file');
  if (!listenHandler) throw new Error('the /listen/:file route was not registered');
  const icecastListeners = icecastListening({
    handler: () => listenHandler,
    row: (id) => streamsRepo.getAny(id),
    live: () => streamsRepo.allLive(),
    layer: (id) => {
      const hub = media.get(id);
      return hub && !hub.ended && hub.top.ready ? { kbps: hub.top.o.kbps } : null;
    },
    stats: (id) => {
      const s = listeners.registry.stats(id);
      return { listeners: s.listenerCount, peak: s.peakListenerCount };
    },
    icecastUrl: () => getUrls().icecastUrl,
    now,
  });
  features.push(listen);
  const whep = registerWhep({ http, media, registry: listeners.registry, tokens: listeners.tokens, access: listeners.access, trusted: listeners.trusted, config, log: log.child('webrtc'), urls: getUrls, limits });
  features.push({ close: () => whep.close() });
  registerFeedRoutes(http, { feed, repo: podcastsRepo, media: episodeMedia, log: podcastsLog, onAudio: downloads.onAudio });
  features.push(downloads);

  // The API (`/v2`): every resource from one list (src/control/api/index.ts).
  mountApi({
    http,
    guard,
    urls: getUrls,
    now,
    log,
    limits,
    accounts,
    streams,
    listeners: listeners.service,
    podcasts,
    episodes,
    podcastStats: downloads.stats,
    episodeMedia,
    uploads: { maxBytes: config.maxUploadBytes, minFreeDiskBytes: config.limits.minFreeDiskBytes },
    webhooks,
    events,
  });
  features.push(registerIdempotency(context));
  features.push(registerOAuth(context));
  features.push({ start: () => episodeMedia.clearTemp() }); // uploads cut off by the last shutdown
  features.push(scheduler);
  if (loudness) features.push(loudness);
  features.push({ start: () => void feedNotes.forgetOthers() }); // pings to destinations no longer configured
  delivery = createDelivery({ db, repo: webhooksRepo, outbox, log: log.child('webhooks'), now, allowPrivate: config.webhooksAllowPrivate, secretOf: (row) => webhooks.secretOf(row), internal: feedNotes.destinations });
  features.push(delivery);
  feedNotes.wake = (id) => delivery?.engine.wake(id);
  const served = (podcastId: string) => (podcastsRepo.getPodcastAny(podcastId)?.status ?? 'draft') !== 'draft';
  features.push({ close: watchBroadcasts(outbox, served, (fn) => podcastsRepo.tx(fn), feedChanged) });
  features.push(registerDashboard(context, { streams, podcasts: { podcasts, episodes, stats: downloads.stats }, listeners: listeners.registry, webhooks: { webhooks, events } }));
  http.finish();

  const rtmp = new RtmpServer(ingest, log.child('rtmp'), { ...INGEST_DEFAULTS, mergeReadsMs: config.ingestMergeMs, limitSettings: config.limits, limits });
  const icecast = new IcecastServer(ingest, lifecycle, log.child('icecast'), limits, {
    ...ICECAST_DEFAULTS,
    maxConnections: config.limits.icecastMaxConnections,
    maxConnectionsPerIp: config.limits.icecastMaxConnectionsPerIp,
    maxAudioFrameBytes: config.limits.maxAudioFrameBytes,
    listenSendBufferBytes: config.limits.listenSendBufferBytes,
  }, icecastListeners);
  let httpPort: number;
  let rtmpPort: number;
  let icecastPort: number;
  let edgeLogPort: number | null = null;
  let threads: RunningThreads | null = null;
  // The main thread's private unix socket: requests forwarded by worker threads and by the HTTP/1.0 front.
  const socket = privateSocketPath();
  const http10 = new Http10Front({ socketPath: socket.socketPath, maxConnections: config.limits.listenMaxConnections, log: log.child('http10') });
  try {
    httpPort = await listenHttp(http, config.httpHost, config.httpPort, threadCount > 1);
    await http.listenUnix(socket.socketPath);
    http10.attach(httpPort);
    if (config.http10) installHttpFrontOnce(config.limits.listenSendBufferBytes, log);
    if (threadCount > 1) {
      // Worker threads on the same host:port (SO_REUSEPORT); what they do not serve comes to the
      // main thread over its private unix socket.
      threads = await startHttpThreads({
        count: threadCount,
        host: config.httpHost,
        port: httpPort,
        socketPath: socket.socketPath,
        media,
        source: hlsSource,
        registry: listeners.registry,
        policy: (id) => listeners.access.policy(id),
        listen,
        log: log.child('http-threads'),
        limits,
        init: {
          nodeSecret,
          trustedProxies: config.trustedProxies,
          maxJsonBodyBytes: config.maxJsonBodyBytes,
          logLevel: config.logLevel,
          heldMemory: listeners.held.memory,
          httpMaxHeld: config.limits.httpMaxHeld,
          httpMaxHeldPerIp: config.limits.httpMaxHeldPerIp,
          listenMaxConnections: config.limits.listenMaxConnections,
          listenMaxConnectionsPerIp: config.limits.listenMaxConnectionsPerIp,
        },
      });
    }
    rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
    icecastPort = await icecast.listen(config.icecastHost, config.icecastPort);
    if (edgeLog) edgeLogPort = await edgeLog.listen(config.edgeLogHost!, config.edgeLogPort!);
  } catch (e) {
    await edgeLog?.close();
    await threads?.close();
    http10.close();
    http.close();
    socket.cleanup();
    await rtmp.close().catch(() => {});
    await icecast.close().catch(() => {});
    writes.close();
    db.close();
    throw e;
  }
  urls = resolvePublicUrls(config, httpPort, rtmpPort, icecastPort);
  ingest.recover();
  for (const f of features) await f.start?.();

  return {
    httpPort,
    rtmpPort,
    icecastPort,
    edgeLogPort,
    edgeLog,
    urls,
    db,
    outbox,
    accounts,
    context,
    httpThreads: threadCount,
    async threadCounts() {
      const out = new Map<number, ThreadCounts>([[0, { ...mainCounts }]]);
      if (threads) for (const [i, c] of await threads.counts()) out.set(i, c);
      return out;
    },
    failHttpThread: (index) => threads?.fail(index),
    async close() {
      // Worker threads first: each closes its connections and sends its last session batch.
      await threads?.close();
      http10.close();
      http.close(); // closes every HTTP connection too (idle keep-alive, held LL-HLS reloads)
      socket.cleanup();
      await rtmp.close();
      await icecast.close();
      await ingest.close(); // codec processes stop; recordings are closed and kept for the next run
      // Every feature gets to stop and the database is closed even when one of them fails.
      let failure: unknown = null;
      for (const f of [...features].reverse()) {
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
    },
  };
}

/**
 * Listens on host:port. With worker threads (`shared`), port 0 is resolved to a free port first and
 * bound explicitly, so the workers can bind it too; a port taken in between is picked again.
 * @returns the bound port. @throws Error when the port is taken
 */
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
}

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
