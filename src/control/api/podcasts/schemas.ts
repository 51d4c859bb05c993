/**
 * Request schemas of the Podcasts and Episodes resources (spec "Podcasts", docs/behaviour.md §5, §9
 * "Podcasts"), and the objects they answer. Unknown body fields → 400 `parameter_unknown` (strict
 * objects).
 */
import * as v from 'valibot';
import { isAppleCategory } from '../../feed/categories.js';
import { METADATA_MAX_KEYS } from '../../services/podcasts.js';
import { LOUDNESS_TARGET_MAX, LOUDNESS_TARGET_MIN } from '../../services/loudness.js';
import { count, nullableString, objectId, timestamp } from '../openapi/schemas.js';

export { METADATA_MAX_KEYS };

export const PODCAST_STATUSES = ['draft', 'published', 'archived'] as const;
/** `processing`: publication asked while the audio is still being finished or normalised (docs/podcasts.md "Publishing while the audio is processed"). */
export const EPISODE_STATUSES = ['draft', 'scheduled', 'published', 'processing'] as const;
export const EPISODE_TYPES = ['full', 'trailer', 'bonus'] as const;
export const TITLE_MAX = 200;
export const DESCRIPTION_MAX = 4000; // Apple's limit for <description>
export const METADATA_MAX_VALUE = 512;

const plainObject = v.custom<Record<string, unknown>>((x) => typeof x === 'object' && x !== null && !Array.isArray(x), 'must be an object');
const title = v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(TITLE_MAX, `must be at most ${TITLE_MAX} characters`));
const description = v.pipe(v.string(), v.maxLength(DESCRIPTION_MAX, `must be at most ${DESCRIPTION_MAX} characters`));
const shortText = v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(255, 'must be at most 255 characters'));
/** BCP 47-ish language tag as RSS `<language>` takes it (`en`, `en-us`, `pt-BR`). */
const language = v.pipe(v.string(), v.regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'must be a language tag such as en or en-US'));
const category = v.pipe(v.string(), v.check(isAppleCategory, 'must be an Apple Podcasts category such as "Technology" or "Society & Culture > Documentary"'));
const httpUrl = v.pipe(v.string(), v.maxLength(2048), v.url('must be a URL'), v.regex(/^https?:\/\//, 'must be an http(s) URL'));
const email = v.pipe(v.string(), v.maxLength(254), v.email('must be an email address'));
const metadataKey = v.pipe(v.string(), v.minLength(1), v.maxLength(64));
const metadataValue = v.pipe(v.string('metadata values must be strings'), v.maxLength(METADATA_MAX_VALUE, `values must be at most ${METADATA_MAX_VALUE} characters`));
const positiveInt = v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1'), v.maxValue(1_000_000));
const podcastType = v.picklist(['episodic', 'serial'], 'must be episodic or serial');
/** A podcast's `loudnessTarget` (LUFS, docs/podcasts.md "Loudness"); null turns normalisation off. */
const loudnessTarget = v.nullable(
  v.pipe(
    v.number('must be a number of LUFS or null'),
    v.finite('must be a number of LUFS'),
    v.minValue(LOUDNESS_TARGET_MIN, `must be between ${LOUDNESS_TARGET_MIN} and ${LOUDNESS_TARGET_MAX} LUFS`),
    v.maxValue(LOUDNESS_TARGET_MAX, `must be between ${LOUDNESS_TARGET_MIN} and ${LOUDNESS_TARGET_MAX} LUFS`),
  ),
);

// ── Podcasting 2.0 tags (docs/podcasts.md "Feed completeness"; the namespace's tag definitions) ──

/** Entries per list field (`persons`, `soundbites`, `txt`, `podroll`). */
export const FEED_LIST_MAX = 50;
const listOf = <T extends v.GenericSchema>(item: T, what: string) =>
  v.pipe(v.array(item, `must be an array of ${what}`), v.maxLength(FEED_LIST_MAX, `at most ${FEED_LIST_MAX} entries`));
const seconds = v.pipe(v.number(), v.finite('must be a number of seconds'), v.minValue(0, 'must be at least 0'), v.maxValue(1_000_000));
/** A role or group of the namespace's person taxonomy (`host`, `guest`, `cast`, `writing`…), lower case. */
const taxonomyName = v.pipe(v.string(), v.trim(), v.toLowerCase(), v.regex(/^[a-z][a-z0-9 &/-]{0,63}$/, 'must be a role or group name of the Podcasting 2.0 person taxonomy, e.g. host, guest, cast'));
/** `podcast:person`: name (≤ 128), role (default host), group (default cast), href and img URLs. */
export const Person = v.strictObject({
  name: v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(128, 'must be at most 128 characters')),
  role: v.optional(taxonomyName),
  group: v.optional(taxonomyName),
  href: v.optional(httpUrl),
  img: v.optional(httpUrl),
});
/** `podcast:soundbite`: start and duration in seconds (duration > 0), optional title (≤ 128). */
export const Soundbite = v.strictObject({
  startTime: seconds,
  duration: v.pipe(seconds, v.check((n) => n > 0, 'must be more than 0')),
  title: v.optional(v.pipe(v.string(), v.trim(), v.maxLength(128, 'must be at most 128 characters'))),
});
/** `podcast:txt`: free text (≤ 4000) with an optional purpose (≤ 128), e.g. a directory's verification code. */
export const Txt = v.strictObject({
  purpose: v.optional(v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(128, 'must be at most 128 characters'))),
  value: v.pipe(v.string(), v.minLength(1, 'must not be empty'), v.maxLength(4000, 'must be at most 4000 characters')),
});
/** A `podcast:remoteItem` of `podcast:podroll`: another show's `podcast:guid`, and its feed URL. */
export const PodrollItem = v.strictObject({
  feedGuid: v.pipe(v.string(), v.toLowerCase(), v.uuid('must be a podcast:guid (a UUID)')),
  feedUrl: v.optional(httpUrl),
});
const persons = listOf(Person, 'persons');
const soundbites = listOf(Soundbite, 'soundbites');
const txt = listOf(Txt, 'txt entries');
const podroll = listOf(PodrollItem, 'podroll items');

