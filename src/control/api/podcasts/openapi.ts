/**
 * OpenAPI descriptions of the Podcasts and Episodes routes (./routes.ts), passed as the routes'
 * `doc` option. Request bodies are the schemas that validate them, answers the podcast and episode
 * objects (./schemas.ts). Errors: the generator adds the standard ones (401/403/429, 400 for a
 * body or query, 404 for path parameters, 413, Idempotency-Key errors on POST, 500); each route
 * lists its own here.
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { Deleted, listOf } from '../openapi/schemas.js';
import { pageQueryDoc } from '../lists.js';
import { CHAPTERS_UPLOAD_TYPES } from './chapters.js';
import {
  CreateEpisode,
  CreatePodcast,
  EPISODE_STATUSES,
  EpisodeObjectSchema,
  PODCAST_STATUSES,
  PodcastObjectSchema,
  PublishEpisode,
  UpdateEpisode,
  UpdatePodcast,
} from './schemas.js';

/** Media types the audio upload takes (what the probe recognises: MP3, AAC/M4A, Ogg, FLAC, WAV, WebM). */
export const AUDIO_UPLOAD_TYPES = [
  'audio/mpeg',
  'audio/mp4',
  'audio/x-m4a',
  'audio/aac',
  'audio/ogg',
  'audio/flac',
  'audio/wav',
  'audio/x-wav',
  'audio/webm',
  'application/octet-stream',
];

const podcast = valibot(PodcastObjectSchema);
const episode = valibot(EpisodeObjectSchema);
const podcastId = { id: 'The podcast id (`pod_…`).' };
const episodeIds = { id: 'The podcast id (`pod_…`).', eid: 'The episode id (`ep_…`).' };
/** Media types the transcript upload takes (docs/podcasts.md "Transcripts"). */
export const TRANSCRIPT_UPLOAD_TYPES = ['text/vtt', 'application/x-subrip', 'application/json'];

