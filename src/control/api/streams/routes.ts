/**
 * Routes of the Streams resource under `/v2/streams` (spec "Streams", docs/behaviour.md §2, §9), with what
 * plays now and the play log (`…/now_playing`, `…/tracks`, docs/behaviour.md §11) and the broadcasts
 * (`…/broadcasts`, docs/streams.md), and publish tokens for WHIP (`…/publish_tokens`, docs/behaviour.md "Go live over WHIP").
 * Scopes: reads need `streams:read`, writes `streams:write` (publishable keys read only). The key
 * is checked before any body is read (401/403 first), then the body is validated (400), then the
 * service runs (404 for another account's stream).
 */
import type { ApiReply } from '../../../base/http/server.js';
import type { WithDeprecation } from '../../services/streams.js';
import type { StreamObject } from '../../services/stream-object.js';
import type { Principal } from '../../../base/auth/api-keys.js';
import type { ApiServices } from '../services.js';
import { parse, queryEnum } from '../validation.js';
import { resourceRoutes } from '../resource.js';
import { CreatePublishToken, CreateStream, SetNowPlaying, STREAM_STATUSES, UpdateStream } from './schemas.js';
import { STREAM_DOCS as DOCS } from './openapi.js';

/** `quality=ultra_low` answers carry these (RFC 9745 Deprecation; RFC 7234 §5.5 Warning). */
const ULTRA_LOW_HEADERS = {
  Deprecation: '@1773532800', // 2026-03-15, release 2.4.1
  Warning: '299 - "quality=ultra_low is deprecated and will be removed in v2.5.0; use quality=low"',
};

const withDeprecation = (status: number, r: WithDeprecation<StreamObject>): ApiReply => ({
  status,
  body: r.value,
  headers: r.deprecated.length ? ULTRA_LOW_HEADERS : undefined,
});
/** Stream keys are shown to secret keys only (docs/behaviour.md §2). */
const secret = (p: Principal) => p.kind === 'secret_key';

/** Registers the stream routes. */
export function mountStreams(s: ApiServices): void {
  const { streams } = s;
  const r = resourceRoutes(s, { read: 'streams:read', write: 'streams:write' });
  r.list('/v2/streams', DOCS.list, (req, p, q) => streams.list(p.accountId, queryEnum(req.query, 'status', STREAM_STATUSES), q, secret(p)));
  r.write('post', '/v2/streams', DOCS.create, (req, p) => withDeprecation(201, streams.create(p.accountId, parse(CreateStream, req.body))));
  r.read('get', '/v2/streams/:id', DOCS.get, (req, p) => ({ status: 200, body: streams.get(p.accountId, req.params[0]!, secret(p)) }));
  r.write('patch', '/v2/streams/:id', DOCS.update, (req, p) => withDeprecation(200, streams.update(p.accountId, req.params[0]!, parse(UpdateStream, req.body), secret(p))));
  r.write('del', '/v2/streams/:id', DOCS.delete, (req, p) => ({ status: 200, body: streams.delete(p.accountId, req.params[0]!) }));
  r.write('post', '/v2/streams/:id/reset_stream_key', DOCS.resetStreamKey, (req, p) => ({ status: 200, body: streams.resetStreamKey(p.accountId, req.params[0]!) }));
  r.write('post', '/v2/streams/:id/publish_tokens', DOCS.publishToken, async (req, p) => ({
    status: 201,
    body: await streams.createPublishToken(p.accountId, req.params[0]!, parse(CreatePublishToken, req.body ?? {}).ttlSeconds),
  }));
  r.write('post', '/v2/streams/:id/now_playing', DOCS.setNowPlaying, (req, p) => ({ status: 200, body: streams.setNowPlaying(p.accountId, req.params[0]!, parse(SetNowPlaying, req.body), secret(p)) }));
  r.list('/v2/streams/:id/tracks', DOCS.tracks, (req, p, q) => streams.tracks(p.accountId, req.params[0]!, q, req.query.get('broadcast') ?? undefined));
  r.list('/v2/streams/:id/broadcasts', DOCS.broadcasts, (req, p, q) => streams.broadcasts(p.accountId, req.params[0]!, q));
  r.read('get', '/v2/streams/:id/broadcasts/:bid', DOCS.broadcast, (req, p) => ({ status: 200, body: streams.broadcast(p.accountId, req.params[0]!, req.params[1]!) }));
}
