/**
 * Podcast download counting (migration 010, docs/podcasts.md "Download counting"): the current
 * day's secret and client progress, the daily counts and the bot requests. Written in batches by
 * the download counter (src/control/downloads/counter.ts), never per request; read by the stats service.
 * Days are `YYYY-MM-DD` (UTC) strings, compared as text.
 */
import type { Database } from './database.js';

/**
 * One client's progress on one episode, the current day (migrations 010, 017). `client` and
 * `address` are hashes, never an address or a User-Agent; `counted_as` is the count key (JSON) of
 * the download the client counted while it stands (taken back when its address merges).
 */
export interface DownloadClientRow {
  client: string;
  address: string;
  episode_id: string;
  bytes: number;
  counted: number; // 0 | 1
  counted_as: string | null;
}

/** A counted download's place in the daily counts ('' = unknown). */
export interface DownloadCountKey {
  podcastId: string;
  day: string;
  episodeId: string;
  app: string;
  device: string;
  os: string;
  country: string;
}

/** What one flush writes: client progress (upserted; evicted clients deleted), counts (added, or taken back when negative) and bot requests (added). */
export interface DownloadBatch {
  day: string;
  clients: DownloadClientRow[];
  evicted: Array<{ client: string; episode_id: string }>;
  counts: Array<DownloadCountKey & { n: number }>;
  bots: Array<{ podcastId: string; day: string; episodeId: string; n: number }>;
}

/** Which counts a stats query reads: one podcast (optionally one episode), days `from`..`to` inclusive. */
export interface DownloadRange {
  podcastId: string;
  episodeId: string | null;
  from: string;
  to: string;
}

/** One row of the detailed breakdown (CSV): day × episode × app × country × device. */
export interface DownloadDetailRow {
  day: string;
  episode_id: string;
  app: string;
  country: string;
  device: string;
  downloads: number;
}

/** What download counting needs of an episode's audio file (`audio_minute_bytes` null: measure it; always so for a loudness-normalised copy). */
export interface AudioEpisodeRow {
  id: string;
  podcast_id: string;
  audio_size: number;
  audio_duration: number | null;
  audio_minute_bytes: number | null;
}

const WHERE = `podcast_id = @podcastId AND day >= @from AND day <= @to AND (@episodeId IS NULL OR episode_id = @episodeId)`;
const by = (col: string) => `SELECT ${col} AS key, SUM(downloads) AS downloads FROM download_counts WHERE ${WHERE} GROUP BY ${col} ORDER BY downloads DESC, key`;

/** Prepared statements over the download tables and `episodes.audio_minute_bytes`. */
export class DownloadsRepo {
  private readonly s;

  constructor(readonly db: Database) {
    this.s = {
      secret: db.prepare('SELECT secret FROM download_secrets WHERE day = ?').pluck(),
      putSecret: db.prepare('INSERT OR IGNORE INTO download_secrets (day, secret) VALUES (?, ?)'),
      dropSecrets: db.prepare('DELETE FROM download_secrets WHERE day <> ?'),
      dropClients: db.prepare('DELETE FROM download_clients WHERE day <> ?'),
      clients: db.prepare(`SELECT c.client, c.address, c.episode_id, c.bytes, c.counted, c.counted_as, e.podcast_id
        FROM download_clients c LEFT JOIN episodes e ON e.id = c.episode_id WHERE c.day = ?`),
      putClient: db.prepare(`INSERT INTO download_clients (day, client, address, episode_id, bytes, counted, counted_as)
        VALUES (@day, @client, @address, @episode_id, @bytes, @counted, @counted_as)
        ON CONFLICT (day, client, episode_id) DO UPDATE SET bytes = excluded.bytes, counted = excluded.counted, counted_as = excluded.counted_as`),
      dropClient: db.prepare('DELETE FROM download_clients WHERE day = ? AND client = ? AND episode_id = ?'),
      takeBack: db.prepare(`UPDATE download_counts SET downloads = MAX(0, downloads + @n) WHERE podcast_id = @podcastId AND day = @day
        AND episode_id = @episodeId AND app = @app AND device = @device AND os = @os AND country = @country`),
      addCount: db.prepare(`INSERT INTO download_counts (podcast_id, day, episode_id, app, device, os, country, downloads)
        VALUES (@podcastId, @day, @episodeId, @app, @device, @os, @country, @n)
        ON CONFLICT (podcast_id, day, episode_id, app, device, os, country) DO UPDATE SET downloads = downloads + excluded.downloads`),
      addBots: db.prepare(`INSERT INTO download_bot_requests (podcast_id, day, episode_id, requests) VALUES (@podcastId, @day, @episodeId, @n)
        ON CONFLICT (podcast_id, day, episode_id) DO UPDATE SET requests = requests + excluded.requests`),
      total: db.prepare(`SELECT COALESCE(SUM(downloads), 0) FROM download_counts WHERE ${WHERE}`).pluck(),
      bots: db.prepare(`SELECT COALESCE(SUM(requests), 0) FROM download_bot_requests WHERE ${WHERE}`).pluck(),
      byDay: db.prepare(`SELECT day AS key, SUM(downloads) AS downloads FROM download_counts WHERE ${WHERE} GROUP BY day ORDER BY day`),
      byEpisode: db.prepare(by('episode_id')),
      byApp: db.prepare(by('app')),
      byCountry: db.prepare(by('country')),
      byDevice: db.prepare(by('device')),
      detail: db.prepare(`SELECT day, episode_id, app, country, device, SUM(downloads) AS downloads FROM download_counts WHERE ${WHERE}
        GROUP BY day, episode_id, app, country, device ORDER BY day, episode_id, app, country, device`),
      // Only for the upload itself: a normalised copy's size is measured per process, never stored over the upload's.
      minuteBytes: db.prepare('UPDATE episodes SET audio_minute_bytes = ? WHERE id = ? AND audio_file = ? AND original_audio_file IS NULL'),
      // A loudness-normalised copy (migration 011) replaced the upload the stored size was measured on: measure the copy.
      // The upload itself stays served (the feed's alternate enclosure) and counts for the same episode.
      audio: db.prepare(`SELECT id, podcast_id, audio_size, audio_duration,
        CASE WHEN original_audio_file IS NULL THEN audio_minute_bytes END AS audio_minute_bytes FROM episodes WHERE audio_file = @name
        UNION ALL SELECT id, podcast_id, original_audio_size, audio_duration, audio_minute_bytes FROM episodes WHERE original_audio_file = @name`),
    };
  }

