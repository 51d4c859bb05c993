/**
 * Composition root: opens the database, wires services, the HTTP server (API + HLS) and the RTMP
 * ingest server, registers the feature modules and starts listening. `startServer` is what
 * `skylark serve` and the tests run.
 */
import type { Config, PublicUrls } from './config/config.js';
import { resolvePublicUrls } from './config/config.js';
import { openDatabase, SERVER_BUSY_TIMEOUT_MS, type Database } from './db/database.js';
import { MIGRATIONS } from './db/migrations.js';
import { AccountsRepo } from './db/accounts-repo.js';
import { StreamsRepo } from './db/streams-repo.js';
import { EventsRepo } from './db/events-repo.js';
import { Outbox } from './events/outbox.js';
import { loadNodeSecret } from './auth/secrets.js';
import { AccountsService } from './services/accounts.js';
import { StreamsService } from './services/streams.js';
import { StreamLifecycle } from './services/lifecycle.js';
import { WriteRetry } from './services/write-retry.js';
import { MediaRegistry } from './media/hub.js';
import { ffmpegPath } from './media/ffmpeg.js';
import { Publishing } from './ingest/publishing.js';
import path from 'node:path';
import { HttpServer } from './http/server.js';
import { Guard } from './auth/guard.js';
import { OAuthRepo } from './db/oauth-repo.js';
import { registerStreamRoutes } from './api/streams/routes.js';
import { INGEST_DEFAULTS, RtmpServer } from './ingest/rtmp-server.js';
import type { Logger } from './log/logger.js';
import { Limits } from './limits/limits.js';
import type { AppContext, Feature } from './context.js';
// [features:imports] — one import line per feature module below this line
import { createListeners } from './listeners/feature.js';
import { registerHlsRoutes } from './hls/routes.js';
import { registerListenRoutes } from './listen/routes.js';
import { registerWhep } from './webrtc/whep.js';
import { registerListenerRoutes } from './api/listeners/routes.js';
import { registerOAuth } from './oauth/routes.js';
import { registerAccountRoutes } from './api/account/routes.js';
import { registerIdempotency } from './idempotency/feature.js';
import { registerOpenApi } from './api/openapi/routes.js';
import { registerPodcasts } from './api/podcasts/feature.js';
import { createDelivery, type Delivery } from './webhooks/index.js';
import { WebhooksRepo } from './db/webhooks-repo.js';
import { EventsQuery } from './db/events-repo.js';
import { WebhooksService } from './services/webhooks.js';
import { EventsService } from './services/events.js';
import { registerWebhookRoutes } from './api/webhooks/routes.js';
import { registerEventRoutes } from './api/events/routes.js';
import { registerDashboard } from './dashboard/feature.js';

/** A running server. Ports as bound. */
export interface RunningServer {
  httpPort: number;
  rtmpPort: number;
  urls: PublicUrls;
  db: Database;
  outbox: Outbox;
  accounts: AccountsService;
  /** The shared context the feature modules were built with (tests reach services through it). */
  context: AppContext;
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
  const outbox = new Outbox(new EventsRepo(db), now);
  const media = new MediaRegistry();
  const limits = new Limits(log.child('limits'), now);
  let urls: PublicUrls | null = null;
  const getUrls = () => {
    if (!urls) throw new Error('public URLs are not known before listening');
    return urls;
  };

  // Set once the listeners feature exists (registered below): events and stream objects carry the count.
  let listenerCount: (streamId: string) => number = () => 0;
  // Set once the podcasts feature exists (registered below): the streams side calls into it.
  let checkRecordingPodcast: ((accountId: string, podcastId: string) => void) | undefined;
  const writes = new WriteRetry(db, log.child('db'), limits, SERVER_BUSY_TIMEOUT_MS);
  const lifecycle = new StreamLifecycle({ db, streams: streamsRepo, outbox, log: log.child('live'), urls: getUrls, writes, listenerCount: (id) => listenerCount(id) });
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
    },
  });
  const accounts = new AccountsService(accountsRepo, now);
  const streams = new StreamsService({
    streams: streamsRepo,
    accounts: accountsRepo,
    nodeSecret,
    urls: getUrls,
    live: { listenerCount: (id) => listenerCount(id), endNow: (id) => ingest.endNow(id), disconnectPublisher: (id) => ingest.disconnectPublisher(id) },
    now,
    checkRecordingPodcast: (accountId, podcastId) => checkRecordingPodcast?.(accountId, podcastId),
  });

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

  registerStreamRoutes(http, streams, guard);
  const features: Feature[] = [];
  // [features:register] — one `features.push(registerX(context));` line per feature module below this line
  const listeners = createListeners(context);
  features.push(listeners);
  listenerCount = (id) => listeners.registry.listenerCount(id);
  registerHlsRoutes(http, media, { access: listeners.access, hold: listeners.held });
  features.push(registerListenRoutes(http, media, { ctx: context, listeners }));
  const whep = registerWhep({ http, media, registry: listeners.registry, tokens: listeners.tokens, access: listeners.access, trusted: listeners.trusted, config, log: log.child('webrtc'), urls: getUrls, limits });
  features.push({ close: () => whep.close() });
  registerListenerRoutes(http, listeners.service, guard, getUrls);
  features.push(registerIdempotency(context));
  features.push(registerOAuth(context));
  features.push(registerAccountRoutes(context));
  features.push(registerOpenApi(context));
  const podcasts = registerPodcasts(context);
  checkRecordingPodcast = podcasts.checkRecordingPodcast;
  lifecycle.setRecordingHandler(
    (r) => podcasts.episodes.createFromRecording(r),
    (streamId) => podcasts.episodes.hasRecordingOf(streamId),
  );
  features.push(podcasts);
  const webhooksRepo = new WebhooksRepo(db);
  let delivery: Delivery | null = null;
  const wake = (id: string) => delivery?.engine.wake(id);
  const webhooks = {
    webhooks: new WebhooksService({ db, repo: webhooksRepo, outbox, nodeSecret, allowPrivate: config.webhooksAllowPrivate, wake, now }),
    events: new EventsService({ db, events: new EventsQuery(db), webhooks: webhooksRepo, wake, now }),
  };
  delivery = createDelivery({ db, repo: webhooksRepo, outbox, log: log.child('webhooks'), now, allowPrivate: config.webhooksAllowPrivate, secretOf: (row) => webhooks.webhooks.secretOf(row) });
  features.push(delivery);
  registerWebhookRoutes(http, webhooks.webhooks, guard);
  registerEventRoutes(http, webhooks.events, guard);
  features.push(registerDashboard(context, { streams, podcasts, listeners: listeners.registry, webhooks }));
  http.finish();

  const rtmp = new RtmpServer(ingest, log.child('rtmp'), { ...INGEST_DEFAULTS, mergeReadsMs: config.ingestMergeMs, limitSettings: config.limits, limits });
  let httpPort: number;
  let rtmpPort: number;
  try {
    httpPort = await http.listen(config.httpHost, config.httpPort);
    rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
  } catch (e) {
    http.close();
    await rtmp.close().catch(() => {});
    writes.close();
    db.close();
    throw e;
  }
  urls = resolvePublicUrls(config, httpPort, rtmpPort);
  ingest.recover();
  for (const f of features) await f.start?.();

  return {
    httpPort,
    rtmpPort,
    urls,
    db,
    outbox,
    accounts,
    context,
    async close() {
      http.close(); // closes every HTTP connection too (idle keep-alive, held LL-HLS reloads)
      await rtmp.close();
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