/**
 * The Podcasting 2.0 transcript JSON (`application/json`): `version` and timed `segments`
 * (seconds), each with its `body` and an optional `speaker`.
 */
export const TranscriptJson = v.object({
  version: v.pipe(v.string('must be a string such as "1.0.0"'), v.minLength(1)),
  segments: v.pipe(
    v.array(
      v.object({
        startTime: seconds,
        endTime: seconds,
        body: v.string('must be a string'),
        speaker: v.optional(v.string('must be a string')),
      }),
      'must be an array of segments',
    ),
    v.minLength(1, 'must hold at least one segment'),
  ),
});

/** Most chapters a chapters document may hold. */
export const CHAPTERS_MAX = 1000;
/**
 * A Podcasting 2.0 JSON chapters document (`application/json+chapters`, the podcast namespace's
 * `chapters/jsonChapters.md`, version 1.2.0): `version` and `chapters`, each with `startTime`
 * (seconds), `title`, and optionally `img` and `url` (http(s) URLs), `toc` (whether a table of
 * contents lists it) and `endTime` (seconds). Other fields of the format (`author`, `location`…)
 * are kept as sent.
 */
export const ChaptersJson = v.object({
  version: v.pipe(v.string('must be a string such as "1.2.0"'), v.regex(/^1\.\d+(\.\d+)?$/, 'must be a version of the format such as "1.2.0"')),
  chapters: v.pipe(
    v.array(
      v.object({
        startTime: seconds,
        title: v.pipe(v.string('must be a string'), v.maxLength(512, 'must be at most 512 characters')),
        img: v.optional(httpUrl),
        url: v.optional(httpUrl),
        toc: v.optional(v.boolean('must be true or false')),
        endTime: v.optional(seconds),
      }),
      'must be an array of chapters',
    ),
    v.minLength(1, 'must hold at least one chapter'),
    v.maxLength(CHAPTERS_MAX, `must hold at most ${CHAPTERS_MAX} chapters`),
  ),
});

