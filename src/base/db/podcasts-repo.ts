/**
 * Podcasts and episodes (docs/behaviour.md §5): rows, list pages, the scheduler's due query and the feed's
 * reads. Times are Unix milliseconds. The only SQL of the podcasts feature.
 */
import type { Database } from './database.js';
import { paginator, UnknownCursorError, type Page, type PageQuery } from './paginate.js';

export type PodcastStatus = 'draft' | 'published' | 'archived';
export type EpisodeStatus = 'draft' | 'scheduled' | 'published';
export type EpisodeType = 'full' | 'trailer' | 'bonus';

/** A `podcasts` row (plus `episode_count` when read through the view). */
export interface PodcastRow {
  id: string;
  account_id: string;
  title: string;
  description: string;
  author: string | null;
  language: string;
  category: string | null;
  explicit: number; // 0 | 1
  image_url: string | null;
  owner_email: string | null;
  owner_name: string | null;
  link: string | null;
  type: 'episodic' | 'serial';
  locked: number; // 0 | 1
  metadata: string; // JSON object
  status: PodcastStatus;
  podcast_guid: string;
  feed_url: string;
  created_at: number;
  updated_at: number;
  /** Podcasting 2.0 tags (JSON arrays as the API gives them; migration 012): `podcast:person`, `podcast:txt`, `podcast:podroll`. */
  persons?: string;
  txt?: string;
  podroll?: string;
  /** Normalisation target of new audio (LUFS), null = off (migration 011, docs/podcasts.md "Loudness"). */
  loudness_target?: number | null;
}

/** A podcast row with its episode count (every episode that exists). */
export interface PodcastWithCount extends PodcastRow {
  episode_count: number;
}

/** An `episodes` row. `audio_file` is the file name under `<dataDir>/media/<podcast_id>/`. */
export interface EpisodeRow {
  id: string;
  account_id: string;
  podcast_id: string;
  title: string;
  description: string;
  status: EpisodeStatus;
  audio_file: string | null;
  audio_mime: string | null;
  audio_size: number | null; // bytes
  audio_duration: number | null; // seconds
  audio_updated_at: number | null;
  guid: string | null;
  season: number | null;
  episode_number: number | null;
  episode_type: EpisodeType;
  explicit: number; // 0 | 1
  publish_at: number | null;
  published_at: number | null;
  source_stream_id: string | null;
  /** Podcasting 2.0 JSON chapters of a recorded stream's tracks (the document as served), or null. */
  chapters: string | null;
  created_at: number;
  updated_at: number;
  /** The transcript as served (UTF-8) and its MIME type (migration 012), or null. */
  transcript?: string | null;
  transcript_type?: string | null;
  /** `podcast:person` and `podcast:soundbite` entries (JSON arrays as the API gives them). */
  persons?: string;
  soundbites?: string;
  /** Loudness (migration 011, src/base/db/loudness-repo.ts writes them): the measurement (JSON), the work left, and the upload kept beside a normalised `audio_file`. */
  loudness?: string | null;
  loudness_state?: 'measure' | 'normalize' | 'done' | 'failed' | null;
  original_audio_file?: string | null;
  original_audio_size?: number | null;
  /** 1 while a publication waits for the audio to be final (migration 022): the API says `processing`. */
  publish_pending?: number;
}

/** What the transcript route needs to answer for one episode. */
export interface EpisodeTranscriptRow {
  podcast_id: string;
  status: EpisodeStatus;
  transcript: string | null;
  transcript_type: string | null;
  updated_at: number;
}

/** What the media route needs to answer for one audio file. */
export interface AudioFileRow {
  podcast_id: string;
  audio_file: string;
  audio_mime: string;
  audio_size: number;
  audio_updated_at: number;
  status: EpisodeStatus;
}

/** What the chapters route needs to answer for one episode. */
export interface EpisodeChaptersRow {
  podcast_id: string;
  status: EpisodeStatus;
  chapters: string | null;
  updated_at: number;
}

/** Aggregate that changes whenever a podcast's feed could change (the feed cache key). */
export interface FeedStamp {
  published: number;
  lastChange: number; // ms, max updated_at over the podcast and its published episodes
}

const PODCAST_COLS = `id, account_id, title, description, author, language, category, explicit, image_url, owner_email, owner_name,
  link, type, locked, metadata, status, podcast_guid, feed_url, created_at, updated_at`;
const EPISODE_COLS = `id, account_id, podcast_id, title, description, status, audio_file, audio_mime, audio_size, audio_duration,
  audio_updated_at, guid, season, episode_number, episode_type, explicit, publish_at, published_at, source_stream_id, chapters, created_at, updated_at`;