  /**
   * The secret of `day`, made by `make` and stored when the day has none yet, and drops every
   * other day's secret and client progress (closed days keep only their counts).
   */
  openDay(day: string, make: () => Uint8Array): { secret: Buffer; clients: Array<DownloadClientRow & { podcast_id: string | null }> } {
    return this.db.transaction(() => {
      this.s.dropSecrets.run(day);
      this.s.dropClients.run(day);
      this.s.putSecret.run(day, Buffer.from(make()));
      return { secret: this.s.secret.get(day) as Buffer, clients: this.s.clients.all(day) as Array<DownloadClientRow & { podcast_id: string | null }> };
    }).immediate();
  }

  /** Writes one batch in one transaction (all or nothing). */
  write(b: DownloadBatch): void {
    this.db.transaction(() => {
      for (const c of b.clients) this.s.putClient.run({ day: b.day, ...c });
      for (const c of b.evicted) this.s.dropClient.run(b.day, c.client, c.episode_id);
      for (const c of b.counts) (c.n > 0 ? this.s.addCount : this.s.takeBack).run(c);
      for (const x of b.bots) this.s.addBots.run(x);
    }).immediate();
  }

  /** Stores the one-minute size of the episode's uploaded audio `audioFile` (no-op when the episode has other audio by now, or serves a normalised copy of it). */
  setMinuteBytes(episodeId: string, audioFile: string, bytes: number): void {
    this.s.minuteBytes.run(bytes, episodeId, audioFile);
  }

  /** The episode holding audio file `name` and what counting needs of it, or undefined. */
  audioEpisode(name: string): AudioEpisodeRow | undefined {
    return this.s.audio.get({ name }) as AudioEpisodeRow | undefined;
  }

  /** Downloads and bot requests in `r`, and the downloads by day (days without any are absent), episode, app, country and device (most first). */
  stats(r: DownloadRange): {
    downloads: number;
    botRequests: number;
    byDay: Array<{ key: string; downloads: number }>;
    byEpisode: Array<{ key: string; downloads: number }>;
    byApp: Array<{ key: string; downloads: number }>;
    byCountry: Array<{ key: string; downloads: number }>;
    byDevice: Array<{ key: string; downloads: number }>;
  } {
    type KV = Array<{ key: string; downloads: number }>;
    return {
      downloads: this.s.total.get(r) as number,
      botRequests: this.s.bots.get(r) as number,
      byDay: this.s.byDay.all(r) as KV,
      byEpisode: this.s.byEpisode.all(r) as KV,
      byApp: this.s.byApp.all(r) as KV,
      byCountry: this.s.byCountry.all(r) as KV,
      byDevice: this.s.byDevice.all(r) as KV,
    };
  }

  /** The downloads in `r` per day × episode × app × country × device, in that order. */
  detail(r: DownloadRange): DownloadDetailRow[] {
    return this.s.detail.all(r) as DownloadDetailRow[];
  }
}
