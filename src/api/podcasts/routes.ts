/**
 * Routes of the Podcasts and Episodes resources under `/v2/podcasts` (spec "Podcasts", PRODUCT.md
 * §5, §9). Reads need `podcasts:read` (publishable keys may read), writes `podcasts:write`. The key
 * is checked before any body is read, then the body is validated (400), then the service runs.
 */
import type { ApiReply, ApiRequest, HttpServer } from '../../http/server.js';
import type { Principal } from '../../auth/api-keys.js';
import { registerUploadRoute } from '../../http/upload.js';
import { ApiError } from '../../errors/errors.js';
import type { Guard } from '../../auth/guard.js';
import type { PodcastsService } from '../../services/podcasts.js';
import type { EpisodesService } from '../../services/episodes.js';
import type { MediaStore } from '../../media-files/store.js';
import type { PageQuery } from '../../db/paginate.js';
import type { Logger } from '../../log/logger.js';
import type { Limits } from '../../limits/limits.js';
import { parse, parsePageQuery, queryEnum } from '../validation.js';
import { CreateEpisode, CreatePodcast, EPISODE_STATUSES, PODCAST_STATUSES, PublishEpisode, UpdateEpisode, UpdatePodcast } from './schemas.js';
import { PODCAST_DOCS as DOCS } from './openapi.js';

/** Content types refused before any byte is read (clearly not audio); everything else is probed. */
const NOT_AUDIO_TYPES = /^(text\/|image\/|application\/(json|xml|x-www-form-urlencoded|pdf|zip)|multipart\/)/i;

/** The list envelope (PRODUCT.md §9 "Lists": the last item's id going `after`, the first going `before`). */
function listReply<T extends { id: string }>(url: string, q: PageQuery, page: { data: T[]; hasMore: boolean }): ApiReply {
  const cursorItem = q.before !== undefined ? page.data[0] : page.data[page.data.length - 1];
  return { status: 200, body: { object: 'list', url, data: page.data, hasMore: page.hasMore, nextCursor: page.hasMore && cursorItem ? cursorItem.id : null } };
}

export interface PodcastRoutesDeps {
  http: HttpServer;
  guard: Guard;
  podcasts: PodcastsService;
  episodes: EpisodesService;
  media: MediaStore;
  /** Largest audio upload (bytes). */
  maxUploadBytes: number;
  /** Free space uploads must leave on the data volume (bytes, `config.limits.minFreeDiskBytes`; 0 = no check). */
  minFreeDiskBytes: number;
  /** Counts the limits an upload hits (`http_body_bytes`, `disk_free`). */
  limits: Limits;
  log: Logger;
}

/** Registers every `/v2/podcasts…` route, each with its scope and OpenAPI description (./openapi.ts). */
export function registerPodcastRoutes(d: PodcastRoutesDeps): void {
  const { http, podcasts, episodes } = d;
  const read = d.guard.scope('podcasts:read');
  const write = d.guard.scope('podcasts:write');

  http.api(
    'get',
    '/v2/podcasts',
    (req: ApiRequest, p: Principal) => {
      const q = parsePageQuery(req.query);
      const status = queryEnum(req.query, 'status', PODCAST_STATUSES);
      return listReply('/v2/podcasts', q, podcasts.list(p.accountId, status, q));
    },
    { ...read, doc: DOCS.list },
  );
  http.api('post', '/v2/podcasts', (req: ApiRequest, p: Principal) => ({ status: 201, body: podcasts.create(p.accountId, parse(CreatePodcast, req.body)) }), { ...write, doc: DOCS.create });
  http.api('get', '/v2/podcasts/:id', (req: ApiRequest, p: Principal) => ({ status: 200, body: podcasts.get(p.accountId, req.params[0]!) }), { ...read, doc: DOCS.get });
  http.api('patch', '/v2/podcasts/:id', (req: ApiRequest, p: Principal) => ({ status: 200, body: podcasts.update(p.accountId, req.params[0]!, parse(UpdatePodcast, req.body)) }), { ...write, doc: DOCS.update });
  http.api(
    'post',
    '/v2/podcasts/:id/publish',
    (req: ApiRequest, p: Principal) => ({ status: 200, body: episodes.publish(p.accountId, req.params[0]!, parse(PublishEpisode, req.body)) }),
    { ...write, doc: DOCS.publish },
  );

  http.api(
    'get',
    '/v2/podcasts/:id/episodes',
    (req: ApiRequest, p: Principal) => {
      const q = parsePageQuery(req.query);
      const status = queryEnum(req.query, 'status', EPISODE_STATUSES);
      return listReply(`/v2/podcasts/${req.params[0]!}/episodes`, q, episodes.list(p.accountId, req.params[0]!, status, q));
    },
    { ...read, doc: DOCS.listEpisodes },
  );
  http.api(
    'post',
    '/v2/podcasts/:id/episodes',
    (req: ApiRequest, p: Principal) => ({ status: 201, body: episodes.create(p.accountId, req.params[0]!, parse(CreateEpisode, req.body)) }),
    { ...write, doc: DOCS.createEpisode },
  );
  http.api('get', '/v2/podcasts/:id/episodes/:eid', (req: ApiRequest, p: Principal) => ({ status: 200, body: episodes.get(p.accountId, req.params[0]!, req.params[1]!) }), { ...read, doc: DOCS.getEpisode });
  http.api(
    'patch',
    '/v2/podcasts/:id/episodes/:eid',
    (req: ApiRequest, p: Principal) => ({ status: 200, body: episodes.update(p.accountId, req.params[0]!, req.params[1]!, parse(UpdateEpisode, req.body)) }),
    { ...write, doc: DOCS.updateEpisode },
  );
  http.api('del', '/v2/podcasts/:id/episodes/:eid', (req: ApiRequest, p: Principal) => ({ status: 200, body: episodes.delete(p.accountId, req.params[0]!, req.params[1]!) }), { ...write, doc: DOCS.deleteEpisode });

  registerUploadRoute(http, 'put', '/v2/podcasts/:id/episodes/:eid/audio', {
    guard: write.guard,
    scope: write.scope,
    doc: DOCS.uploadAudio,
    begin: (req: ApiRequest, p: Principal) => {
      episodes.checkUploadTarget(p.accountId, req.params[0]!, req.params[1]!);
      if (NOT_AUDIO_TYPES.test(req.headers.contentType)) {
        throw new ApiError('unsupported_media_type', `Content-Type '${req.headers.contentType.slice(0, 100)}' is not audio; send the audio file as the raw body.`);
      }
      return { tempPath: d.media.tempPath(), maxBytes: d.maxUploadBytes };
    },
    finish: async (req, p, tempPath, size) => ({ status: 200, body: await episodes.attachAudio(p.accountId, req.params[0]!, req.params[1]!, tempPath, size) }),
    minFreeDiskBytes: d.minFreeDiskBytes,
    limits: d.limits,
    log: d.log,
  });
}
