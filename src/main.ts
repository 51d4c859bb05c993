/**
 * Composition root: opens the database, wires services, the HTTP server (API + HLS) and the RTMP
 * ingest server, registers the feature modules and starts listening. `startServer` is what
 * `skylark serve` and the tests run.
 */
import type { Config, PublicUrls } from './config/config.js';
import { resolvePublicUrls } from './config/config.js';
import { openDatabase, type Database } from './db/database.js';
import { AccountsRepo } from './db/accounts-repo.js';
import { StreamsRepo } from './db/streams-repo.js';
import { EventsRepo } from './db/events-repo.js';
import { Outbox } from './events/outbox.js';
import { loadNodeSecret } from './auth/secrets.js';
import { AccountsService } from './services/accounts.js';
import { StreamsService } from './services/streams.js';
import { LiveService } from './services/live.js';
import { MediaRegistry } from './media/hub.js';
import { Segmenter } from './native/index.js';
import { ffmpegPath } from './media/ffmpeg.js';
import type { Recording } from './media/recorder.js';
import path from 'node:path';
import { HttpServer } from './http/server.js';
import { Guard } from './api/guard.js';
import { registerStreamRoutes } from './api/streams/routes.js';
import { INGEST_DEFAULTS, RtmpServer } from './ingest/rtmp-server.js';
import type { Logger } from './log/logger.js';
import { Limits } from './limits/limits.js';
import type { AppContext, Feature } from './context.js';
// [features:imports] — one import line per feature module below this line
import { registerListeners } from './listeners/feature.js';
import { registerOAuth } from './oauth/routes.js';
import { registerAccountRoutes } from './api/account/routes.js';
import { registerIdempotency } from './idempotency/feature.js';
import { registerOpenApi } from './api/openapi/routes.js';
import { registerPodcasts } from './api/podcasts/feature.js';
import { registerWebhooks } from './webhooks/index.js';
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
  const db = openDatabase(config.dataDir);
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

  // Set once the podcasts feature exists (registered below): the streams side calls into it.
  let checkRecordingPodcast: ((accountId: string, podcastId: string) => void) | undefined;
  let onRecording: (r: { accountId: string; podcastId: string; streamId: string; title: string; recording: Recording }) => Promise<unknown> = async () => {};
  const live = new LiveService({
    db,
    streams: streamsRepo,
    outbox,
    media,
    log: log.child('live'),
    urls: getUrls,
    createSegmenter: (o) => new Segmenter(o),
    segmentDurationMs: config.segmentDurationMs,
    partTargetMs: Math.min(config.partDurationMs, config.segmentDurationMs),
    windowSegments: config.liveWindowSegments,
    abrLadder: config.abrLadder,
    ffmpeg: ffmpegPath,
    recordingsDir: path.join(config.dataDir, 'recordings'),
    onRecording: (r) => onRecording(r),
    now,
  });
  const accounts = new AccountsService(accountsRepo, now);
  const streams = new StreamsService({
    streams: streamsRepo,
    accounts: accountsRepo,
    nodeSecret,
    urls: getUrls,
    live,
    now,
    checkRecordingPodcast: (accountId, podcastId) => checkRecordingPodcast?.(accountId, podcastId),
  });

  const http = new HttpServer({ maxJsonBodyBytes: config.maxJsonBodyBytes, log: log.child('http') });
  const guard = new Guard(accountsRepo, { db, nodeSecret, urls: getUrls, now, trustedProxies: config.trustedProxies });
  const context: AppContext = { config, db, nodeSecret, accounts: accountsRepo, streams: streamsRepo, outbox, http, guard, live, log, limits, urls: getUrls, now };

  registerStreamRoutes(http, streams, guard);
  const features: Feature[] = [];
  // [features:register] — one `features.push(registerX(context));` line per feature module below this line
  const listeners = registerListeners(context, { media }); // also registers the HLS routes (with listener sessions) and WHEP
  features.push(listeners);
  features.push(registerIdempotency(context));
  features.push(registerOAuth(context));
  features.push(registerAccountRoutes(context));
  features.push(registerOpenApi(context));
  const podcasts = registerPodcasts(context);
  checkRecordingPodcast = podcasts.checkRecordingPodcast;
  onRecording = (r) =>
    podcasts.episodes.createFromRecording({ accountId: r.accountId, podcastId: r.podcastId, streamId: r.streamId, title: r.title, filePath: r.recording.path });
  features.push(podcasts);
  const webhooks = registerWebhooks(context);
  features.push(webhooks);
  features.push(registerDashboard(context, { streams, podcasts, listeners: listeners.registry, webhooks }));
  http.finish();

  const rtmp = new RtmpServer(live, log.child('rtmp'), { ...INGEST_DEFAULTS, mergeReadsMs: config.ingestMergeMs, limitSettings: config.limits, limits });
  let httpPort: number;
  let rtmpPort: number;
  try {
    httpPort = await http.listen(config.httpHost, config.httpPort);
    rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
  } catch (e) {
    http.close();
    await rtmp.close().catch(() => {});
    db.close();
    throw e;
  }
  urls = resolvePublicUrls(config, httpPort, rtmpPort);
  live.recover();
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
      http.close();
      await rtmp.close();
      live.close();
      for (const f of features.reverse()) await f.close?.();
      db.close();
    },
  };
}
