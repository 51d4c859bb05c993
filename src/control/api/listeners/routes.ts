/**
 * Listener routes under `/v2/streams/{id}` (spec "Streams", docs/behaviour.md §2, §4, §9):
 * `GET …/listeners` (list envelope of active listeners), `GET …/stats` (`stream_stats`),
 * `GET …/viewer_count` (the deprecated alias of /stats, RFC 9745 `Deprecation`, RFC 8594 `Sunset`,
 * `Link rel="successor-version"` per RFC 5829), `POST …/listener_tokens` (secret or publishable
 * key; 201 `listener_token`).
 */
import type { ApiServices } from '../services.js';
import { parse } from '../validation.js';
import { resourceRoutes } from '../resource.js';
import { CreateListenerToken } from './schemas.js';
import { LISTENER_DOCS as DOCS } from './openapi.js';
import { minterOf } from '../../../base/auth/listener-tokens.js';

/** viewer_count was deprecated in 2.3.0 (stats in beta) and goes with 2.5.0, like ultra_low. */
const VIEWER_COUNT_DEPRECATION = '@1773532800'; // 2026-03-15
const VIEWER_COUNT_SUNSET = 'Wed, 30 Sep 2026 00:00:00 GMT';

/** Registers the listener routes. */
export function mountListeners(s: ApiServices): void {
  const { listeners } = s;
  const r = resourceRoutes(s, { read: 'streams:read', write: 'listener_tokens:write' });
  r.list('/v2/streams/:id/listeners', DOCS.list, (req, p, q) => listeners.list(p.accountId, req.params[0]!, q));
  r.read('get', '/v2/streams/:id/stats', DOCS.stats, (req, p) => ({ status: 200, body: listeners.stats(p.accountId, req.params[0]!) }));
  r.read('get', '/v2/streams/:id/viewer_count', DOCS.viewerCount, (req, p) => {
    const id = req.params[0]!;
    return {
      status: 200,
      body: listeners.stats(p.accountId, id),
      headers: {
        Deprecation: VIEWER_COUNT_DEPRECATION,
        Sunset: VIEWER_COUNT_SUNSET,
        Link: `<${s.urls().baseUrl}/streams/${encodeURIComponent(id)}/stats>; rel="successor-version"`,
      },
    };
  });
  r.write('post', '/v2/streams/:id/listener_tokens', DOCS.token, async (req, p) => {
    parse(CreateListenerToken, req.body);
    return { status: 201, body: await listeners.createToken(p.accountId, req.params[0]!, minterOf(p)) };
  });
}