/** The audio of an episode is final: stored, and no loudness normalisation will replace it. */
const AUDIO_READY = `audio_file IS NOT NULL AND COALESCE(loudness_state, '') <> 'normalize'`;
const params = (cols: string) => cols.split(',').map((c) => `@${c.trim()}`).join(', ');

/** Prepared statements over `podcasts` and `episodes`. */
export class PodcastsRepo {
  private readonly s;
  private readonly podcastPage;
  private readonly episodePage;

  constructor(readonly db: Database) {
    this.s = {
      insertPodcast: db.prepare(`INSERT INTO podcasts (${PODCAST_COLS}) VALUES (${params(PODCAST_COLS)})`),
      updatePodcast: db.prepare(`UPDATE podcasts SET title = @title, description = @description, author = @author, language = @language,
        category = @category, explicit = @explicit, image_url = @image_url, owner_email = @owner_email, owner_name = @owner_name,
        link = @link, type = @type, locked = @locked, metadata = @metadata, status = @status, updated_at = @updated_at WHERE id = @id`),
      podcast: db.prepare('SELECT * FROM podcasts_v WHERE id = ? AND account_id = ?'),
      podcastAny: db.prepare('SELECT * FROM podcasts_v WHERE id = ?'),
      exists: db.prepare('SELECT 1 FROM podcasts WHERE id = ? AND account_id = ?').pluck(),
      touch: db.prepare('UPDATE podcasts SET updated_at = MAX(updated_at, ?) WHERE id = ?'),
      setPodcastStatus: db.prepare('UPDATE podcasts SET status = ?, updated_at = ? WHERE id = ? AND status = ?'),
      insertEpisode: db.prepare(`INSERT INTO episodes (${EPISODE_COLS}) VALUES (${params(EPISODE_COLS)})`),
      updateEpisode: db.prepare(`UPDATE episodes SET title = @title, description = @description, status = @status, audio_file = @audio_file,
        audio_mime = @audio_mime, audio_size = @audio_size, audio_duration = @audio_duration, audio_updated_at = @audio_updated_at,
        guid = @guid, season = @season, episode_number = @episode_number, episode_type = @episode_type, explicit = @explicit,
        publish_at = @publish_at, published_at = @published_at, updated_at = @updated_at WHERE id = @id`),
      episode: db.prepare('SELECT * FROM episodes WHERE id = ? AND podcast_id = ? AND account_id = ?'),
      deleteEpisode: db.prepare('DELETE FROM episodes WHERE id = ?'),
      episodeInPodcast: db.prepare('SELECT 1 FROM episodes WHERE id = ? AND podcast_id = ?').pluck(),
      publishIfDue: db.prepare(`UPDATE episodes SET status = 'published', published_at = @now, guid = COALESCE(guid, @guid), updated_at = @now
        WHERE id = @id AND status = 'scheduled' AND publish_at <= @now AND ${AUDIO_READY}`),
      // Due while the audio is still processed: the publication waits for it (docs/podcasts.md "Publishing while the audio is processed").
      dueToPending: db.prepare(`UPDATE episodes SET status = 'draft', publish_at = NULL, publish_pending = 1, updated_at = @now
        WHERE status = 'scheduled' AND publish_at <= @now AND NOT (${AUDIO_READY})`),
      setPending: db.prepare('UPDATE episodes SET publish_pending = ? WHERE id = ?'),
      publishPending: db.prepare(`UPDATE episodes SET status = 'published', publish_pending = 0, publish_at = NULL, published_at = @now,
        guid = COALESCE(guid, @guid), updated_at = @now WHERE id = @id AND publish_pending = 1 AND status = 'draft' AND ${AUDIO_READY}`),
      pendingReady: db.prepare(`SELECT id FROM episodes WHERE publish_pending = 1 AND ${AUDIO_READY} ORDER BY seq LIMIT 100`).pluck(),
      setChapters: db.prepare('UPDATE episodes SET chapters = ?, updated_at = ? WHERE id = ?'),
      due: db.prepare(`SELECT * FROM episodes WHERE status = 'scheduled' AND publish_at <= ? AND ${AUDIO_READY} ORDER BY publish_at, seq LIMIT 100`),
      nextDue: db.prepare(`SELECT MIN(publish_at) FROM episodes WHERE status = 'scheduled'`).pluck(),
      unschedule: db.prepare(`UPDATE episodes SET status = 'draft', publish_at = NULL, updated_at = @now WHERE podcast_id = @podcastId AND status = 'scheduled'`),
      published: db.prepare(`SELECT * FROM episodes WHERE podcast_id = ? AND status = 'published' ORDER BY published_at DESC, seq DESC`),
      publishedCount: db.prepare(`SELECT COUNT(*) FROM episodes WHERE podcast_id = ? AND status = 'published'`).pluck(),
      stamp: db.prepare(`SELECT COUNT(*) AS published, COALESCE(MAX(updated_at), 0) AS lastChange FROM episodes WHERE podcast_id = ? AND status = 'published'`),
      // An episode's audio, or the original it keeps beside a loudness-normalised copy (same type).
      audio: db.prepare(`SELECT podcast_id, audio_file, audio_mime, audio_size, audio_updated_at, status FROM episodes WHERE audio_file = @name
        UNION ALL SELECT podcast_id, original_audio_file, audio_mime, original_audio_size, audio_updated_at, status FROM episodes WHERE original_audio_file = @name`),
      chapters: db.prepare(`SELECT podcast_id, status, chapters, updated_at FROM episodes WHERE id = ?`),
      transcriptOf: db.prepare(`SELECT podcast_id, status, transcript, transcript_type, updated_at FROM episodes WHERE id = ?`),
      setTranscript: db.prepare('UPDATE episodes SET transcript = ?, transcript_type = ?, updated_at = ? WHERE id = ?'),
      setEpisodeTags: db.prepare('UPDATE episodes SET persons = ?, soundbites = ? WHERE id = ?'),
      setPodcastTags: db.prepare('UPDATE podcasts SET persons = ?, txt = ?, podroll = ? WHERE id = ?'),
    };
    this.podcastPage = paginator<PodcastWithCount>(db, 'podcasts_v', 'account_id = @accountId AND (@status IS NULL OR status = @status)');
    // `processing` is a draft whose publication waits for its audio (publish_pending = 1).
    this.episodePage = paginator<EpisodeRow>(
      db,
      'episodes',
      "account_id = @accountId AND podcast_id = @podcastId AND (@status IS NULL OR (CASE WHEN publish_pending = 1 THEN 'processing' ELSE status END) = @status)",
    );
  }

