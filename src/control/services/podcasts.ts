/**
 * The Podcasts resource (spec "Podcasts", docs/behaviour.md §5, §9 "Podcasts"): create, read, list with
 * the `status` filter, update, and the state rules. States: created `draft`; the first published
 * episode makes it `published` (EpisodesService); `PATCH {status:"archived"}` archives from any
 * other state; a move to the state it is already in → 409. Knows no HTTP and no SQL text.
 */
import { mergeMetadata } from './metadata.js';
import { createHash } from 'node:crypto';
import { ApiError, conflict, notFound, paramInvalid } from '../../base/errors/errors.js';
import { newId } from '../../base/ids.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { PodcastRow, PodcastsRepo, PodcastStatus, PodcastWithCount } from '../../base/db/podcasts-repo.js';
import type { PublicUrls } from '../../base/config.js';

/** Metadata: at most this many keys after a merge. */
export const METADATA_MAX_KEYS = 16;

/** A validated `POST /podcasts` body (api/podcasts/schemas.ts validates it). */
export interface CreatePodcastInput {
  title: string;
  description?: string;
  author?: string;
  language?: string;
  /** An Apple Podcasts category name (`Technology`, `Society & Culture > Documentary`). */
  category?: string;
  explicit?: boolean;
  imageUrl?: string;
  ownerEmail?: string;
  ownerName?: string;
  link?: string;
  type?: 'episodic' | 'serial';
  locked?: boolean;
  metadata?: Record<string, string>;
  /** Podcasting 2.0 `podcast:person` entries (docs/podcasts.md "Feed completeness"). */
  persons?: PodcastPerson[];
  /** `podcast:txt` entries. */
  txt?: PodcastTxt[];
  /** `podcast:podroll` items: other shows by `podcast:guid` (and feed URL). */
  podroll?: PodrollItem[];
  /** Normalisation target of new audio, LUFS (−24…−10); null = off; default −16 (docs/podcasts.md "Loudness"). */
  loudnessTarget?: number | null;
}

/** A `podcast:person`: name, role and group of the namespace's taxonomy, a page and a picture. */
export interface PodcastPerson {
  name: string;
  role?: string;
  group?: string;
  href?: string;
  img?: string;
}
/** A `podcast:txt`: free text with an optional purpose (e.g. `verify`). */
export interface PodcastTxt {
  purpose?: string;
  value: string;
}
/** A `podcast:remoteItem` of `podcast:podroll`. */
export interface PodrollItem {
  feedGuid: string;
  feedUrl?: string;
}

/**
 * What changed a served feed (docs/podcasts.md "Feed-update notifications"): an episode published,
 * any other change of what the feed shows, a broadcast recorded into the podcast going live or ending.
 */
export type FeedChangeReason = 'published' | 'changed' | 'live' | 'liveEnd';

/**
 * Told of a change of a served feed, inside the transaction of the change (so its durable
 * notifications commit or roll back with it). `accountId` owns the podcast.
 */
export type FeedChanged = (accountId: string, podcastId: string, reason: FeedChangeReason) => void;

/** A validated `PATCH /podcasts/{id}` body: `null` clears an optional field or removes a metadata key. */
export interface UpdatePodcastInput {
  title?: string;
  description?: string;
  author?: string | null;
  language?: string;
  category?: string | null;
  explicit?: boolean;
  imageUrl?: string | null;
  ownerEmail?: string | null;
  ownerName?: string | null;
  link?: string | null;
  type?: 'episodic' | 'serial';
  locked?: boolean;
  status?: 'draft' | 'published' | 'archived';
  metadata?: Record<string, string | null>;
  persons?: PodcastPerson[];
  txt?: PodcastTxt[];
  podroll?: PodrollItem[];
  loudnessTarget?: number | null;
}

/** The podcast object of the API. Times are ISO 8601 UTC. */
export interface PodcastObject {
  id: string;
  object: 'podcast';
  title: string;
  description: string;
  author: string | null;
  language: string;
  /** Apple category name (`"Technology"`, `"Society & Culture > Documentary"`), or null. */
  category: string | null;
  explicit: boolean;
  imageUrl: string | null;
  ownerEmail: string | null;
  ownerName: string | null;
  link: string | null;
  type: 'episodic' | 'serial';
  locked: boolean;
  status: PodcastStatus;
  /** Every episode that is not deleted (drafts and scheduled included). */
  episodeCount: number;
  feedUrl: string;
  /** Podcasting 2.0 `podcast:guid`: UUIDv5 of the feed URL at creation (without scheme and trailing slash). */
  podcastGuid: string;
  metadata: Record<string, string>;
  persons: PodcastPerson[];
  txt: PodcastTxt[];
  podroll: PodrollItem[];
  /** LUFS that new audio is normalised to (true peak ≤ −1 dBTP); null = off (docs/podcasts.md "Loudness"). */
  loudnessTarget: number | null;
  createdAt: string;
  updatedAt: string;
}

