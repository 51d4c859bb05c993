/** Request schemas of the listener endpoints (docs/behaviour.md §4), and the objects they answer. */
import * as v from 'valibot';
import { timestamp } from '../openapi/schemas.js';

/** `POST /streams/{id}/listener_tokens` takes no parameters (an empty body or `{}`). */
export const CreateListenerToken = v.strictObject({});

// ── Answers (for the OpenAPI document; ./openapi.ts) ──

/** The listener object (`lst_…`, docs/behaviour.md §4). */
export const ListenerObject = v.object({
  id: v.string(),
  object: v.literal('listener'),
  streamId: v.string(),
  protocol: v.picklist(['hls', 'webrtc', 'icecast']),
  country: v.nullable(v.string()),
  connectedAt: timestamp,
  lastSeenAt: timestamp,
  durationSeconds: v.number(),
  userAgent: v.nullable(v.string()),
  /** `catch_up` for a listener of the catch-up playlists (docs/behaviour.md §17), else `live`. */
  mode: v.picklist(['live', 'catch_up']),
});

/** `/stats` and `/viewer_count`. */
export const StreamStatsObject = v.object({
  object: v.literal('stream_stats'),
  streamId: v.string(),
  listenerCount: v.number(),
  peakListenerCount: v.number(),
  countries: v.array(v.object({ country: v.nullable(v.string()), listeners: v.number() })),
  averageListenDurationSeconds: v.number(),
  totalListeners: v.number(),
  /** The broadcast the peak, total and average are of: the current one while live, the last one while idle (docs/streams.md). */
  broadcastId: v.optional(v.nullable(v.string())),
  /** Bytes of the stream's catch-up segments on disk (docs/behaviour.md "Catch-up radio"; 0 with catch-up off). */
  catchUpBytes: v.number(),
});

/** A new listener token. */
export const ListenerTokenObject = v.object({
  object: v.literal('listener_token'),
  token: v.string(),
  streamId: v.string(),
  expiresAt: timestamp,
});