  /** Runs `fn` in one IMMEDIATE transaction. */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  insertPodcast(row: PodcastRow): void {
    this.s.insertPodcast.run(row);
  }
  /** Writes every mutable column of `row` (by id). */
  updatePodcast(row: PodcastRow): void {
    this.s.updatePodcast.run(row);
  }
  /** The podcast `id` of `accountId` with its episode count, or undefined. */
  getPodcast(id: string, accountId: string): PodcastWithCount | undefined {
    return this.s.podcast.get(id, accountId) as PodcastWithCount | undefined;
  }
  /** The podcast `id` of any account (the public feed). */
  getPodcastAny(id: string): PodcastWithCount | undefined {
    return this.s.podcastAny.get(id) as PodcastWithCount | undefined;
  }
  /** Whether `accountId` has a podcast `id`. */
  podcastExists(id: string, accountId: string): boolean {
    return this.s.exists.get(id, accountId) !== undefined;
  }
  /** Marks the podcast changed at `now` (never moves `updated_at` back). */
  touchPodcast(id: string, now: number): void {
    this.s.touch.run(now, id);
  }
  /** Moves `from` → `to`; false when the podcast was not in `from`. */
  setPodcastStatus(id: string, from: PodcastStatus, to: PodcastStatus, now: number): boolean {
    return this.s.setPodcastStatus.run(to, now, id, from).changes === 1;
  }
  /** A page of the account's podcasts, newest first. @throws UnknownCursorError */
  listPodcasts(accountId: string, status: PodcastStatus | undefined, q: PageQuery): Page<PodcastWithCount> {
    return this.podcastPage({ accountId, status: status ?? null }, q);
  }

  insertEpisode(row: EpisodeRow): void {
    this.s.insertEpisode.run(row);
  }
  /** Writes every mutable column of `row` (by id). */
  updateEpisode(row: EpisodeRow): void {
    this.s.updateEpisode.run(row);
  }
  /** The episode `id` of podcast `podcastId` of `accountId`, or undefined. */
  getEpisode(id: string, podcastId: string, accountId: string): EpisodeRow | undefined {
    return this.s.episode.get(id, podcastId, accountId) as EpisodeRow | undefined;
  }
  deleteEpisode(id: string): void {
    this.s.deleteEpisode.run(id);
  }
  /** Episode `id` of `accountId` in any of its podcasts: its podcast, title and audio file (null without audio), or undefined. */
  episodeAudio(id: string, accountId: string): { id: string; podcast_id: string; title: string; audio_file: string | null } | undefined {
    return this.db.prepare('SELECT id, podcast_id, title, audio_file FROM episodes WHERE id = ? AND account_id = ?').get(id, accountId) as
      | { id: string; podcast_id: string; title: string; audio_file: string | null }
      | undefined;
  }
  /** Whether an episode was made from stream `streamId`'s recording (`source_stream_id`). */
  hasEpisodeFromStream(streamId: string): boolean {
    return this.db.prepare('SELECT 1 FROM episodes WHERE source_stream_id = ? LIMIT 1').get(streamId) !== undefined;
  }
  /**
   * A page of a podcast's episodes, newest first.
   * @throws UnknownCursorError when the cursor is not an episode of this podcast
   */
  listEpisodes(accountId: string, podcastId: string, status: EpisodeStatus | 'processing' | undefined, q: PageQuery): Page<EpisodeRow> {
    for (const param of ['after', 'before'] as const) {
      const id = q[param];
      if (id !== undefined && this.s.episodeInPodcast.get(id, podcastId) === undefined) throw new UnknownCursorError(param, id);
    }
    return this.episodePage({ accountId, podcastId, status: status ?? null }, q);
  }

