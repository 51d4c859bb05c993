/**
 * Routes of the Podcasts and Episodes resources under `/v2/podcasts` (spec "Podcasts", docs/behaviour.md
 * §5, §9). Reads need `podcasts:read` (publishable keys may read), writes `podcasts:write`. The key
 * is checked before any body is read, then the body is validated (400), then the service runs.
 * The audio upload streams the raw body to the episode media store's temp folder under the
 * upload settings' size cap and disk floor (src/base/http/upload.ts).
 */
import { readFile, rm } from 'node:fs/promises';
import { registerUploadRoute } from '../../../base/http/upload.js';
import { ApiError } from '../../../base/errors/errors.js';
import type { ApiServices } from '../services.js';
import { API_CORS_HEADERS, registerApiPreflight } from '../../../base/http/routes/api.js';
import { parse, queryEnum, rejectUnknownQuery } from '../validation.js';
import { knownQuery, resourceRoutes } from '../resource.js';
import { CreateEpisode, CreatePodcast, EPISODE_STATUSES, PODCAST_STATUSES, PublishEpisode, UpdateEpisode, UpdatePodcast } from './schemas.js';
import { PODCAST_DOCS as DOCS } from './openapi.js';
import { checkTranscript, TRANSCRIPT_MAX_BYTES, transcriptTypeOf } from './transcript.js';
import { CHAPTERS_MAX_BYTES, checkChapters, isChaptersType } from './chapters.js';

/** Content types refused before any byte is read (clearly not audio); everything else is probed. */
const NOT_AUDIO_TYPES = /^(text\/|image\/|application\/(json|xml|x-www-form-urlencoded|pdf|zip)|multipart\/)/i;

/** Registers every `/v2/podcasts…` route, each with its scope and OpenAPI description (./openapi.ts). */
export function mountPodcasts(s: ApiServices): void {
  const { podcasts, episodes } = s;
  const r = resourceRoutes(s, { read: 'podcasts:read', write: 'podcasts:write' });
  r.list('/v2/podcasts', DOCS.list, (req, p, q) => podcasts.list(p.accountId, queryEnum(req.query, 'status', PODCAST_STATUSES), q));
  r.write('post', '/v2/podcasts', DOCS.create, (req, p) => ({ status: 201, body: podcasts.create(p.accountId, parse(CreatePodcast, req.body)) }));
  r.read('get', '/v2/podcasts/:id', DOCS.get, (req, p) => ({ status: 200, body: podcasts.get(p.accountId, req.params[0]!) }));
  r.write('patch', '/v2/podcasts/:id', DOCS.update, (req, p) => ({ status: 200, body: podcasts.update(p.accountId, req.params[0]!, parse(UpdatePodcast, req.body)) }));
  r.write('post', '/v2/podcasts/:id/publish', DOCS.publish, async (req, p) => ({ status: 200, body: await episodes.publishWhenFinal(p.accountId, req.params[0]!, parse(PublishEpisode, req.body)) }));

  r.list('/v2/podcasts/:id/episodes', DOCS.listEpisodes, (req, p, q) => episodes.list(p.accountId, req.params[0]!, queryEnum(req.query, 'status', EPISODE_STATUSES), q));
  r.write('post', '/v2/podcasts/:id/episodes', DOCS.createEpisode, (req, p) => ({ status: 201, body: episodes.create(p.accountId, req.params[0]!, parse(CreateEpisode, req.body)) }));
  r.read('get', '/v2/podcasts/:id/episodes/:eid', DOCS.getEpisode, (req, p) => ({ status: 200, body: episodes.get(p.accountId, req.params[0]!, req.params[1]!) }));
  r.write('patch', '/v2/podcasts/:id/episodes/:eid', DOCS.updateEpisode, (req, p) => ({ status: 200, body: episodes.update(p.accountId, req.params[0]!, req.params[1]!, parse(UpdateEpisode, req.body)) }));
  r.write('del', '/v2/podcasts/:id/episodes/:eid', DOCS.deleteEpisode, (req, p) => ({ status: 200, body: episodes.delete(p.accountId, req.params[0]!, req.params[1]!) }));

  // Uploads are registered apart from `api()` routes: their preflight, CORS headers and query rule are added here.
  const uploadPattern = '/v2/podcasts/:id/episodes/:eid/audio';
  const uploadQuery = knownQuery(DOCS.uploadAudio);
  registerApiPreflight(s.http, uploadPattern);
  registerUploadRoute(s.http, 'put', uploadPattern, {
    ...r.writeScope,
    guard: (req) => {
      Object.assign(req.responseHeaders, API_CORS_HEADERS);
      const p = r.writeScope.guard(req);
      rejectUnknownQuery(req.query, uploadQuery);
      return p;
    },
    doc: DOCS.uploadAudio,
    begin: (req, p) => {
      episodes.checkUploadTarget(p.accountId, req.params[0]!, req.params[1]!);
      if (NOT_AUDIO_TYPES.test(req.headers.contentType)) {
        throw new ApiError('unsupported_media_type', `Content-Type '${req.headers.contentType.slice(0, 100)}' is not audio; send the audio file as the raw body.`);
      }
      return { tempPath: s.episodeMedia.tempPath(), maxBytes: s.uploads.maxBytes };
    },
    finish: async (req, p, tempPath, size) => ({ status: 200, body: await episodes.attachAudio(p.accountId, req.params[0]!, req.params[1]!, tempPath, size) }),
    minFreeDiskBytes: s.uploads.minFreeDiskBytes,
    limits: s.limits,
    log: s.log.child('podcasts'),
  });

  mountChapters(s, r);

  // Transcripts (docs/podcasts.md "Transcripts"): the raw body under its own cap, checked, stored with the episode.
  const transcriptPattern = '/v2/podcasts/:id/episodes/:eid/transcript';
  const transcriptQuery = knownQuery(DOCS.putTranscript);
  r.write('del', transcriptPattern, DOCS.deleteTranscript, (req, p) => ({ status: 200, body: episodes.deleteTranscript(p.accountId, req.params[0]!, req.params[1]!) }));
  registerUploadRoute(s.http, 'put', transcriptPattern, {
    ...r.writeScope,
    guard: (req) => {
      Object.assign(req.responseHeaders, API_CORS_HEADERS);
      const p = r.writeScope.guard(req);
      rejectUnknownQuery(req.query, transcriptQuery);
      return p;
    },
    doc: DOCS.putTranscript,
    begin: (req, p) => {
      episodes.checkUploadTarget(p.accountId, req.params[0]!, req.params[1]!);
      if (!transcriptTypeOf(req.headers.contentType)) {
        throw new ApiError('unsupported_media_type', `Content-Type '${req.headers.contentType.slice(0, 100)}' is not a transcript type: send text/vtt, application/x-subrip or application/json.`);
      }
      return { tempPath: s.episodeMedia.tempPath(), maxBytes: TRANSCRIPT_MAX_BYTES };
    },
    finish: async (req, p, tempPath) => {
      let bytes: Buffer;
      try {
        bytes = await readFile(tempPath);
      } finally {
        await rm(tempPath, { force: true });
      }
      const type = transcriptTypeOf(req.headers.contentType)!;
      return { status: 200, body: episodes.setTranscript(p.accountId, req.params[0]!, req.params[1]!, type, checkTranscript(type, bytes)) };
    },
    limits: s.limits,
    log: s.log.child('podcasts'),
  });
}

