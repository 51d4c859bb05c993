/**
 * Request schemas of the Streams resource (spec "POST /streams request body", docs/behaviour.md §2, §9),
 * and the stream object it answers. The same schemas validate requests and describe them in the
 * OpenAPI document (./openapi.ts).
 */
import * as v from 'valibot';
import { canonicalTimeZone, ICECAST_MOUNT_PATTERN, icecastMountProblem, LANGUAGE_TITLES, METADATA_MAX_KEYS } from '../../services/streams.js';
import { count, nullableString, objectId, timestamp } from '../openapi/schemas.js';

export { LANGUAGE_TITLES, METADATA_MAX_KEYS };

export const QUALITIES = ['low', 'medium', 'high'] as const;
export const CODECS = ['aac', 'opus', 'mp3'] as const;
export const REGION_IDS = ['eu-west-1', 'ap-southeast-1'] as const;
export const METADATA_MAX_VALUE = 512;
export const METADATA_MAX_KEY = 64;
export const TITLE_MAX = 200;

const title = v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(TITLE_MAX, `must be at most ${TITLE_MAX} characters`));
const languageTitle = v.pipe(v.string(), v.maxLength(TITLE_MAX, `must be at most ${TITLE_MAX} characters`));
/** `ultra_low` is the deprecated alias of `low` (removed in 2.5.0). */
const quality = v.picklist([...QUALITIES, 'ultra_low'], 'must be one of low, medium, high');
/** Guards a `v.record`: valibot's record also accepts arrays (`["a"]` → `{"0":"a"}`), which JSON clients must not get away with. */
const plainObject = v.custom<Record<string, unknown>>((x) => typeof x === 'object' && x !== null && !Array.isArray(x), 'must be an object');
const metadataKey = v.pipe(v.string(), v.minLength(1), v.maxLength(METADATA_MAX_KEY));
const metadataValue = v.pipe(v.string('metadata values must be strings'), v.maxLength(METADATA_MAX_VALUE, `values must be at most ${METADATA_MAX_VALUE} characters`));
const reconnectWindow = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(300));
/** `recording` (docs/streams.md "Listen again"): the podcast each broadcast becomes an episode of, and whether that episode is published when the broadcast ends (`auto`) or stays a draft (`draft`, the default). */
export const RECORDING_PUBLISH = ['draft', 'auto'] as const;
const recording = v.nullable(
  v.pipe(
    plainObject,
    v.strictObject({
      podcastId: v.pipe(v.string(), v.regex(/^pod_[A-Za-z0-9]+$/, 'must be a podcast id (pod_…)')),
      publish: v.optional(v.picklist(RECORDING_PUBLISH, 'must be draft or auto')),
    }),
  ),
);
/** `timeZone`: an IANA time zone name (`Europe/Paris`, `UTC`), stored as the runtime's canonical spelling (docs/streams.md "Listen again"). */
const timeZone = v.pipe(
  v.string('must be an IANA time zone name such as Europe/Paris'),
  v.maxLength(64, 'must be an IANA time zone name such as Europe/Paris'),
  v.check((z) => canonicalTimeZone(z) !== null, 'must be an IANA time zone name such as Europe/Paris or UTC'),
  v.transform((z) => canonicalTimeZone(z)!),
);
/**
 * `playback` (docs/streams.md "Playback"): `"public"`, `"token"`, or the object form
 * `{mode, publishableKeyTokens}`; `publishableKeyTokens: true` (token streams only) lets listener
 * tokens minted with a publishable key open the stream (docs/behaviour.md §13).
 */
const playback = v.union(
  [
    v.picklist(['public', 'token']),
    v.pipe(
      plainObject,
      v.strictObject({ mode: v.picklist(['public', 'token'], 'must be public or token'), publishableKeyTokens: v.optional(v.boolean('must be a boolean')) }),
      v.check((p) => p.mode === 'token' || p.publishableKeyTokens !== true, 'publishableKeyTokens applies to token streams only'),
    ),
  ],
  'must be public, token or {mode: "token", publishableKeyTokens: true|false}',
);
export const LATENCY_MODES = ['standard', 'low'] as const;
const latencyMode = v.picklist(LATENCY_MODES, 'must be standard or low');
/** Most episodes a fallback lists (docs/streams.md "Fallback"). */
export const FALLBACK_MAX_EPISODES = 100;
export const FALLBACK_ORDERS = ['sequential', 'shuffle'] as const;
/** `fallback` (docs/streams.md "Fallback"): null, or episodes of the account with audio, their order and the silence (s) that switches to it. */
const fallback = v.nullable(
  v.pipe(
    plainObject,
    v.strictObject({
      episodeIds: v.pipe(
        v.array(v.pipe(v.string('must be episode ids'), v.regex(/^ep_[A-Za-z0-9]+$/, 'must be episode ids (ep_…)'))),
        v.minLength(1, 'must list at least one episode'),
        v.maxLength(FALLBACK_MAX_EPISODES, `must list at most ${FALLBACK_MAX_EPISODES} episodes`),
      ),
      order: v.optional(v.picklist(FALLBACK_ORDERS, 'must be sequential or shuffle'), 'sequential'),
      silenceSeconds: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(5, 'must be 5–300'), v.maxValue(300, 'must be 5–300'))), null),
    }),
  ),
);

