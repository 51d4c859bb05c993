/**
 * The answer of the podcast statistics routes (docs/podcasts.md "Download counting"): the
 * `podcast_stats` object. Days are `YYYY-MM-DD` (UTC); unknown apps, countries and devices are null.
 */
import * as v from 'valibot';
import { count, nullableString, objectId } from '../openapi/schemas.js';

const date = v.pipe(v.string(), v.regex(/^\d{4}-\d{2}-\d{2}$/));

/** `podcast_stats` */
export const PodcastStatsSchema = v.object({
  object: v.literal('podcast_stats'),
  podcastId: objectId('pod'),
  episodeId: v.nullable(objectId('ep')),
  from: date,
  to: date,
  downloads: count,
  botRequests: count,
  byDay: v.array(v.object({ date, downloads: count })),
  byEpisode: v.array(v.object({ episodeId: objectId('ep'), downloads: count })),
  byApp: v.array(v.object({ app: nullableString, downloads: count })),
  byCountry: v.array(v.object({ country: nullableString, downloads: count })),
  byDevice: v.array(v.object({ device: nullableString, downloads: count })),
});
