/**
 * The composition root's control plane, built after live and delivery. `buildServices`, over the
 * listeners room (control's `ListenersRoom` port): the play log and broadcasts, the
 * podcasts side (episodes, the publication scheduler, loudness, download counting, feed
 * notifications), webhooks and their dispatcher, then the lifecycle, which is given the
 * listener count and the recording hand-over at construction, and which publishing (built before,
 * over a port bound once) calls once the node runs. `buildStreamsService` takes publishing (it ends
 * and disconnects publishers). `mountControl` registers the API (`mountApi`,
 * once), OAuth, the dashboard and the feed routes.
 */
import type { Base } from './base.js';
import type { Feature } from '../base/background.js';
import { ListenersService, type ListenersRoom } from '../control/services/listeners.js';
import { decryptSecret } from '../base/auth/secrets.js';
import { EventsQuery } from '../base/db/events-repo.js';
import { TracksRepo } from '../base/db/tracks-repo.js';
import { BroadcastsRepo } from '../base/db/broadcasts-repo.js';
import { LoudnessRepo } from '../base/db/loudness-repo.js';
import { FfmpegPool, ffmpegPath } from '../base/ffmpeg.js';
import { Sessions } from '../base/auth/sessions.js';
import { AccountsService } from '../control/services/accounts.js';
import { StreamsService, type LiveControl } from '../control/services/streams.js';
import { StreamLifecycle } from '../control/services/lifecycle.js';
import { FallbackEpisodes } from '../control/services/fallback.js';
import { PlayLog } from '../control/services/play-log.js';
import { BroadcastLog } from '../control/services/broadcasts.js';
import { CatchUpRepo } from '../base/db/catch-up-repo.js';
import { PodcastsService, feedUrlOf, recordingPodcastCheck, type FeedChanged } from '../control/services/podcasts.js';
import { EpisodesService } from '../control/services/episodes.js';
import { PublishScheduler } from '../control/services/scheduler.js';
import { WebhooksService } from '../control/services/webhooks.js';
import { EventsService } from '../control/services/events.js';
import { LoudnessService } from '../control/services/loudness.js';
import { MediaStore } from '../control/episode-audio/store.js';
import { LoudnessAnalyzer } from '../control/episode-audio/loudness.js';
import { FeedService } from '../control/feed/feed-service.js';
import { registerFeedRoutes } from '../control/feed/routes.js';
import { createDownloads, type Downloads } from '../control/downloads/counting.js';
import { mountApi, type UploadSettings } from '../control/api/index.js';
import { AuthorizationServer } from '../control/oauth/service.js';
import { OAuthClients } from '../control/oauth/clients.js';
import { registerOAuth } from '../control/oauth/routes.js';
import { registerDashboard } from '../control/dashboard/mount.js';
import { createDispatch, type WebhookDispatch } from '../control/webhooks/index.js';
import { FeedNotifications, watchBroadcasts } from '../control/webhooks/feed-notify.js';

/** The podcasts side: what the API, the dashboard, the feed and the lifecycle's recordings call. */
export interface PodcastServices {
  podcasts: PodcastsService;
  episodes: EpisodesService;
  feed: FeedService;
  /** Where episode audio is stored. */
  episodeMedia: MediaStore;
  /** Podcast download counting (docs/podcasts.md "Download counting"). */
  downloads: Downloads;
  scheduler: PublishScheduler;
  /** Episode loudness (docs/podcasts.md "Loudness"); undefined without FFmpeg. */
  loudness: LoudnessService | undefined;
  /** Records that a podcast's feed changed (feed-update notifications). */
  feedChanged: FeedChanged;
}

/** Webhooks (docs/behaviour.md §6): the services and the dispatcher they wake. */
export interface WebhookServices {
  webhooks: WebhooksService;
  events: EventsService;
  /** Feed-update notifications (docs/podcasts.md), delivered by the same engine. */
  feedNotes: FeedNotifications;
  dispatch: WebhookDispatch;
}

/** The control plane's services, built before publishing. */
export interface ControlServices extends PodcastServices, WebhookServices {
  accounts: AccountsService;
  playLog: PlayLog;
  /** Broadcasts (docs/streams.md): each stretch of a stream from live to the end of its reconnect window. */
  broadcasts: BroadcastLog;
  lifecycle: StreamLifecycle;
  /** Active listeners, stats (scoped to broadcasts) and listener tokens of streams. */
  listeners: ListenersService;
}