/** A JSON array column (`'[]'` when unset). */
export const jsonList = <T>(text: string | undefined): T[] => (text ? (JSON.parse(text) as T[]) : []);

/** The Podcasting 2.0 namespace UUID that `podcast:guid` values are derived in. */
export const PODCAST_GUID_NAMESPACE = 'ead4c236-bf58-58c6-a2c6-a6b28d128cb6';

/** RFC 9562 UUIDv5 (SHA-1) of `name` in `namespace`. */
export function uuidV5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const h = createHash('sha1').update(ns).update(name, 'utf8').digest().subarray(0, 16);
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** `podcast:guid` of a feed URL (docs/behaviour.md §9): scheme and trailing slashes removed, then UUIDv5. */
export function podcastGuidFor(feedUrl: string): string {
  return uuidV5(feedUrl.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//, '').replace(/\/+$/, ''), PODCAST_GUID_NAMESPACE);
}

/** The public feed URL of a podcast: `{cdn_url}/feed/<podcast_id>.xml`. */
export const feedUrlOf = (urls: PublicUrls, podcastId: string) => `${urls.cdnUrl}/feed/${podcastId}.xml`;

const iso = (ms: number) => new Date(ms).toISOString();

/** Renders a row as the API object. */
export function toPodcastObject(row: PodcastWithCount, urls: PublicUrls): PodcastObject {
  return {
    id: row.id,
    object: 'podcast',
    title: row.title,
    description: row.description,
    author: row.author,
    language: row.language,
    category: row.category,
    explicit: row.explicit === 1,
    imageUrl: row.image_url,
    ownerEmail: row.owner_email,
    ownerName: row.owner_name,
    link: row.link,
    type: row.type,
    locked: row.locked === 1,
    status: row.status,
    episodeCount: row.episode_count,
    feedUrl: feedUrlOf(urls, row.id),
    podcastGuid: row.podcast_guid,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    persons: jsonList(row.persons),
    txt: jsonList(row.txt),
    podroll: jsonList(row.podroll),
    loudnessTarget: row.loudness_target ?? null,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export interface PodcastsDeps {
  repo: PodcastsRepo;
  urls: () => PublicUrls;
  now: () => number;
  /** Called after an archive moved scheduled episodes back to draft (the scheduler re-arms). */
  onScheduleChange?: () => void;
  /** Told of every change of a podcast whose feed is served (not a draft), in its transaction. */
  feedChanged?: FeedChanged;
  /** Stores `loudnessTarget` (src/control/services/loudness.ts); without it new podcasts keep the schema's −16 LUFS. */
  loudness?: { setTarget(podcastId: string, target: number | null): void };
}

export class PodcastsService {
  constructor(private readonly d: PodcastsDeps) {}

  /** Creates a `draft` podcast; `podcast:guid` is fixed now from the feed URL. @throws ApiError 400 */
  create(accountId: string, input: CreatePodcastInput): PodcastObject {
    const id = newId('pod');
    const now = this.d.now();
    const feedUrl = feedUrlOf(this.d.urls(), id);
    const row: PodcastRow = {
      id,
      account_id: accountId,
      title: input.title,
      description: input.description ?? '',
      author: input.author ?? null,
      language: input.language ?? 'en',
      category: input.category ?? null,
      explicit: input.explicit ? 1 : 0,
      image_url: input.imageUrl ?? null,
      owner_email: input.ownerEmail ?? null,
      owner_name: input.ownerName ?? null,
      link: input.link ?? null,
      type: input.type ?? 'episodic',
      locked: input.locked ? 1 : 0,
      metadata: JSON.stringify(input.metadata ?? {}),
      status: 'draft',
      podcast_guid: podcastGuidFor(feedUrl),
      feed_url: feedUrl,
      created_at: now,
      updated_at: now,
    };
    this.d.repo.tx(() => {
      this.d.repo.insertPodcast(row);
      if (input.loudnessTarget !== undefined) this.d.loudness?.setTarget(id, input.loudnessTarget);
      if (input.persons || input.txt || input.podroll) {
        this.d.repo.setPodcastTags(id, JSON.stringify(input.persons ?? []), JSON.stringify(input.txt ?? []), JSON.stringify(input.podroll ?? []));
      }
    });
    return this.get(accountId, id);
  }

  /** @throws ApiError 404 */
  get(accountId: string, id: string): PodcastObject {
    return toPodcastObject(this.row(accountId, id), this.d.urls());
  }

  /**
   * A page of the account's podcasts, newest first, optionally only those in `status` (docs/behaviour.md §9
   * "Lists"). @throws ApiError 400 for an unknown cursor (`param` names it)
   */
  list(accountId: string, status: PodcastStatus | undefined, q: PageQuery): { data: PodcastObject[]; hasMore: boolean } {
    try {
      const page = this.d.repo.listPodcasts(accountId, status, q);
      const urls = this.d.urls();
      return { data: page.rows.map((r) => toPodcastObject(r, urls)), hasMore: page.hasMore };
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
  }

  /**
   * Applies a PATCH. `null` clears an optional field; metadata keys given as `null` are removed.
   * `status`: `archived` from draft or published (scheduled episodes go back to draft); from
   * `archived` back to what the episodes make it (`published` with a published episode, else
   * `draft`). The state it is already in, or any other move → 409.
   * @throws ApiError 400, 404, 409
   */
  update(accountId: string, id: string, input: UpdatePodcastInput): PodcastObject {
    let scheduleChanged = false;
    this.d.repo.tx(() => {
      const cur = this.row(accountId, id);
      const row: PodcastRow = { ...cur };
      if (input.title !== undefined) row.title = input.title;
      if (input.description !== undefined) row.description = input.description;
      if (input.author !== undefined) row.author = input.author;
      if (input.language !== undefined) row.language = input.language;
      if (input.category !== undefined) row.category = input.category;
      if (input.explicit !== undefined) row.explicit = input.explicit ? 1 : 0;
      if (input.imageUrl !== undefined) row.image_url = input.imageUrl;
      if (input.ownerEmail !== undefined) row.owner_email = input.ownerEmail;
      if (input.ownerName !== undefined) row.owner_name = input.ownerName;
      if (input.link !== undefined) row.link = input.link;
      if (input.type !== undefined) row.type = input.type;
      if (input.locked !== undefined) row.locked = input.locked ? 1 : 0;
      if (input.metadata !== undefined) row.metadata = mergeMetadata(row.metadata, input.metadata, METADATA_MAX_KEYS);
      if (input.status !== undefined) {
        row.status = this.nextStatus(cur, input.status);
        if (row.status === 'archived') scheduleChanged = this.d.repo.unscheduleAll(id, this.d.now()) > 0;
      }
      row.updated_at = this.d.now();
      this.d.repo.updatePodcast(row);
      if (input.loudnessTarget !== undefined) this.d.loudness?.setTarget(id, input.loudnessTarget);
      if (input.persons !== undefined || input.txt !== undefined || input.podroll !== undefined) {
        const list = (given: unknown[] | undefined, stored: string | undefined) => (given !== undefined ? JSON.stringify(given) : (stored ?? '[]'));
        this.d.repo.setPodcastTags(id, list(input.persons, cur.persons), list(input.txt, cur.txt), list(input.podroll, cur.podroll));
      }
      if (row.status !== 'draft' || cur.status !== 'draft') this.d.feedChanged?.(accountId, id, 'changed');
    });
    if (scheduleChanged) this.d.onScheduleChange?.();
    return this.get(accountId, id);
  }

  private nextStatus(cur: PodcastRow, want: PodcastStatus): PodcastStatus {
    if (want === cur.status) throw conflict(`The podcast is already ${want}.`);
    if (want === 'archived') return 'archived';
    if (cur.status !== 'archived') {
      throw conflict(`A podcast becomes published with its first published episode; set status "archived" to archive it.`);
    }
    const hasPublished = this.d.repo.publishedCount(cur.id) > 0;
    const natural: PodcastStatus = hasPublished ? 'published' : 'draft';
    if (want !== natural) {
      throw conflict(`Unarchiving returns the podcast to "${natural}" (it has ${hasPublished ? 'published episodes' : 'no published episode'}).`);
    }
    return natural;
  }

  private row(accountId: string, id: string): PodcastWithCount {
    const row = this.d.repo.getPodcast(id, accountId);
    if (!row) throw notFound('podcast', id);
    return row;
  }
}

/**
 * The check for `recording: { podcastId }` on streams (docs/behaviour.md §3 "Recording"): the podcast
 * must exist in the same account and not be archived (an archived podcast takes no new episodes).
 * Returns a function to call from stream create/update with the given podcast id.
 * @throws ApiError 400 `parameter_invalid` with `param` = `recording.podcastId`
 */
export function recordingPodcastCheck(repo: PodcastsRepo): (accountId: string, podcastId: string) => void {
  return (accountId, podcastId) => {
    const row = repo.getPodcast(podcastId, accountId);
    if (!row) throw new ApiError('parameter_invalid', `No such podcast: '${podcastId}'.`, { param: 'recording.podcastId' });
    if (row.status === 'archived') {
      throw new ApiError('parameter_invalid', `The podcast '${podcastId}' is archived and takes no new episodes.`, { param: 'recording.podcastId' });
    }
  };
}
