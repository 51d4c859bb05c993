/**
 * Every error code the HTTP API, HLS, WHEP and the dashboard answer with (spec "Errors"), with its
 * HTTP status and what it means; and every `stream.error` code of the events (docs/behaviour.md §9). The
 * `error.type` of an answer follows from its status (src/base/errors/errors.ts). A code not in this table
 * cannot be thrown (`ErrorCode`). A code answered with more than one status lists the others in
 * `also` (the status is then chosen where it is thrown).
 */

interface CodeSpec {
  status: number;
  also?: readonly number[];
  description: string;
}

export const ERROR_CODES = {
  // 400 — the request is wrong
  parameter_invalid: { status: 400, description: 'A parameter has a value that is not allowed; `param` names it.' },
  param_required: { status: 400, description: 'A required parameter is missing; `param` names it.' },
  parameter_unknown: { status: 400, description: 'The body or the query string names a parameter the endpoint does not take; `param` names it.' },
  invalid_json: { status: 400, description: 'The body is not a JSON object.' },
  body_missing: { status: 400, description: 'The endpoint needs a body and none was sent.' },
  invalid_sdp: { status: 400, description: 'The WHEP offer is not an SDP offer with one audio section (RFC 9725).' },
  url_invalid: { status: 400, description: 'The webhook URL is not an absolute http(s) URL.' },
  url_not_allowed: { status: 400, description: 'The webhook URL points at a private, loopback or otherwise non-global address.' },
  webhook_limit_reached: { status: 400, description: 'The account has as many webhook endpoints as it may.' },
  idempotency_key_invalid: { status: 400, description: 'The Idempotency-Key header is empty or longer than 255 characters.' },
  idempotency_key_reused: { status: 400, description: 'The Idempotency-Key was used before with another request.' },
  episode_audio_missing: { status: 400, description: 'The episode has no audio yet, so it cannot be published.' },
  // 401 / 403 — who is asking
  missing_token: { status: 401, description: 'No API key, access token or listener token was sent.' },
  invalid_token: { status: 401, also: [403], description: 'The key or token is malformed, unknown, revoked or for another stream (403 on HLS, and for a WHIP publish token of another stream).' },
  token_expired: { status: 401, also: [403], description: 'The access or listener token has expired (403 on HLS).' },
  key_revoked: { status: 401, also: [409], description: 'The API key was revoked or rolled (409: revoking it again).' },
  not_signed_in: { status: 401, description: 'The dashboard session is missing or has expired.' },
  insufficient_scope: { status: 403, description: 'The key or token lacks the permission the request needs.' },
  csrf_failed: { status: 403, description: 'The form or request was not sent by the dashboard itself (CSRF check).' },
  // 404 / 405
  resource_missing: { status: 404, description: 'No such object (or not this account’s); `param` names the id.' },
  route_not_found: { status: 404, description: 'No such URL.' },
  method_not_allowed: { status: 405, description: 'The URL exists but not with this method; `Allow` lists the methods.' },
  // 406
  codec_not_acceptable: { status: 406, description: 'The WHIP offer has no audio codec the node takes (Opus only); the message names what was offered.' },
  // 409 — the state does not allow it
  state_conflict: { status: 409, description: 'The object is already in the state asked for, or cannot move there.' },
  stream_ended: { status: 409, description: 'The stream has ended.' },
  stream_not_live: { status: 409, description: 'The stream is not live.' },
  webhook_disabled: { status: 409, description: 'The webhook endpoint is disabled.' },
  icecast_mount_taken: { status: 409, description: 'Another stream of the node has this Icecast mount; `param` is `icecastMount` and the message names the mount.' },
  idempotency_key_in_use: { status: 409, description: 'A request with this Idempotency-Key is still running.' },
  // 413 / 415
  body_too_large: { status: 413, description: 'The body is larger than the endpoint takes.' },
  unsupported_media_type: { status: 415, description: 'The body is not of a type the endpoint takes (e.g. not audio).' },
  // 429 / 5xx — try again
  rate_limit_exceeded: { status: 429, description: 'Too many requests in the window; retry after `Retry-After` seconds.' },
  too_many_pending_offers: { status: 429, description: 'Too many WHEP offers from this address (or in all) are waiting to connect; retry after `Retry-After`.' },
  too_many_connections: { status: 429, description: 'Too many progressive listening connections from this address (or in all); retry after `Retry-After`.' },
  internal_error: { status: 500, description: 'Something failed on the server; quote the request id.' },
  listener_capacity: { status: 503, description: 'The node serves as many listeners as it can; retry later.' },
  too_many_held_requests: { status: 503, description: 'The node (or this address) holds as many waiting LL-HLS requests (blocking reloads, part waits) as it may; retry after `Retry-After`.' },
  ice_gathering_timeout: { status: 503, description: 'The server could not gather its ICE candidates for a WHEP answer in time; retry.' },
  database_busy: { status: 503, description: 'The database is busy (locked by another process) or cannot be written; retry after `Retry-After`.' },
  insufficient_storage: { status: 507, description: 'The data volume is too full to take this (its free-space floor would be crossed).' },
} as const satisfies Record<string, CodeSpec>;

/** A code the API may answer with. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The statuses `code` is answered with (its own first). */
export function statusesOf(code: ErrorCode): readonly number[] {
  const c: CodeSpec = ERROR_CODES[code];
  return [c.status, ...(c.also ?? [])];
}

/** `data.error.code` of `stream.error` events (docs/behaviour.md §9 "Events", §13). */
export const STREAM_ERROR_CODES = {
  codec_mismatch: 'The publisher sent audio of another codec than the stream’s (`expected`, `received`); the publish was refused.',
  bitrate_spike: 'The ingest bitrate was over 1.5 × nominal for 5 s (`measuredKbps`, `nominalKbps`); the stream stays live.',
  transcoder_failed: 'The ABR ladder’s encoder stopped; the passthrough layer keeps serving.',
  frame_too_large: 'An audio frame was larger than the node takes (`SKYLARK_MAX_AUDIO_FRAME_BYTES`); the publish was ended.',
  segment_too_large: 'A segment grew past its byte cap (`SKYLARK_SEGMENT_BYTES_FACTOR` × nominal); the publish was ended.',
  recording_stopped: 'The recording stopped early (`reason`: `disk_free` under the floor, or `write_failed`); what was recorded is kept.',
} as const;

/** A `stream.error` code. */
export type StreamErrorCode = keyof typeof STREAM_ERROR_CODES;