/** Every service, once publishing exists (what tests reach through `RunningServer.services`). */
export interface Services extends ControlServices {
  streams: StreamsService;
}

/**
 * Webhooks and feed notifications. The engine and the notifications need each other: the engine
 * takes the notifications' destinations, and a change wakes the engine after its transaction
 * commits (never while building), through the function bound here.
 */
function buildWebhooks(b: Base): WebhookServices {
  const { config, db, now, nodeSecret, outbox } = b;
  const repo = b.repos.webhooks;
  const wake = (id: string) => dispatch.engine.wake(id);
  const feedNotes = new FeedNotifications({ repo, hubUrl: config.websubHub, notify: config.feedNotifyUrls, now, wake });
  const dispatch = createDispatch({
    db,
    repo,
    outbox,
    log: b.log.child('webhooks'),
    now,
    allowPrivate: config.webhooksAllowPrivate,
    secretOf: (row) => decryptSecret(nodeSecret, row.secret_enc),
    internal: feedNotes.destinations,
  });
  const webhooks = new WebhooksService({ db, repo, outbox, nodeSecret, allowPrivate: config.webhooksAllowPrivate, wake, now });
  const events = new EventsService({ db, events: new EventsQuery(db), webhooks: repo, wake, now });
  return { webhooks, events, feedNotes, dispatch };
}

/** The podcasts side; every change of a schedule pokes the publication scheduler. */
function buildPodcasts(b: Base, feedNotes: FeedNotifications, audioGone: (episodeId: string) => void): PodcastServices {
  const { config, db, now } = b;
  const repo = b.repos.podcasts;
  const log = b.log.child('podcasts');
  const urls = b.listening.urls;
  const episodeMedia = new MediaStore(config.dataDir);
  const downloads = createDownloads({ db, podcasts: repo, media: episodeMedia, trustedProxies: config.trustedProxies, log: b.log, now, enabled: config.downloadCounting, maxClientsPerDay: config.limits.downloadClientsPerDay });
  // Episode loudness: measured and normalised after storing, by capped low-priority FFmpeg processes.
  const bin = ffmpegPath();
  const pool = bin ? new FfmpegPool({ bin, concurrency: config.limits.loudnessConcurrency }) : null;
  const loudness = pool
    ? new LoudnessService({ repo: new LoudnessRepo(db), media: episodeMedia, analyzer: new LoudnessAnalyzer(pool), pool, concurrency: config.limits.loudnessConcurrency, now, log, audioReplaced: (id, ...rest) => {
          audioGone(id);
          downloads.audioPlaced(id, ...rest);
        }, audioFinal: (id) => episodes.publishWhenReady(id) })
    : undefined;
  const feedChanged: FeedChanged = (accountId, podcastId, change) => feedNotes.changed(accountId, podcastId, feedUrlOf(urls(), podcastId), change);
  // The scheduler publishes through the episodes service, which pokes it: it calls `publishDue` only once started.
  const scheduler = new PublishScheduler({ nextDueAt: () => repo.nextDueAt(), publishDue: () => episodes.publishDue(), now, log });
  const poke = () => scheduler.poke();
  const podcasts = new PodcastsService({ repo, urls, now, onScheduleChange: poke, loudness, feedChanged });
  const episodes = new EpisodesService({ repo, outbox: b.outbox, media: episodeMedia, urls, now, onScheduleChange: poke, audioPlaced: downloads.audioPlaced, audioGone, loudness, publishWaitMs: config.limits.publishWaitMs, feedChanged });
  const broadcastsOf = new BroadcastsRepo(db);
  const feed = new FeedService({ repo, recordingStreams: (id) => b.repos.streams.recordingInto(id), latestBroadcast: (id) => broadcastsOf.latest(id), urls, now, hubUrl: config.websubHub });
  return { podcasts, episodes, feed, episodeMedia, downloads, scheduler, loudness, feedChanged };
}

/**
 * What the catch-up archive (delivery, built after the control services) tells control: whether a
 * broadcast has kept segments (its `catchUpUrl`) and the bytes a stream keeps (`/stats`
 * `catchUpBytes`). docs/behaviour.md "Catch-up radio".
 */
