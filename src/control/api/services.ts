/**
 * What every API resource is given (src/control/api/index.ts `mountApi`): the HTTP server to register on,
 * the Guard that authenticates and scopes requests, the node's clock, URLs, log and limits, and the
 * services the routes call: the API's Deps, built once by the composition root (src/app/control.ts). Routes know no SQL
 * and no repository: everything they do goes through these services.
 */
import type { HttpServer } from '../../base/http/server.js';
import type { Guard } from '../../base/auth/guard.js';
import type { PublicUrls } from '../../base/config.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import type { AccountsService } from '../services/accounts.js';
import type { StreamsService } from '../services/streams.js';
import type { PodcastsService } from '../services/podcasts.js';
import type { EpisodesService } from '../services/episodes.js';
import type { PodcastStatsService } from '../services/podcast-stats.js';
import type { WebhooksService } from '../services/webhooks.js';
import type { EventsService } from '../services/events.js';
import type { ListenersService } from '../services/listeners.js';
import type { MediaStore } from '../episode-audio/store.js';

/** How episode audio uploads are taken (`PUT /v2/podcasts/{id}/episodes/{eid}/audio`). */
export interface UploadSettings {
  /** Largest upload (bytes; `SKYLARK_MAX_UPLOAD_BYTES`). */
  maxBytes: number;
  /** Free space an upload must leave on the data volume (bytes; `SKYLARK_MIN_FREE_DISK_BYTES`; 0 = no check). */
  minFreeDiskBytes: number;
}

export interface ApiServices {
  http: HttpServer;
  guard: Guard;
  /** Public URLs; known once listening (throws before, so call it in handlers only). */
  urls: () => PublicUrls;
  /** The clock (ms since the epoch). */
  now: () => number;
  log: Logger;
  /** Counts and logs hits of the node's limits (docs/behaviour.md §13), e.g. an upload's `disk_free`. */
  limits: Limits;
  accounts: AccountsService;
  streams: StreamsService;
  /** Active listeners, stats and listener tokens of streams. */
  listeners: ListenersService;
  podcasts: PodcastsService;
  episodes: EpisodesService;
  /** Podcast download statistics (docs/podcasts.md "Download counting"). */
  podcastStats: PodcastStatsService;
  /** Where episode audio is stored (uploads are written to its temp folder first). */
  episodeMedia: MediaStore;
  uploads: UploadSettings;
  webhooks: WebhooksService;
  events: EventsService;
}