  /** scheduled → published when due at `now`; sets `guid` if unset. False when not due or no longer scheduled. */
  publishIfDue(id: string, guid: string, now: number): boolean {
    return this.s.publishIfDue.run({ id, guid, now }).changes === 1;
  }
  /** Scheduled episodes due at `now` whose audio is not final wait for it (`publish_pending`); the count. */
  dueToPending(now: number): number {
    return this.s.dueToPending.run({ now }).changes;
  }
  /** Marks (1) or clears (0) episode `id`'s publication waiting for its audio. */
  setPublishPending(id: string, pending: 0 | 1): void {
    this.s.setPending.run(pending, id);
  }
  /** Publishes episode `id` at `now` if its publication waits and its audio is final now; false otherwise. */
  publishPending(id: string, guid: string, now: number): boolean {
    return this.s.publishPending.run({ id, guid, now }).changes === 1;
  }
  /** Up to 100 episodes whose publication waits although their audio is final (a restart came between). */
  pendingReady(): string[] {
    return this.s.pendingReady.all() as string[];
  }
  /** The episode `id` of any account, or undefined. */
  getEpisodeAny(id: string): EpisodeRow | undefined {
    return this.db.prepare('SELECT * FROM episodes WHERE id = ?').get(id) as EpisodeRow | undefined;
  }
  /** Sets (or with null removes) episode `id`'s Podcasting 2.0 JSON chapters (the document as served) and marks it changed at `now`. */
  setChapters(id: string, chapters: string | null, now: number): void {
    this.s.setChapters.run(chapters, now, id);
  }
  /** Up to 100 scheduled episodes due at `now`, oldest due first. */
  dueEpisodes(now: number): EpisodeRow[] {
    return this.s.due.all(now) as EpisodeRow[];
  }
  /** The earliest `publish_at` of any scheduled episode, or null. */
  nextDueAt(): number | null {
    return (this.s.nextDue.get() as number | null) ?? null;
  }
  /** Every scheduled episode of the podcast back to draft (on archive); the count. */
  unscheduleAll(podcastId: string, now: number): number {
    return this.s.unschedule.run({ podcastId, now }).changes;
  }
  /** A podcast's published episodes, newest publication first. */
  publishedEpisodes(podcastId: string): EpisodeRow[] {
    return this.s.published.all(podcastId) as EpisodeRow[];
  }
  publishedCount(podcastId: string): number {
    return this.s.publishedCount.get(podcastId) as number;
  }
  /** What the chapters route needs of episode `id`: its podcast, state, chapters and last change; undefined when none. */
  chapters(id: string): EpisodeChaptersRow | undefined {
    return this.s.chapters.get(id) as EpisodeChaptersRow | undefined;
  }
  /** What the transcript route needs of episode `id`; undefined when no such episode. */
  transcript(id: string): EpisodeTranscriptRow | undefined {
    return this.s.transcriptOf.get(id) as EpisodeTranscriptRow | undefined;
  }
  /** Sets (or with nulls removes) episode `id`'s transcript and marks the episode changed at `now`. */
  setTranscript(id: string, body: string | null, type: string | null, now: number): void {
    this.s.setTranscript.run(body, type, now, id);
  }
  /** Writes episode `id`'s `persons` and `soundbites` (JSON arrays). */
  setEpisodeTags(id: string, persons: string, soundbites: string): void {
    this.s.setEpisodeTags.run(persons, soundbites, id);
  }
  /** Writes podcast `id`'s `persons`, `txt` and `podroll` (JSON arrays). */
  setPodcastTags(id: string, persons: string, txt: string, podroll: string): void {
    this.s.setPodcastTags.run(persons, txt, podroll, id);
  }
  /** Count and newest change of the published episodes (what the feed shows). */
  feedStamp(podcastId: string): FeedStamp {
    return this.s.stamp.get(podcastId) as FeedStamp;
  }
  /** The episode holding audio file `name` (its audio or its kept original), or undefined. */
  audioFile(name: string): AudioFileRow | undefined {
    return this.s.audio.get({ name }) as AudioFileRow | undefined;
  }
}
