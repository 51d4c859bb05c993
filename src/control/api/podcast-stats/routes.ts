/**
 * Podcast download statistics under `/v2/podcasts` (docs/podcasts.md "Download counting"):
 * `GET …/{id}/stats` and `GET …/{id}/episodes/{eid}/stats`, with `podcasts:read` (publishable keys
 * may read, like the podcasts themselves). JSON by default; `Accept: text/csv` answers CSV.
 */
import type { ApiRequest, ApiReply } from '../../../base/http/server.js';
import type { PodcastStatsService, StatsQuery } from '../../services/podcast-stats.js';
import type { ApiServices } from '../services.js';
import { resourceRoutes } from '../resource.js';
import { PODCAST_STATS_DOCS as DOCS } from './openapi.js';

/** Whether `Accept` prefers CSV: it names `text/csv` and not JSON before it (no q-value weighing beyond order). */
function wantsCsv(accept: string | undefined): boolean {
  if (!accept) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  const csv = types.indexOf('text/csv');
  const json = types.findIndex((t) => t === 'application/json' || t === 'application/*');
  return csv >= 0 && (json < 0 || csv < json);
}

const queryOf = (req: ApiRequest): StatsQuery => ({ from: req.query.get('from') ?? undefined, to: req.query.get('to') ?? undefined });

function answer(stats: PodcastStatsService, req: ApiRequest, accountId: string, podcastId: string, episodeId: string | null): ApiReply {
  if (!wantsCsv(req.headers.accept)) return { status: 200, body: stats.stats(accountId, podcastId, episodeId, queryOf(req)) };
  const body = stats.csv(accountId, podcastId, episodeId, queryOf(req));
  return { status: 200, body: null, text: { contentType: 'text/csv; charset=utf-8', body }, headers: { Vary: 'Accept' } };
}

/** Registers the statistics routes. */
export function mountPodcastStats(s: ApiServices): void {
  const r = resourceRoutes(s, { read: 'podcasts:read' });
  r.read('get', '/v2/podcasts/:id/stats', DOCS.podcast, (req, p) => answer(s.podcastStats, req, p.accountId, req.params[0]!, null));
  r.read('get', '/v2/podcasts/:id/episodes/:eid/stats', DOCS.episode, (req, p) => answer(s.podcastStats, req, p.accountId, req.params[0]!, req.params[1]!));
}