/** POST /podcasts. Only `title` is required (docs/behaviour.md §9). */
export const CreatePodcast = v.strictObject({
  title,
  description: v.optional(description),
  author: v.optional(shortText),
  language: v.optional(language),
  category: v.optional(category),
  explicit: v.optional(v.boolean()),
  imageUrl: v.optional(httpUrl),
  ownerEmail: v.optional(email),
  ownerName: v.optional(shortText),
  link: v.optional(httpUrl),
  type: v.optional(podcastType),
  locked: v.optional(v.boolean()),
  metadata: v.optional(
    v.pipe(plainObject, v.record(metadataKey, metadataValue), v.check((m) => Object.keys(m).length <= METADATA_MAX_KEYS, `at most ${METADATA_MAX_KEYS} keys`)),
  ),
  persons: v.optional(persons),
  txt: v.optional(txt),
  podroll: v.optional(podroll),
  loudnessTarget: v.optional(loudnessTarget),
});

/** PATCH /podcasts/{id}: optional fields are cleared with `null`; `status` moves the state (409 rules in the service). */
export const UpdatePodcast = v.strictObject({
  title: v.optional(title),
  description: v.optional(description),
  author: v.optional(v.nullable(shortText)),
  language: v.optional(language),
  category: v.optional(v.nullable(category)),
  explicit: v.optional(v.boolean()),
  imageUrl: v.optional(v.nullable(httpUrl)),
  ownerEmail: v.optional(v.nullable(email)),
  ownerName: v.optional(v.nullable(shortText)),
  link: v.optional(v.nullable(httpUrl)),
  type: v.optional(podcastType),
  locked: v.optional(v.boolean()),
  status: v.optional(v.picklist(PODCAST_STATUSES, 'must be draft, published or archived')),
  metadata: v.optional(v.pipe(plainObject, v.record(metadataKey, v.nullable(metadataValue)))),
  persons: v.optional(persons),
  txt: v.optional(txt),
  podroll: v.optional(podroll),
  loudnessTarget: v.optional(loudnessTarget),
});

/** POST /podcasts/{id}/episodes: a draft; audio comes by `PUT …/audio`. */
export const CreateEpisode = v.strictObject({
  title,
  description: v.optional(description),
  season: v.optional(v.nullable(positiveInt)),
  episodeNumber: v.optional(v.nullable(positiveInt)),
  episodeType: v.optional(v.picklist(EPISODE_TYPES, 'must be full, trailer or bonus')),
  explicit: v.optional(v.boolean()),
  persons: v.optional(persons),
  soundbites: v.optional(soundbites),
});

/** PATCH /podcasts/{id}/episodes/{eid}. `status: "draft"` cancels a schedule. */
export const UpdateEpisode = v.strictObject({
  title: v.optional(title),
  description: v.optional(description),
  season: v.optional(v.nullable(positiveInt)),
  episodeNumber: v.optional(v.nullable(positiveInt)),
  episodeType: v.optional(v.picklist(EPISODE_TYPES, 'must be full, trailer or bonus')),
  explicit: v.optional(v.boolean()),
  persons: v.optional(persons),
  soundbites: v.optional(soundbites),
  status: v.optional(v.literal('draft', 'only draft may be set (it cancels a schedule); publish with POST /podcasts/{id}/publish')),
});

