/**
 * OpenAPI descriptions of the listener routes (./routes.ts), passed as the routes' `doc` option.
 * Request and answer schemas are in ./schemas.ts.
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { listOf } from '../openapi/schemas.js';
import { pageQueryDoc } from '../lists.js';
import { CreateListenerToken, ListenerObject, ListenerTokenObject, StreamStatsObject } from './schemas.js';

const id = { id: 'The stream id (`stm_…`).' };
const stats = valibot(StreamStatsObject);

/** The descriptions, by route (keys used in ./routes.ts). */
export const LISTENER_DOCS = {
  list: {
    summary: 'List active listeners',
    description: 'HLS sessions and WebRTC peers listening now, newest first. No IP address is returned.',
    params: id,
    query: pageQueryDoc('listeners'),
    responses: { 200: { description: 'A list envelope of listener objects.', schema: valibot(listOf(ListenerObject)) } },
  },
  stats: {
    summary: 'Listener statistics',
    description:
      'Live count and countries of the current listeners; peak, total listeners and average listen duration of the current broadcast while the stream is live, of its last broadcast while idle (`broadcastId`, null before the first).',
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
    description: 'A JWT valid 24 h that lets one listener play a `playback: "token"` stream (HLS `?token=`, `/listen` and the Icecast port `?token=`, WHEP `Authorization: Bearer`). Secret or publishable key. A token minted with a publishable key (or an OAuth token without `streams:write`) is refused by a token stream unless the stream allows it (`playback: {mode: \"token\", publishableKeyTokens: true}`); one minted with a secret key or an OAuth token with `streams:write` opens any token stream of the account.',
    params: id,
    body: { schema: valibot(CreateListenerToken), required: false },
    responses: { 201: { description: 'The listener token.', schema: valibot(ListenerTokenObject) } },
  },
} satisfies Record<string, RouteDoc>;