/** `icecastMount` (docs/icecast.md "Mounts"): a path such as `/stream`, or null for none. */
const icecastMount = v.nullable(
  v.pipe(
    v.string('must be a string'),
    v.regex(ICECAST_MOUNT_PATTERN, 'must start with / and be at most 64 characters of A-Z a-z 0-9 . _ - /'),
    v.check((m) => icecastMountProblem(m) === null, (issue) => icecastMountProblem(String(issue.input)) ?? 'is not allowed'),
  ),
);

/** Most hours of catch-up a stream keeps (a week: docs/behaviour.md "Catch-up radio"). */
export const CATCH_UP_MAX_HOURS = 168;
/** `catchUp` (docs/behaviour.md "Catch-up radio"): `{hours}`, an integer 0–168 (0 = off). */
const catchUp = v.pipe(
  plainObject,
  v.strictObject({
    hours: v.pipe(v.number('must be an integer 0–168'), v.integer('must be an integer 0–168'), v.minValue(0, 'must be an integer 0–168'), v.maxValue(CATCH_UP_MAX_HOURS, 'must be an integer 0–168')),
  }),
);

export const CreateStream = v.strictObject({
  title,
  title_en: v.optional(languageTitle),
  title_ru: v.optional(languageTitle),
  title_de: v.optional(languageTitle),
  title_fr: v.optional(languageTitle),
  quality: v.optional(quality),
  codec: v.optional(v.picklist(CODECS, 'must be one of aac, opus, mp3')),
  region: v.optional(v.picklist(REGION_IDS, 'must be eu-west-1 or ap-southeast-1')),
  metadata: v.optional(
    v.pipe(
      plainObject,
      v.record(metadataKey, metadataValue),
      v.check((m) => Object.keys(m).length <= METADATA_MAX_KEYS, `at most ${METADATA_MAX_KEYS} keys`),
    ),
  ),
  reconnectWindow: v.optional(reconnectWindow),
  recording: v.optional(recording),
  playback: v.optional(playback),
  latencyMode: v.optional(latencyMode),
  fallback: v.optional(fallback),
  icecastMount: v.optional(icecastMount),
  timeZone: v.optional(timeZone),
  catchUp: v.optional(catchUp),
});

export const UpdateStream = v.strictObject({
  title: v.optional(title),
  title_en: v.optional(v.nullable(languageTitle)),
  title_ru: v.optional(v.nullable(languageTitle)),
  title_de: v.optional(v.nullable(languageTitle)),
  title_fr: v.optional(v.nullable(languageTitle)),
  quality: v.optional(quality),
  /** `null` values remove keys; the merge must still fit 16 keys (checked by the service). */
  metadata: v.optional(v.pipe(plainObject, v.record(metadataKey, v.nullable(metadataValue)))),
  reconnectWindow: v.optional(reconnectWindow),
  recording: v.optional(recording),
  playback: v.optional(playback),
  latencyMode: v.optional(latencyMode),
  fallback: v.optional(fallback),
  icecastMount: v.optional(icecastMount),
  timeZone: v.optional(timeZone),
  catchUp: v.optional(catchUp),
});

/** A stream is `live` during a broadcast and `idle` between them; it has no terminal state (docs/streams.md). */
export const STREAM_STATUSES = ['idle', 'live'] as const;