export interface CatchUpKept {
  hasBroadcast(broadcastId: string): boolean;
  bytes(streamId: string): number;
}

/** `/stats` `catchUpBytes` of a stream: summed from the catch-up index, at most once per 2 s per stream. */
function catchUpBytesOf(kept: () => CatchUpKept | undefined, now: () => number): (streamId: string) => number {
  const cache = new Map<string, { at: number; bytes: number }>();
  return (id) => {
    const c = cache.get(id);
    if (c && now() - c.at < 2000) return c.bytes;
    if (cache.size > 10_000) cache.clear();
    const bytes = kept()?.bytes(id) ?? 0;
    cache.set(id, { at: now(), bytes });
    return bytes;
  };
}

/**
 * The control plane's services over the listeners room: the lifecycle counts listeners and hands
 * recordings to the episodes service from the start. `episodeAudioGone` is told of every episode
 * whose audio was deleted or replaced (the fallback's rendition cache, docs/streams.md "Fallback").
 */
export function buildServices(b: Base, room: ListenersRoom, episodeAudioGone: (episodeId: string) => void = () => {}, kept: () => CatchUpKept | undefined = () => undefined): ControlServices {
  const { db, outbox, writes, now } = b;
  const log = b.log.child('live');
  const listenerCount = (id: string) => room.registry.listenerCount(id);
  const playLog = new PlayLog({
    repo: new TracksRepo(db),
    outbox,
    writes,
    log,
    listeners: { countries: (id) => room.registry.active(id).map((s) => s.country), settle: () => room.registry.flush() },
  });
  const catchUp = new CatchUpRepo(db);
  const catchUpUrl = (row: { id: string; stream_id: string }) =>
    catchUp.hours(row.stream_id) > 0 && kept()?.hasBroadcast(row.id) === true ? `${b.listening.urls().cdnUrl}/hls/${row.stream_id}/broadcasts/${row.id}.m3u8` : null;
  const broadcasts = new BroadcastLog({
    repo: new BroadcastsRepo(db),
    outbox,
    writes,
    log,
    now,
    // A broadcast starts with the stream's listeners (docs/behaviour.md §2 "Broadcasts").
    listeners: (id) => room.registry.active(id).map((s) => ({ id: s.id, country: s.country, open: s.timeoutMs === 0, lastSeenAt: s.lastSeenAt })),
    lastSeen: (streamId, id) => room.registry.get(streamId, id)?.lastSeenAt ?? null,
    catchUpUrl,
  });
  const hooks = buildWebhooks(b);
  const podcasts = buildPodcasts(b, hooks.feedNotes, episodeAudioGone);
  const { episodes } = podcasts;
  const lifecycle = new StreamLifecycle({
    db,
    streams: b.repos.streams,
    outbox,
    log,
    urls: b.listening.urls,
    writes,
    listenerCount,
    onRecording: (r) => episodes.createFromRecording(r),
    hasRecordingEpisode: (streamId) => episodes.hasRecordingOf(streamId),
    fallbackItems: fallbackEpisodesOf(b, podcasts.episodeMedia),
    playLog,
    broadcasts,
    now,
  });
  const accounts = new AccountsService(b.repos.accounts, now);
  const listeners = new ListenersService(room.registry, b.repos.streams, room.tokens, (id) => broadcasts.stats(id), catchUpBytesOf(kept, now));
  return { ...hooks, ...podcasts, accounts, playLog, broadcasts, lifecycle, listeners };
}

/** The episodes a stream's fallback can play now (docs/streams.md "Fallback"), from the media store. */
function fallbackEpisodesOf(b: Base, media: MediaStore): (accountId: string, ids: string[]) => ReturnType<FallbackEpisodes['items']> {
  const f = new FallbackEpisodes(b.repos.podcasts, media);
  return (accountId, ids) => f.items(accountId, ids);
}

