/**
 * OpenAPI descriptions of the Streams routes (./routes.ts), passed as the routes' `doc` option.
 * Request bodies are the schemas that validate them, answers the stream object (./schemas.ts).
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { Deleted, listOf } from '../openapi/schemas.js';
import { pageQueryDoc } from '../lists.js';
import { BroadcastObject, CreatePublishToken, PublishTokenObject, CreateStream, UpdateStream, STREAM_STATUSES, StreamObject, SetNowPlaying, TrackObject } from './schemas.js';

const stream = valibot(StreamObject);
const id = { id: 'The stream id (`stm_…`).' };
/** What `playback` takes and answers (docs/behaviour.md §13). */
const PLAYBACK_DOC =
  ' `playback`: `"public"` (default), `"token"` (listener tokens required; tokens minted with a publishable key, or an OAuth token without `streams:write`, are refused), or `{"mode": "token", "publishableKeyTokens": true}` (a token stream that also admits those); answered as that object when publishable-key tokens are allowed, else as the string.';
/** What `recording` and `timeZone` take (docs/streams.md "Listen again"). */
const RECORDING_DOC =
  ' `recording`: `{"podcastId": "pod_…", "publish": "draft" | "auto"}` — each broadcast becomes its own episode of the podcast, with the chapters of its play log; `publish: "auto"` publishes it when the broadcast ends, once its audio is loudness-normalised, titled `<stream title> — <YYYY-MM-DD of the broadcast in timeZone>` (`podcast.published`, feed notifications); `draft` (the default, also when absent) keeps it a draft. `timeZone`: an IANA time zone name (`Europe/Paris`; default `UTC`), answered in its canonical spelling.';
const deprecationHeaders = {
  Deprecation: { description: 'Present when `quality=ultra_low` was given (RFC 9745).', schema: { type: 'string' } },
  Warning: { description: '299 warning naming `low` as the replacement of `ultra_low`.', schema: { type: 'string' } },
};