/** Longest now-playing text (title, artist, album; docs/behaviour.md §11). */
export const NOW_PLAYING_MAX = 256;
const npText = v.pipe(v.string(), v.trim(), v.maxLength(NOW_PLAYING_MAX, `must be at most ${NOW_PLAYING_MAX} characters`));
const npUrl = v.pipe(v.string(), v.maxLength(2048, 'must be at most 2048 characters'), v.url('must be a URL'), v.regex(/^https?:\/\//, 'must be an http(s) URL'));

/** `POST /streams/{id}/now_playing` (docs/behaviour.md §11): `title` required; the others may be null or left out. */
export const SetNowPlaying = v.strictObject({
  title: v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(NOW_PLAYING_MAX, `must be at most ${NOW_PLAYING_MAX} characters`)),
  artist: v.optional(v.nullable(npText)),
  album: v.optional(v.nullable(npText)),
  url: v.optional(v.nullable(npUrl)),
  artworkUrl: v.optional(v.nullable(npUrl)),
});

// ── Answers (for the OpenAPI document; ./openapi.ts) ──

/** spec "Stream", docs/behaviour.md §2, §9. `streamKey` only for secret keys. */
export const StreamObject = v.object({
  id: objectId('stm'),
  object: v.literal('stream'),
  title: v.string(),
  title_en: nullableString,
  title_ru: nullableString,
  title_de: nullableString,
  title_fr: nullableString,
  status: v.picklist(STREAM_STATUSES),
  quality: v.picklist(QUALITIES),
  codec: v.picklist(CODECS),
  region: v.picklist(REGION_IDS),
  rtmpUrl: v.string(),
  streamKey: v.optional(v.pipe(v.string(), v.regex(/^sk_[a-z0-9]+_[A-Za-z0-9]+$/))),
  hlsUrl: v.string(),
  listenUrl: v.string(),
  icecastUrl: v.string(),
  whipUrl: v.string(),
  nowPlaying: v.nullable(
    v.object({
      title: v.string(),
      artist: nullableString,
      album: nullableString,
      url: nullableString,
      artworkUrl: nullableString,
      startedAt: timestamp,
    }),
  ),
  listenerCount: count,
  reconnectWindow: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(300)),
  /** `publish` as set (absent: `draft`, each episode stays a draft). */
  recording: v.nullable(v.object({ podcastId: v.string(), publish: v.optional(v.picklist(RECORDING_PUBLISH)) })),
  /** A string unless a token stream admits publishable-key tokens: then `{mode: "token", publishableKeyTokens: true}`. */
  playback: v.union([v.picklist(['public', 'token']), v.object({ mode: v.literal('token'), publishableKeyTokens: v.boolean() })]),
  latencyMode: v.picklist(LATENCY_MODES),
  createdAt: timestamp,
  startedAt: v.nullable(timestamp),
  endedAt: v.nullable(timestamp),
  metadata: v.record(v.string(), v.string()),
  fallback: v.nullable(v.object({ episodeIds: v.array(v.string()), order: v.picklist(FALLBACK_ORDERS), silenceSeconds: v.nullable(v.number()) })),
  source: v.nullable(v.picklist(['live', 'fallback'])),
  icecastMount: nullableString,
  /** IANA time zone of the stream: the date in its broadcasts' episode titles (docs/streams.md "Listen again"). */
  timeZone: v.string(),
  catchUp: v.object({ hours: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(CATCH_UP_MAX_HOURS)) }),
});

/** One track of the play log (docs/behaviour.md §11): `countries` counts the distinct listeners per country heard during it. */
export const TrackObject = v.object({
  id: objectId('trk'),
  object: v.literal('track'),
  streamId: objectId('stm'),
  title: v.string(),
  artist: nullableString,
  album: nullableString,
  url: nullableString,
  artworkUrl: nullableString,
  startedAt: timestamp,
  endedAt: v.nullable(timestamp),
  broadcastId: v.nullable(objectId('brd')),
  listenersAtStart: count,
  peakListeners: count,
  countries: v.array(v.object({ country: nullableString, listeners: count })),
});

/**
 * One broadcast of a stream (docs/streams.md): from `live` to the end of the reconnect window.
 * `integratedLufs`: its integrated loudness (ITU-R BS.1770-4, LUFS to 0.1; so far while it runs),
 * null when not measured (docs/streams.md "Live loudness").
 */
export const BroadcastObject = v.object({
  id: objectId('brd'),
  object: v.literal('broadcast'),
  streamId: objectId('stm'),
  startedAt: timestamp,
  endedAt: v.nullable(timestamp),
  durationSeconds: v.pipe(v.number(), v.minValue(0)),
  peakListeners: count,
  totalListeners: count,
  listenerSeconds: v.pipe(v.number(), v.minValue(0)),
  countries: v.array(v.object({ country: nullableString, listeners: count })),
  episodeId: nullableString,
  trackCount: count,
  integratedLufs: v.nullable(v.number()),
  /** The broadcast's catch-up playlist (docs/behaviour.md "Catch-up radio"); null when catch-up is off or none of it is kept. */
  catchUpUrl: nullableString,
});

/** `POST /streams/{id}/publish_tokens` (docs/behaviour.md "Go live over WHIP"): an optional lifetime, 60 s – 24 h (default 600). */
export const CreatePublishToken = v.strictObject({
  ttlSeconds: v.optional(v.pipe(v.number(), v.integer('must be an integer'), v.minValue(60, 'must be at least 60'), v.maxValue(86_400, 'must be at most 86400 (24 h)'))),
});

/** A new publish token. */
export const PublishTokenObject = v.object({
  object: v.literal('publish_token'),
  token: v.string(),
  streamId: v.string(),
  whipUrl: v.string(),
  expiresAt: timestamp,
});