/** The streams service (docs/behaviour.md §2): over publishing (live's ingest), which it asks to end, disconnect and retitle. */
export function buildStreamsService(b: Base, s: ControlServices, room: ListenersRoom, ingest: Omit<LiveControl, 'listenerCount'>): Services {
  const streams = new StreamsService({
    streams: b.repos.streams,
    accounts: b.repos.accounts,
    nodeSecret: b.nodeSecret,
    urls: b.listening.urls,
    live: {
      listenerCount: (id) => room.registry.listenerCount(id),
      endNow: (id) => ingest.endNow(id),
      disconnectPublisher: (id) => ingest.disconnectPublisher(id),
      nowPlaying: (id, np) => ingest.nowPlaying(id, np),
      fallbackChanged: (id) => ingest.fallbackChanged?.(id),
    },
    now: b.now,
    checkRecordingPodcast: recordingPodcastCheck(b.repos.podcasts),
    checkFallbackEpisodes: (accountId, ids) => new FallbackEpisodes(b.repos.podcasts, s.episodeMedia).check(accountId, ids),
    playLog: s.playLog,
    broadcasts: s.broadcasts,
  });
  return { ...s, streams };
}

/** The features of the services themselves (the play log and broadcasts stop after the listeners room: their last events count). */
export function serviceFeatures(s: ControlServices): Feature[] {
  return [{ close: () => s.playLog.close() }, { close: () => s.broadcasts.close() }];
}

/**
 * Registers the API (`/v2`: every resource from one list, src/control/api/index.ts),
 * OAuth, the feed routes and the dashboard, and returns the control plane's features in start order.
 * @throws Error when the Guard was built without OAuth (no access tokens)
 */
export function mountControl(b: Base, s: Services, room: ListenersRoom): Feature[] {
  const { http, guard, now, config } = b;
  const uploads: UploadSettings = { maxBytes: config.maxUploadBytes, minFreeDiskBytes: config.limits.minFreeDiskBytes };
  registerFeedRoutes(http, { feed: s.feed, repo: b.repos.podcasts, media: s.episodeMedia, log: b.log.child('podcasts'), onAudio: s.downloads.onAudio });
  mountApi({ http, guard, urls: b.listening.urls, now, log: b.log, limits: b.limits, accounts: s.accounts, streams: s.streams, listeners: s.listeners, podcasts: s.podcasts, episodes: s.episodes, podcastStats: s.downloads.stats, episodeMedia: s.episodeMedia, uploads, webhooks: s.webhooks, events: s.events });
  const tokens = guard.tokens;
  if (!tokens) throw new Error('the OAuth routes need a Guard constructed with GuardOptions');
  // One session store and cookie for the OAuth consent page and the dashboard (one sign-in for both).
  const sessions = new Sessions(b.db, b.nodeSecret, () => b.listening.urls().authUrl.startsWith('https:'), now);
  const server = new AuthorizationServer({ db: b.db, repo: b.repos.oauth, accounts: b.repos.accounts, tokens, issuer: () => b.listening.urls().authUrl, now });
  const features: Feature[] = [s.downloads];
  features.push(registerOAuth({ http, guard, server, tokens, sessions, accounts: b.repos.accounts, urls: b.listening.urls, limits: b.limits }));
  features.push({ start: () => s.episodeMedia.clearTemp() }); // uploads cut off by the last shutdown
  features.push(s.scheduler);
  if (s.loudness) features.push(s.loudness);
  features.push({ start: () => void s.feedNotes.forgetOthers() }); // pings to destinations no longer configured
  features.push(s.dispatch);
  const podcastsRepo = b.repos.podcasts;
  const served = (podcastId: string) => (podcastsRepo.getPodcastAny(podcastId)?.status ?? 'draft') !== 'draft';
  features.push({ close: watchBroadcasts(b.outbox, served, (fn) => podcastsRepo.tx(fn), s.feedChanged) });
  features.push(
    registerDashboard({
      http,
      guard,
      sessions,
      accountsRepo: b.repos.accounts,
      accounts: s.accounts,
      streams: s.streams,
      podcasts: { podcasts: s.podcasts, episodes: s.episodes, stats: s.downloads.stats },
      listeners: s.listeners,
      listenerTokens: room.tokens,
      webhooks: { webhooks: s.webhooks, events: s.events },
      episodeMedia: s.episodeMedia,
      uploads,
      oauthClients: new OAuthClients(b.repos.oauth, now),
      urls: b.listening.urls,
      limits: b.limits,
      log: b.log,
      now,
    }),
  );
  return features;
}