/** The descriptions, by route (keys used in ./routes.ts). */
export const PODCAST_DOCS = {
  list: {
    summary: 'List podcasts',
    description: 'Newest first. `hasMore` and `nextCursor` continue in the direction of travel.',
    query: [...pageQueryDoc('podcasts'), { name: 'status', description: 'Only podcasts in this state.', schema: { type: 'string', enum: [...PODCAST_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of podcasts.', schema: valibot(listOf(PodcastObjectSchema)) } },
  },
  create: {
    summary: 'Create a podcast',
    description:
      'Created as a `draft`; it becomes `published` with its first published episode. `podcastGuid` is fixed now from the feed URL. `loudnessTarget` (LUFS, −24…−10, default −16; `null` = off) is what new audio is normalised to, true peak ≤ −1 dBTP.',
    body: { schema: valibot(CreatePodcast), description: 'Only `title` is required. `category`: an Apple Podcasts category (`"Technology"`, `"Society & Culture > Documentary"`). `metadata`: up to 16 keys.' },
    responses: { 201: { description: 'The new podcast.', schema: podcast } },
  },
  get: {
    summary: 'Retrieve a podcast',
    params: podcastId,
    responses: { 200: { description: 'The podcast.', schema: podcast } },
  },
  update: {
    summary: 'Update a podcast',
    description:
      'Optional fields are cleared with `null`; `metadata` keys given as `null` are removed (at most 16 after the merge). `status: "archived"` archives (scheduled episodes go back to draft); un-archiving returns to the state the episodes imply. A move to the current state or to `published` directly → 409 `state_conflict`. A new `loudnessTarget` applies to audio stored from then on.',
    params: podcastId,
    body: { schema: valibot(UpdatePodcast), required: false },
    responses: { 200: { description: 'The updated podcast.', schema: podcast } },
    errors: { 409: ['state_conflict'] },
  },
  publish: {
    summary: 'Publish an episode',
    description:
      'Without `publishAt`: published now (`podcast.published`; the podcast becomes `published` if it was a draft). With a future `publishAt`: `scheduled` (re-scheduling moves it). The episode must have audio. While its audio is still being finished (a recording just after its broadcast) or loudness-normalised, the request waits up to 10 s (`SKYLARK_PUBLISH_WAIT_MS`) for the normalisation; audio still not final then is accepted and the episode is `processing`: it is published (and `podcast.published` sent) once the audio is final, so the feed never lists audio that will change; a schedule that falls due meanwhile waits the same way. `PATCH {status: "draft"}` cancels a waiting publication.',
    params: podcastId,
    body: { schema: valibot(PublishEpisode) },
    responses: { 200: { description: 'The episode, `published`, `scheduled` or `processing`.', schema: episode } },
    errors: { 400: ['episode_audio_missing'], 409: ['state_conflict'] },
  },
  listEpisodes: {
    summary: 'List episodes',
    description: 'Newest first, drafts and scheduled episodes included.',
    params: podcastId,
    query: [...pageQueryDoc('episodes'), { name: 'status', description: 'Only episodes in this state.', schema: { type: 'string', enum: [...EPISODE_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of episodes.', schema: valibot(listOf(EpisodeObjectSchema)) } },
  },
  createEpisode: {
    summary: 'Create an episode',
    description: 'A `draft` without audio: upload it with `PUT /podcasts/{id}/episodes/{eid}/audio`, then publish. An archived podcast takes no new episodes (409).',
    params: podcastId,
    body: { schema: valibot(CreateEpisode) },
    responses: { 201: { description: 'The new draft episode.', schema: episode } },
    errors: { 409: ['state_conflict'] },
  },
  getEpisode: {
    summary: 'Retrieve an episode',
    description:
      'A draft made from a recorded stream carries `chaptersUrl`: Podcasting 2.0 JSON chapters (`application/json+chapters`), one per track of the stream, public once the episode is published. `loudness`: the integrated loudness (LUFS), true peak (dBTP) and loudness range (LU) of what `audioUrl` serves, and whether that is a normalised copy (`normalized`, `target`, `method`, `originalAudioUrl`, `original`); null until measured.',
    params: episodeIds,
    responses: { 200: { description: 'The episode.', schema: episode } },
  },
  updateEpisode: {
    summary: 'Update an episode',
    description: '`status: "draft"` cancels a schedule (a draft or published episode → 409 `state_conflict`).',
    params: episodeIds,
    body: { schema: valibot(UpdateEpisode), required: false },
    responses: { 200: { description: 'The updated episode.', schema: episode } },
    errors: { 409: ['state_conflict'] },
  },
  deleteEpisode: {
    summary: 'Delete an episode',
    description: 'Removes the episode and its audio; a published one leaves the feed (`podcast.deleted`).',
    params: episodeIds,
    responses: { 200: { description: 'Deleted.', schema: valibot(Deleted('episode')) } },
  },
  uploadAudio: {
    summary: "Upload an episode's audio",
    description:
      'The audio file is the raw request body (not multipart), streamed to disk and probed: MP3, AAC/M4A, Ogg (Vorbis/Opus), FLAC, WAV or WebM. Replaces earlier audio. `Content-Type` should be the audio type; text, image, JSON, form and multipart types are refused before reading (415), and a body that is not audio after probing is refused too (415).',
    params: episodeIds,
    rawBody: { mediaTypes: AUDIO_UPLOAD_TYPES, description: 'The audio file, at most `SKYLARK_MAX_UPLOAD_BYTES` (default 500 MB).' },
    responses: {
      200: {
        description:
          'The episode with its `audio` (type, size, duration) and `audioUrl`. `loudness` is null here: the audio is measured (ITU-R BS.1770-4) after this answer, and with the podcast\'s `loudnessTarget` a normalised copy (same codec and bit rate) becomes `audioUrl` while the upload stays at `loudness.originalAudioUrl` — unless the episode was published first. Poll the episode until `loudness` is set.',
        schema: episode,
      },
    },
    errors: { 400: ['body_missing'], 413: ['body_too_large'], 415: ['unsupported_media_type'], 507: ['insufficient_storage'] },
    errorDescriptions: {
      413: 'Body larger than the upload limit (`SKYLARK_MAX_UPLOAD_BYTES`)',
      507: 'The data volume would fall under its free-space floor (`SKYLARK_MIN_FREE_DISK_BYTES`) or is full; nothing was stored and the episode is unchanged',
    },
  },
  putTranscript: {
    summary: "Set an episode's transcript",
    description:
      'The transcript is the raw request body: WebVTT (`text/vtt`), SubRip (`application/x-subrip`) or the Podcasting 2.0 transcript JSON (`application/json`: `{"version":"1.0.0","segments":[{"startTime","endTime","body","speaker"?}]}`, seconds). UTF-8, at most 2 MB. It is checked: the first error answers 400 `parameter_invalid` naming its line (and, for JSON, `param` = the path of the bad value). Replaces an earlier transcript. Served at `transcriptUrl` once the episode is published and listed in the feed as `podcast:transcript` (`rel="captions"` for WebVTT and SubRip).',
    params: episodeIds,
    rawBody: { mediaTypes: TRANSCRIPT_UPLOAD_TYPES, description: 'The transcript, at most 2 MB of UTF-8.' },
    responses: { 200: { description: 'The episode with its `transcriptUrl` and `transcriptType`.', schema: episode } },
    errors: { 400: ['body_missing', 'parameter_invalid'], 413: ['body_too_large'], 415: ['unsupported_media_type'] },
    errorDescriptions: { 413: 'Transcript larger than 2 MB', 415: 'Content-Type is not text/vtt, application/x-subrip or application/json' },
  },
  putChapters: {
    summary: "Set an episode's chapters",
    description:
      'The chapters are the raw request body: a Podcasting 2.0 JSON chapters document (`application/json+chapters`, or `application/json`): `{"version":"1.2.0","chapters":[{"startTime","title","img"?,"url"?,"toc"?,"endTime"?}]}`, times in seconds, `img` and `url` http(s) URLs, chapters in order of `startTime`, 1 to 1000 of them. UTF-8, at most 1 MB. It is checked: the first error answers 400 `parameter_invalid` with `param` = the JSON path of the bad value (`chapters.2.startTime`) and its line in the message. Replaces earlier chapters, a recording\'s too. Served at `chaptersUrl` once the episode is published and listed in the feed as `podcast:chapters`.',
    params: episodeIds,
    rawBody: { mediaTypes: [...CHAPTERS_UPLOAD_TYPES], description: 'The chapters document, at most 1 MB of UTF-8.' },
    responses: { 200: { description: 'The episode with its `chaptersUrl`.', schema: episode } },
    errors: { 400: ['body_missing', 'parameter_invalid'], 413: ['body_too_large'], 415: ['unsupported_media_type'] },
    errorDescriptions: { 413: 'Chapters document larger than 1 MB', 415: 'Content-Type is not application/json+chapters or application/json' },
  },
  deleteChapters: {
    summary: "Remove an episode's chapters",
    description: 'The episode keeps everything else; `chaptersUrl` becomes null and the feed drops its `podcast:chapters`. Removing chapters that are not there is no error.',
    params: episodeIds,
    responses: { 200: { description: 'The episode without chapters.', schema: episode } },
  },
  deleteTranscript: {
    summary: "Remove an episode's transcript",
    description: 'The episode keeps everything else; `transcriptUrl` becomes null and the feed drops its `podcast:transcript`. Removing a transcript that is not there is no error.',
    params: episodeIds,
    responses: { 200: { description: 'The episode without a transcript.', schema: episode } },
  },
} satisfies Record<string, RouteDoc>;
