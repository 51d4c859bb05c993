/**
 * The episode as the API shows it (docs/behaviour.md §5 "Podcasts and episodes", §11, §15): the
 * `episode` object, the validated bodies that make and change one, and the public URLs of its
 * audio, chapters and transcript. Pure: no database, no HTTP.
 */
import type { PublicUrls } from '../../base/config.js';
import type { EpisodeRow, EpisodeStatus, EpisodeType } from '../../base/db/podcasts-repo.js';
import { toEpisodeLoudness, type EpisodeLoudness } from './loudness.js';
import { jsonList, type PodcastPerson } from './podcasts.js';

/** A `podcast:soundbite`: a shareable part of the episode (seconds) with an optional title. */
export interface EpisodeSoundbite {
  startTime: number;
  duration: number;
  title?: string;
}

/** A validated `POST /podcasts/{id}/episodes` body (api/podcasts/schemas.ts validates it). */
export interface CreateEpisodeInput {
  title: string;
  description?: string;
  season?: number | null;
  episodeNumber?: number | null;
  episodeType?: 'full' | 'trailer' | 'bonus';
  explicit?: boolean;
  /** Podcasting 2.0 `podcast:person` entries of the episode (docs/podcasts.md "Feed completeness"). */
  persons?: PodcastPerson[];
  /** `podcast:soundbite` entries. */
  soundbites?: EpisodeSoundbite[];
}

/** A validated `PATCH /podcasts/{id}/episodes/{eid}` body; `status: 'draft'` cancels a schedule. */
export interface UpdateEpisodeInput extends Partial<CreateEpisodeInput> {
  status?: 'draft';
}

/** A validated `POST /podcasts/{id}/publish` body; `publishAt` ISO 8601 with a zone. */
export interface PublishEpisodeInput {
  episodeId: string;
  publishAt?: string;
}

/** The episode object of the API. Times are ISO 8601 UTC. */
export interface EpisodeObject {
  id: string;
  object: 'episode';
  podcastId: string;
  title: string;
  description: string;
  /**
   * `draft`, `scheduled`, `published`, or `processing`: publication was asked while the audio is
   * still being finished (a recording's hand-over) or loudness-normalised, and happens once it is
   * final (docs/podcasts.md "Publishing while the audio is processed").
   */
  status: EpisodeStatus | 'processing';
  /** `{cdn_url}/media/<podcast_id>/<file>`; the feed's enclosure URL. Null before audio is uploaded. */
  audioUrl: string | null;
  audio: { mimeType: string; sizeBytes: number; durationSeconds: number | null } | null;
  /** Fixed at first publication; null before. */
  guid: string | null;
  season: number | null;
  episodeNumber: number | null;
  episodeType: EpisodeType;
  explicit: boolean;
  publishAt: string | null;
  publishedAt: string | null;
  sourceStreamId: string | null;
  /**
   * Podcasting 2.0 JSON chapters (`application/json+chapters`) at
   * `{cdn_url}/media/<podcast_id>/<episode_id>.chapters.json` — one per track of the recorded stream
   * (docs/behaviour.md §11); public once published. Null when the episode has none.
   */
  chaptersUrl: string | null;
  /**
   * The transcript (`PUT …/transcript`) at `{cdn_url}/media/<podcast_id>/<episode_id>.transcript.<vtt|srt|json>`,
   * public once published; null when none. `transcriptType` is its MIME type.
   */
  transcriptUrl: string | null;
  transcriptType: TranscriptMime | null;
  persons: PodcastPerson[];
  soundbites: EpisodeSoundbite[];
  /**
   * The BS.1770-4 loudness of what `audioUrl` serves, and whether that is a normalised copy of the
   * upload (docs/podcasts.md "Loudness"); null until measured, shortly after the audio is stored.
   */
  loudness: EpisodeLoudness | null;
  createdAt: string;
  updatedAt: string;
}

/** The transcript formats (docs/podcasts.md "Transcripts") by MIME type, with their file extension. */
export const TRANSCRIPT_EXT = { 'text/vtt': 'vtt', 'application/x-subrip': 'srt', 'application/json': 'json' } as const;
export type TranscriptMime = keyof typeof TRANSCRIPT_EXT;

/** `{cdn_url}/media/<podcast_id>/<episode_id>.transcript.<ext>` of a transcript of `type`. */
export const transcriptUrlOf = (urls: PublicUrls, podcastId: string, episodeId: string, type: TranscriptMime) =>
  `${urls.cdnUrl}/media/${podcastId}/${episodeId}.transcript.${TRANSCRIPT_EXT[type]}`;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** `{cdn_url}/media/<podcast_id>/<file name>`. */
export const audioUrlOf = (urls: PublicUrls, podcastId: string, fileName: string) => `${urls.cdnUrl}/media/${podcastId}/${fileName}`;

/** `{cdn_url}/media/<podcast_id>/<episode_id>.chapters.json`. */
export const chaptersUrlOf = (urls: PublicUrls, podcastId: string, episodeId: string) => `${urls.cdnUrl}/media/${podcastId}/${episodeId}.chapters.json`;

/** Renders a row as the API object. */
export function toEpisodeObject(row: EpisodeRow, urls: PublicUrls): EpisodeObject {
  return {
    id: row.id,
    object: 'episode',
    podcastId: row.podcast_id,
    title: row.title,
    description: row.description,
    status: row.publish_pending === 1 ? 'processing' : row.status,
    audioUrl: row.audio_file ? audioUrlOf(urls, row.podcast_id, row.audio_file) : null,
    audio: row.audio_file ? { mimeType: row.audio_mime!, sizeBytes: row.audio_size!, durationSeconds: row.audio_duration } : null,
    guid: row.guid,
    season: row.season,
    episodeNumber: row.episode_number,
    episodeType: row.episode_type,
    explicit: row.explicit === 1,
    publishAt: iso(row.publish_at),
    publishedAt: iso(row.published_at),
    sourceStreamId: row.source_stream_id,
    chaptersUrl: row.chapters ? chaptersUrlOf(urls, row.podcast_id, row.id) : null,
    transcriptUrl: row.transcript && row.transcript_type ? transcriptUrlOf(urls, row.podcast_id, row.id, row.transcript_type as TranscriptMime) : null,
    transcriptType: row.transcript && row.transcript_type ? (row.transcript_type as TranscriptMime) : null,
    persons: jsonList(row.persons),
    soundbites: jsonList(row.soundbites),
    loudness: toEpisodeLoudness(row.loudness, row.original_audio_file ? audioUrlOf(urls, row.podcast_id, row.original_audio_file) : null),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}
