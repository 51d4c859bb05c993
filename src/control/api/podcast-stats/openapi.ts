/**
 * OpenAPI descriptions of the podcast statistics routes (./routes.ts). The CSV representation
 * (`Accept: text/csv`) is described in words: the document types JSON answers.
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { PodcastStatsSchema } from './schemas.js';

const range = [
  { name: 'from', description: 'First day (UTC, `YYYY-MM-DD`), inclusive. Default: 29 days before `to`.', schema: { type: 'string', format: 'date' } },
  { name: 'to', description: 'Last day (UTC, `YYYY-MM-DD`), inclusive. Default: today (or at most 29 days after `from`). At most 366 days in all.', schema: { type: 'string', format: 'date' } },
];
const what =
  'A download is one client (IP address, IPv6 by /64, plus User-Agent) that was sent at least the first minute of an episode’s audio in one UTC day, summed over its full and ranged requests; `bytes=0-1` probes count nothing; known bots and Skylark itself count as `botRequests`. Apps, devices and bots are named by the Open Podcast Analytics Working Group list. Today’s numbers grow until the day is over. With `Accept: text/csv` the answer is CSV (`text/csv; charset=utf-8`, RFC 4180): a header `date,episodeId,app,country,device,downloads` and one row per day × episode × app × country × device.';
const stats = { description: 'The statistics (`podcast_stats`); `byDay` lists every day of the range.', schema: valibot(PodcastStatsSchema) };

/** The descriptions, by route (keys used in ./routes.ts). */
export const PODCAST_STATS_DOCS = {
  podcast: {
    summary: 'Retrieve a podcast’s download statistics',
    description: what,
    params: { id: 'The podcast id (`pod_…`).' },
    query: range,
    responses: { 200: stats },
  },
  episode: {
    summary: 'Retrieve an episode’s download statistics',
    description: what,
    params: { id: 'The podcast id (`pod_…`).', eid: 'The episode id (`ep_…`).' },
    query: range,
    responses: { 200: stats },
  },
} satisfies Record<string, RouteDoc>;