/** Chapters (docs/podcasts.md "Chapters"): `PUT` takes the raw JSON chapters document under its own cap, checked; `DELETE` removes it. */
function mountChapters(s: ApiServices, r: ReturnType<typeof resourceRoutes>): void {
  const { episodes } = s;
  const pattern = '/v2/podcasts/:id/episodes/:eid/chapters';
  const query = knownQuery(DOCS.putChapters);
  r.write('del', pattern, DOCS.deleteChapters, (req, p) => ({ status: 200, body: episodes.deleteChapters(p.accountId, req.params[0]!, req.params[1]!) }));
  registerUploadRoute(s.http, 'put', pattern, {
    ...r.writeScope,
    guard: (req) => {
      Object.assign(req.responseHeaders, API_CORS_HEADERS);
      const p = r.writeScope.guard(req);
      rejectUnknownQuery(req.query, query);
      return p;
    },
    doc: DOCS.putChapters,
    begin: (req, p) => {
      episodes.checkUploadTarget(p.accountId, req.params[0]!, req.params[1]!);
      if (!isChaptersType(req.headers.contentType)) {
        throw new ApiError('unsupported_media_type', `Content-Type '${req.headers.contentType.slice(0, 100)}' is not a chapters document: send application/json+chapters.`);
      }
      return { tempPath: s.episodeMedia.tempPath(), maxBytes: CHAPTERS_MAX_BYTES };
    },
    finish: async (req, p, tempPath) => {
      let bytes: Buffer;
      try {
        bytes = await readFile(tempPath);
      } finally {
        await rm(tempPath, { force: true });
      }
      return { status: 200, body: episodes.setChapters(p.accountId, req.params[0]!, req.params[1]!, checkChapters(bytes)) };
    },
    limits: s.limits,
    log: s.log.child('podcasts'),
  });
}
