/**
 * Listener routes under `/v2/streams/{id}` (spec "Streams", PRODUCT.md §2, §4, §9):
 * `GET …/listeners` (list envelope of active listeners), `GET …/stats` (`stream_stats`),
 * `GET …/viewer_count` (the deprecated alias of /stats, RFC 9745 `Deprecation`, RFC 8594 `Sunset`,
 * `Link rel="successor-version"` per RFC 5829), `POST …/listener_tokens` (secret or publishable
 * key; 201 `listener_token`).
 */
import type { HttpServer } from '../../http/server.js';
import type { Guard } from '../../auth/guard.js';
import type { ListenersService } from '../../listeners/service.js';
import type { PublicUrls } from '../../config/config.js';
import { parse, parsePageQuery } from '../validation.js';
import { CreateListenerToken, ListenerObject, ListenerTokenObject, StreamStatsObject } from './schemas.js';
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { listOf } from '../openapi/schemas.js';

/** viewer_count was deprecated in 2.3.0 (stats in beta) and goes with 2.5.0, like ultra_low. */
const VIEWER_COUNT_DEPRECATION = '@1773532800'; // 2026-03-15
const VIEWER_COUNT_SUNSET = 'Wed, 30 Sep 2026 00:00:00 GMT';

const id = { id: 'The stream id (`stm_…`).' };
const pageQuery: NonNullable<RouteDoc['query']> = [
  { name: 'limit', description: 'Page size, 1 to 100.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
  { name: 'after', description: 'Return listeners that joined before this listener id (next page).', schema: { type: 'string' } },
  { name: 'before', description: 'Return listeners that joined after this listener id; not with `after`.', schema: { type: 'string' } },
];
const stats = valibot(StreamStatsObject);
const DOCS: Record<string, RouteDoc> = {
  list: {
    summary: 'List active listeners',
    description: 'HLS sessions and WebRTC peers listening now, newest first. No IP address is returned.',
    params: id,
    query: pageQuery,
    responses: { 200: { description: 'A list envelope of listener objects.', schema: valibot(listOf(ListenerObject)) } },
  },
  stats: {
    summary: 'Listener statistics',
    description: 'Live count, peak, countries of the current listeners, average listen duration and total sessions.',
    params: id,
    responses: { 200: { description: 'The stream_stats object.', schema: stats } },
  },
  viewerCount: {
    summary: 'Listener statistics (deprecated alias of /stats)',
    deprecated: true,
    params: id,
    responses: {
      200: {
        description: 'The same body as /stats.',
        schema: stats,
        headers: {
          Deprecation: { description: 'RFC 9745.', schema: { type: 'string' } },
          Sunset: { description: 'RFC 8594.', schema: { type: 'string' } },
          Link: { description: 'The successor: `/stats` with rel="successor-version".', schema: { type: 'string' } },
        },
      },
    },
  },
  token: {
    summary: 'Create a listener token',
    description: 'A JWT valid 24 h that lets one listener play a `playback: "token"` stream (HLS `?token=`, WHEP `Authorization: Bearer`). Secret or publishable key.',
    params: id,
    body: { schema: valibot(CreateListenerToken), required: false },
    responses: { 201: { description: 'The listener token.', schema: valibot(ListenerTokenObject) } },
  },
};

/** Registers the listener routes. */
export function registerListenerRoutes(http: HttpServer, listeners: ListenersService, guard: Guard, urls: () => PublicUrls): void {
  const read = guard.scope('streams:read');
  const tokens = guard.scope('listener_tokens:write');

  http.api(
    'get',
    '/v2/streams/:id/listeners',
    (req, p) => {
      const id = req.params[0]!;
      const page = listeners.list(p.accountId, id, parsePageQuery(req.query));
      return { status: 200, body: { object: 'list', url: `/v2/streams/${id}/listeners`, ...page } };
    },
    { ...read, doc: DOCS.list },
  );

  http.api('get', '/v2/streams/:id/stats', (req, p) => ({ status: 200, body: listeners.stats(p.accountId, req.params[0]!) }), { ...read, doc: DOCS.stats });

  http.api(
    'get',
    '/v2/streams/:id/viewer_count',
    (req, p) => {
      const id = req.params[0]!;
      return {
        status: 200,
        body: listeners.stats(p.accountId, id),
        headers: {
          Deprecation: VIEWER_COUNT_DEPRECATION,
          Sunset: VIEWER_COUNT_SUNSET,
          Link: `<${urls().baseUrl}/streams/${encodeURIComponent(id)}/stats>; rel="successor-version"`,
        },
      };
    },
    { ...read, doc: DOCS.viewerCount },
  );

  http.api(
    'post',
    '/v2/streams/:id/listener_tokens',
    async (req, p) => {
      parse(CreateListenerToken, req.body);
      return { status: 201, body: await listeners.createToken(p.accountId, req.params[0]!) };
    },
    { ...tokens, doc: DOCS.token },
  );
}