/** POST /podcasts/{id}/publish. `publishAt` is an ISO 8601 timestamp with a zone. */
export const PublishEpisode = v.strictObject({
  episodeId: v.pipe(v.string(), v.regex(/^ep_[A-Za-z0-9]+$/, 'must be an episode id (ep_…)')),
  publishAt: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/, 'must be an ISO 8601 timestamp with a time zone, e.g. 2026-05-01T09:00:00Z'),
      v.check((s) => Number.isFinite(Date.parse(s)), 'must be a valid timestamp'),
    ),
  ),
});

// ── Answers (for the OpenAPI document; ./openapi.ts): `toPodcastObject` / `toEpisodeObject` (src/control/services/podcasts.ts, src/control/services/episode-object.ts) ──

/** The podcast object (spec "Podcasts", docs/behaviour.md §5, §9). */
export const PodcastObjectSchema = v.object({
  id: objectId('pod'),
  object: v.literal('podcast'),
  title: v.string(),
  description: v.string(),
  author: nullableString,
  language: v.string(),
  category: nullableString,
  explicit: v.boolean(),
  imageUrl: nullableString,
  ownerEmail: nullableString,
  ownerName: nullableString,
  link: nullableString,
  type: v.picklist(['episodic', 'serial']),
  locked: v.boolean(),
  status: v.picklist(PODCAST_STATUSES),
  episodeCount: count,
  feedUrl: v.string(),
  podcastGuid: v.pipe(v.string(), v.regex(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)),
  metadata: v.record(v.string(), v.string()),
  /** `podcast:person` entries (`[]` when none). */
  persons: v.array(Person),
  /** `podcast:txt` entries. */
  txt: v.array(Txt),
  /** `podcast:podroll` items. */
  podroll: v.array(PodrollItem),
  /** LUFS that new audio is normalised to (true peak ≤ −1 dBTP); null = off. */
  loudnessTarget: v.nullable(v.number()),
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** A BS.1770-4 measurement: integrated loudness (LUFS), true peak (dBTP; null for digital silence), loudness range (LU). */
const LoudnessMeasureSchema = v.object({ integratedLufs: v.number(), truePeakDbtp: v.nullable(v.number()), lraLu: v.number() });

/** The episode object (spec "Podcasts", docs/behaviour.md §5, §9). */
export const EpisodeObjectSchema = v.object({
  id: objectId('ep'),
  object: v.literal('episode'),
  podcastId: objectId('pod'),
  title: v.string(),
  description: v.string(),
  status: v.picklist(EPISODE_STATUSES),
  audioUrl: nullableString,
  audio: v.nullable(v.object({ mimeType: v.string(), sizeBytes: count, durationSeconds: v.nullable(v.number()) })),
  guid: nullableString,
  season: v.nullable(v.pipe(v.number(), v.integer())),
  episodeNumber: v.nullable(v.pipe(v.number(), v.integer())),
  episodeType: v.picklist(EPISODE_TYPES),
  explicit: v.boolean(),
  publishAt: v.nullable(timestamp),
  publishedAt: v.nullable(timestamp),
  sourceStreamId: nullableString,
  /** Podcasting 2.0 JSON chapters: a recorded stream's tracks (docs/behaviour.md §11) or those set with `PUT …/chapters`; null when none. */
  chaptersUrl: nullableString,
  /** The transcript (`PUT …/transcript`), public once published; null when none. */
  transcriptUrl: nullableString,
  /** Its MIME type: `text/vtt`, `application/x-subrip` or `application/json`; null when none. */
  transcriptType: nullableString,
  persons: v.array(Person),
  soundbites: v.array(Soundbite),
  /** BS.1770-4 loudness of what `audioUrl` serves (docs/podcasts.md "Loudness"); null until measured. */
  loudness: v.nullable(
    v.object({
      ...LoudnessMeasureSchema.entries,
      normalized: v.boolean(),
      target: v.nullable(v.number()),
      method: v.nullable(v.picklist(['linear', 'dynamic'])),
      originalAudioUrl: nullableString,
      original: v.nullable(LoudnessMeasureSchema),
    }),
  ),
  createdAt: timestamp,
  updatedAt: timestamp,
});