/** The descriptions, by route (keys used in ./routes.ts). */
export const STREAM_DOCS = {
  list: {
    summary: 'List streams',
    description: 'Newest first. `hasMore` and `nextCursor` continue in the direction of travel.',
    query: [...pageQueryDoc(), { name: 'status', description: 'Only streams in this state.', schema: { type: 'string', enum: [...STREAM_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of streams.', schema: valibot(listOf(StreamObject)) } },
  },
  create: {
    summary: 'Create a stream',
    body: {
      schema: valibot(CreateStream),
      description:
        '`metadata`: up to 16 keys. `quality=ultra_low` is a deprecated alias of `low`. `latencyMode`: `standard` (classic HLS, the default; one playlist poll and one segment per 2 s per listener) or `low` (LL-HLS: ~0.5 s parts, blocking playlist reload, preload hints; ~4 requests per listener-second, several times the CPU per listener). `fallback` (docs/streams.md "Fallback"): up to 100 episodes of the account with audio (`episodeIds`), `order` `sequential` (default) or `shuffle`, `silenceSeconds` 5–300 or null; set, the stream is on air with it while no live audio plays (`source: "fallback"`; `status` stays `idle` outside a broadcast: it tells broadcasts, `source` what is audible), encoded in the format of its last live source.' +
        ' `icecastMount` (docs/icecast.md "Mounts"): the stream\'s own mount on the Icecast port besides `/live/<id>`, e.g. `/stream` or `/radio.mp3` — `/` then at most 63 of `A-Z a-z 0-9 . _ - /`, not `/live…`, `/admin…` or `/status-json.xsl`; one stream per mount on the node (409 `icecast_mount_taken`).' +
        ' `catchUp` (docs/behaviour.md "Catch-up radio"): `{hours}`, an integer 0–168 (0 = off, the default); on, every layer\'s segments of the last `hours` stay on disk and are served at `/hls/<id>/rewind.m3u8`, `from/<t>.m3u8`, `archive/<t>-<seconds>.m3u8` and `broadcasts/<brd>.m3u8`.' +
        PLAYBACK_DOC + RECORDING_DOC,
    },
    responses: { 201: { description: 'The new stream (status `idle`). `streamKey` for secret keys only.', schema: stream, headers: deprecationHeaders } },
    errors: { 409: ['icecast_mount_taken'] },
  },
  get: {
    summary: 'Retrieve a stream',
    params: id,
    responses: { 200: { description: 'The stream. `streamKey` for secret keys only.', schema: stream } },
  },
  update: {
    summary: 'Update a stream',
    description:
      '`metadata` keys given as `null` are removed, others set; at most 16 keys after the merge. `fallback` is replaced as a whole and takes effect at once (docs/streams.md "Fallback"); `null` removes it (an idle stream goes off air). `icecastMount` is set, moved or (`null`) removed; a source or listener already connected stays (docs/icecast.md "Mounts"); another stream\'s mount is 409 `icecast_mount_taken`. `recording` and `timeZone` apply to broadcasts that end from then on. `catchUp.hours` takes effect at once: segments from then on are kept; lowered, older ones go at the next sweep (within a minute).' + PLAYBACK_DOC + RECORDING_DOC,
    params: id,
    body: { schema: valibot(UpdateStream), required: false },
    responses: { 200: { description: 'The updated stream.', schema: stream, headers: deprecationHeaders } },
    errors: { 409: ['icecast_mount_taken'] },
  },
  delete: {
    summary: 'Delete a stream',
    description: 'A live stream is stopped first (its broadcast ends: `stream.ended`).',
    params: id,
    responses: { 200: { description: 'Deleted.', schema: valibot(Deleted('stream')) } },
  },
  publishToken: {
    summary: 'Create a publish token',
    description:
      'A JWT that publishes to this stream over WHIP (`POST {whipUrl}` with `Authorization: Bearer <token>`, RFC 9725) and nothing else, so a page or a guest never sees the stream key. Valid `ttlSeconds` (default 600, 60 to 86400). Secret key or OAuth `streams:write`.',
    params: id,
    body: { schema: valibot(CreatePublishToken), required: false },
    responses: { 201: { description: 'The publish token.', schema: valibot(PublishTokenObject) } },
  },
  resetStreamKey: {
    summary: 'Reset the stream key',
    description: 'The old key stops working at once; the answer carries the new one.',
    params: id,
    responses: { 200: { description: 'The stream with its new `streamKey`.', schema: stream } },
  },
  setNowPlaying: {
    summary: 'Set what plays now',
    description:
      'Sets the live stream\'s `nowPlaying` (its `startedAt` now), the same change an Icecast source\'s metadata call or an RTMP `onMetaData` `title` makes: the HLS layers and the listening output\'s `StreamTitle` carry it, `stream.now_playing` is sent, and a new track starts in the play log. The same values as now are no change (the stream is answered as it is).',
    params: id,
    body: { schema: valibot(SetNowPlaying), description: '`title` (1–256 characters) is required; `artist` and `album` at most 256; `url` and `artworkUrl` http(s) URLs.' },
    responses: { 200: { description: 'The stream with its new `nowPlaying`.', schema: stream } },
    errors: { 409: ['stream_not_live'] },
  },
  tracks: {
    summary: 'List the play log',
    description:
      'The stream\'s tracks, newest first: one per now-playing change, ended by the next change or the stream\'s end. `listenersAtStart` is the live listener count at the change; `peakListeners` and `countries` (distinct listeners per country heard during the track) are current while it runs. `broadcastId` is the broadcast whose audio the track names (the title a source sets on connect is its broadcast\'s first track); null for a fallback episode\'s title.',
    params: id,
    query: [...pageQueryDoc('tracks'), { name: 'broadcast', description: 'Only the tracks of this broadcast (`brd_…` of the stream; 404 when it is not): those with its `broadcastId`.', schema: { type: 'string' } }],
    responses: { 200: { description: 'A list envelope of tracks.', schema: valibot(listOf(TrackObject)) } },
  },
  broadcasts: {
    summary: 'List the broadcasts',
    description:
      'The stream\'s broadcasts, newest first: each stretch from `live` to the end of the reconnect window. While one runs, its `endedAt` is null and its listener figures are current.',
    params: id,
    query: pageQueryDoc('broadcasts'),
    responses: { 200: { description: 'A list envelope of broadcasts.', schema: valibot(listOf(BroadcastObject)) } },
  },
  broadcast: {
    summary: 'Retrieve a broadcast',
    params: { id: 'The stream id (`stm_…`).', bid: 'The broadcast id (`brd_…`).' },
    responses: { 200: { description: 'The broadcast.', schema: valibot(BroadcastObject) } },
  },
} satisfies Record<string, RouteDoc>;
