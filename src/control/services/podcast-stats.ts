/**
 * Podcast download statistics (docs/podcasts.md "Download counting"): what
 * `GET /podcasts/{id}/stats` and `GET /podcasts/{id}/episodes/{eid}/stats` answer, as JSON or
 * CSV, and what the dashboard's podcast page shows. Reads the daily counts the download counter
 * writes (src/control/downloads/counter.ts), after writing its pending batch so an answer includes every
 * download counted so far.
 */
import type { DownloadRange, DownloadsRepo } from '../../base/db/downloads-repo.js';
import type { PodcastsRepo } from '../../base/db/podcasts-repo.js';
import { notFound, paramInvalid } from '../../base/errors/errors.js';

/** Days a range covers by default (today and the 29 before). */
export const DEFAULT_DAYS = 30;
/** Most days one range may cover. */
export const MAX_DAYS = 366;
const DAY_MS = 86_400_000;

/** The `podcast_stats` object. Days are `YYYY-MM-DD` (UTC); breakdowns are most downloads first. */
export interface PodcastStats {
  object: 'podcast_stats';
  podcastId: string;
  episodeId: string | null;
  from: string;
  to: string;
  downloads: number;
  botRequests: number;
  /** Every day of the range, oldest first (0 on days without downloads). */
  byDay: Array<{ date: string; downloads: number }>;
  byEpisode: Array<{ episodeId: string; downloads: number }>;
  byApp: Array<{ app: string | null; downloads: number }>;
  byCountry: Array<{ country: string | null; downloads: number }>;
  byDevice: Array<{ device: string | null; downloads: number }>;
}

/** A stats request's range as sent (`from`, `to`: `YYYY-MM-DD`, optional). */
export interface StatsQuery {
  from?: string | undefined;
  to?: string | undefined;
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** `YYYY-MM-DD` → ms at its UTC midnight. @throws ApiError 400 naming `param` when it is not a real date */
function parseDay(s: string, param: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(s) ? Date.parse(`${s}T00:00:00Z`) : NaN;
  if (!Number.isFinite(ms) || day(ms) !== s) throw paramInvalid(param, `${param} must be a date as YYYY-MM-DD (UTC).`);
  return ms;
}

const orNull = (s: string) => (s === '' ? null : s);

/** CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
const csvField = (s: string | number) => {
  const t = String(s);
  return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
};

export interface PodcastStatsDeps {
  downloads: DownloadsRepo;
  podcasts: PodcastsRepo;
  /** Writes the counter's pending batch (so answers are current). */
  flush: () => void;
  now: () => number;
}

/** Reads download statistics of an account's podcasts. */
export class PodcastStatsService {
  constructor(private readonly d: PodcastStatsDeps) {}

  /**
   * The range of a request: `from`..`to` inclusive (UTC days). Neither given: the last
   * `DEFAULT_DAYS` days up to today. Only `to`: the `DEFAULT_DAYS` days up to it. Only `from`:
   * up to today, at most `DEFAULT_DAYS` days.
   * @throws ApiError 400 (`parameter_invalid`) for a malformed date, `from` after `to`, or more than `MAX_DAYS` days
   */
  range(q: StatsQuery): { from: string; to: string } {
    const today = Math.floor(this.d.now() / DAY_MS) * DAY_MS;
    const span = (DEFAULT_DAYS - 1) * DAY_MS;
    const f = q.from !== undefined ? parseDay(q.from, 'from') : null;
    const t = q.to !== undefined ? parseDay(q.to, 'to') : null;
    const to = t ?? (f !== null ? Math.max(f, Math.min(today, f + span)) : today);
    const from = f ?? to - span;
    if (from > to) throw paramInvalid('from', '`from` must not be after `to`.');
    if ((to - from) / DAY_MS + 1 > MAX_DAYS) throw paramInvalid('to', `A range covers at most ${MAX_DAYS} days.`);
    return { from: day(from), to: day(to) };
  }

  private scope(accountId: string, podcastId: string, episodeId: string | null, q: StatsQuery): DownloadRange {
    if (!this.d.podcasts.podcastExists(podcastId, accountId)) throw notFound('podcast', podcastId);
    if (episodeId !== null && !this.d.podcasts.getEpisode(episodeId, podcastId, accountId)) throw notFound('episode', episodeId, 'eid');
    const { from, to } = this.range(q);
    this.d.flush();
    return { podcastId, episodeId, from, to };
  }

  /**
   * The statistics of podcast `podcastId` (or only its episode `episodeId`) over the range of `q`.
   * @throws ApiError 404 (podcast or episode not the account's), 400 (range)
   */
  stats(accountId: string, podcastId: string, episodeId: string | null, q: StatsQuery): PodcastStats {
    const r = this.scope(accountId, podcastId, episodeId, q);
    const s = this.d.downloads.stats(r);
    const perDay = new Map(s.byDay.map((x) => [x.key, x.downloads]));
    const byDay: PodcastStats['byDay'] = [];
    for (let ms = Date.parse(`${r.from}T00:00:00Z`), end = Date.parse(`${r.to}T00:00:00Z`); ms <= end; ms += DAY_MS) {
      byDay.push({ date: day(ms), downloads: perDay.get(day(ms)) ?? 0 });
    }
    return {
      object: 'podcast_stats',
      podcastId,
      episodeId,
      from: r.from,
      to: r.to,
      downloads: s.downloads,
      botRequests: s.botRequests,
      byDay,
      byEpisode: s.byEpisode.map((x) => ({ episodeId: x.key, downloads: x.downloads })),
      byApp: s.byApp.map((x) => ({ app: orNull(x.key), downloads: x.downloads })),
      byCountry: s.byCountry.map((x) => ({ country: orNull(x.key), downloads: x.downloads })),
      byDevice: s.byDevice.map((x) => ({ device: orNull(x.key), downloads: x.downloads })),
    };
  }

  /**
   * The same range as CSV (RFC 4180, CRLF line ends): a header `date,episodeId,app,country,device,downloads`
   * and one row per day × episode × app × country × device with downloads (unknown values empty).
   * @throws ApiError as `stats`
   */
  csv(accountId: string, podcastId: string, episodeId: string | null, q: StatsQuery): string {
    const r = this.scope(accountId, podcastId, episodeId, q);
    const lines = ['date,episodeId,app,country,device,downloads'];
    for (const x of this.d.downloads.detail(r)) lines.push([x.day, x.episode_id, x.app, x.country, x.device, x.downloads].map(csvField).join(','));
    return `${lines.join('\r\n')}\r\n`;
  }
}
