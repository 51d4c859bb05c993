/**
 * The public feed at `{cdn_url}/feed/<podcast_id>.xml` (docs/behaviour.md §5): drafts and unknown
 * podcasts → 404; published and archived podcasts render their published episodes (scheduled ones
 * only once the scheduler has published them, so never early) and the streams recording into
 * them as `podcast:liveItem`. The rendered bytes are cached per podcast under a key that changes
 * whenever anything shown could; ETag is a hash of the bytes, Last-Modified the newest change.
 */
import { createHash } from 'node:crypto';
import { notFound } from '../../base/errors/errors.js';
import type { PodcastsRepo } from '../../base/db/podcasts-repo.js';
import type { StreamRow } from '../../base/db/streams-repo.js';
import type { BroadcastRow } from '../../base/db/broadcasts-repo.js';
import type { PublicUrls } from '../../base/config.js';
import { audioUrlOf, chaptersUrlOf, transcriptUrlOf, type TranscriptMime } from '../services/episode-object.js';
import { feedUrlOf } from '../services/podcasts.js';
import { LISTEN_EXT } from '../services/stream-object.js';
import { renderFeed, type LiveItemInput } from './render.js';
import type { Answer } from '../../base/http/files.js';

/** MIME type of the listening URL by codec (docs/behaviour.md §10). */
const LISTEN_MIME: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };

/** A stream's last broadcast stays in the feed as `liveItem status="ended"` this long (ms) after it ends. */
export const ENDED_LIVE_ITEM_MS = 24 * 3600 * 1000;
/** Feed `Cache-Control` max-age (s). */
const FEED_MAX_AGE = 60;

export interface FeedDeps {
  repo: PodcastsRepo;
  /** Streams whose `recording.podcastId` is the podcast, newest first (StreamsRepo.recordingInto). */
  recordingStreams: (podcastId: string) => StreamRow[];
  /** The stream's newest broadcast (BroadcastsRepo.latest): each broadcast is a live item of its own. */
  latestBroadcast?: (streamId: string) => Pick<BroadcastRow, 'id' | 'started_at' | 'ended_at'> | undefined;
  urls: () => PublicUrls;
  now: () => number;
  /** The WebSub hub named in every feed (`SKYLARK_WEBSUB_HUB`), if any. */
  hubUrl?: string | undefined;
}

interface Cached {
  key: string;
  body: Uint8Array;
  etag: string;
  lastModified: number;
}

/** Answers feed requests. */
export class FeedService {
  private readonly cache = new Map<string, Cached>();

  constructor(private readonly d: FeedDeps) {}

  /** The answer for `/feed/<file>`; `file` must be `<podcast_id>.xml`. */
  answer(file: string): Answer {
    const m = /^(pod_[A-Za-z0-9]{1,64})\.xml$/.exec(file);
    const id = m?.[1];
    const podcast = id ? this.d.repo.getPodcastAny(id) : undefined;
    if (!id || !podcast || podcast.status === 'draft') {
      if (id) this.cache.delete(id);
      return { kind: 'error', error: notFound('feed', file.slice(0, 80), 'podcast') };
    }
    const urls = this.d.urls();
    const now = this.d.now();
    const live = this.liveItems(id, urls, now);
    const stamp = this.d.repo.feedStamp(id);
    const liveSig = live.map((l) => `${l.id}:${l.status}:${l.start}:${l.end}:${l.title}:${l.listenUrl}`).join(',');
    const key = `${podcast.updated_at}|${stamp.published}|${stamp.lastChange}|${urls.cdnUrl}|${liveSig}`;
    let c = this.cache.get(id);
    if (!c || c.key !== key) {
      const lastModified = Math.max(podcast.updated_at, stamp.lastChange, ...live.map((l) => Math.max(l.start, l.end ?? 0)));
      const body = renderFeed({
        podcast,
        feedUrl: feedUrlOf(urls, id),
        episodes: this.d.repo.publishedEpisodes(id),
        audioUrl: (e) => audioUrlOf(urls, e.podcast_id, e.audio_file!),
        chaptersUrl: (e) => chaptersUrlOf(urls, e.podcast_id, e.id),
        transcriptUrl: (e) => transcriptUrlOf(urls, e.podcast_id, e.id, e.transcript_type as TranscriptMime),
        hubUrl: this.d.hubUrl,
        liveItems: live,
        lastModified,
      });
      const etag = `"${createHash('sha1').update(body).digest('base64url')}"`;
      c = { key, body, etag, lastModified };
      this.cache.set(id, c);
    }
    return {
      kind: 'bytes',
      body: c.body,
      etag: c.etag,
      lastModified: c.lastModified,
      contentType: 'application/rss+xml; charset=utf-8',
      cacheControl: `public, max-age=${FEED_MAX_AGE}`,
      headers: { 'Access-Control-Allow-Origin': '*' },
    };
  }

  /**
   * A live item per public stream recorded into the podcast (token-only streams are left out: feed
   * readers have no token), following its broadcasts — a stream's fallback is no broadcast: `live`
   * while a broadcast is (the broadcast's id as guid: a new broadcast is a new live stream to
   * apps, podcast-namespace `live-item.md`), `ended` for a day after its last broadcast ended (that
   * broadcast's guid, start and end), else `pending` (the next broadcast; the stream's id as guid).
   */
  private liveItems(podcastId: string, urls: PublicUrls, now: number): LiveItemInput[] {
    const out: LiveItemInput[] = [];
    for (const s of this.d.recordingStreams(podcastId)) {
      if (s.playback !== 'public') continue;
      const live = s.status === 'live';
      // The broadcast this item is: the running one while live, else the last one (none: the stream's own times).
      const b = this.d.latestBroadcast?.(s.id);
      const shown = b && (b.ended_at === null) === live ? b : null;
      const startedAt = shown ? shown.started_at : s.started_at;
      const endedAt = shown ? shown.ended_at : s.ended_at;
      const justEnded = !live && endedAt !== null && startedAt !== null && now - endedAt <= ENDED_LIVE_ITEM_MS;
      out.push({
        id: shown && (live || justEnded) ? shown.id : s.id,
        title: s.title,
        status: live ? 'live' : justEnded ? 'ended' : 'pending',
        start: startedAt ?? s.created_at,
        end: justEnded ? endedAt : null,
        hlsUrl: `${urls.cdnUrl}/hls/${s.id}/index.m3u8`,
        listenUrl: `${urls.cdnUrl}/listen/${s.id}.${LISTEN_EXT[s.codec] ?? s.codec}`,
        listenType: LISTEN_MIME[s.codec] ?? 'audio/mpeg',
      });
    }
    return out;
  }
}
