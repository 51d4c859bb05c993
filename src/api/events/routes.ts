/**
 * Routes of the Events resource under `/v2/events` (PRODUCT.md §6, §9): the list (filter `type`,
 * cursor pages), one event with its deliveries and attempts, and redelivery. The spec's scope table
 * has no events scope: reads take `webhooks:read`, redelivery `webhooks:write` (docs/webhooks.md).
 */
import type { ApiServices } from '../services.js';
import { parse, parsePageQuery, queryEnum } from '../validation.js';
import { listReply } from '../lists.js';
import { EVENT_TYPES, Redeliver } from './schemas.js';
import { EVENT_DOCS as DOCS } from './openapi.js';

/** Registers the event routes. */
export function mountEvents(s: ApiServices): void {
  const { http, events } = s;
  const read = s.guard.scope('webhooks:read');
  const write = s.guard.scope('webhooks:write');

  http.api(
    'get',
    '/v2/events',
    (req, p) => {
      const q = parsePageQuery(req.query);
      return listReply('/v2/events', events.list(p.accountId, queryEnum(req.query, 'type', EVENT_TYPES), q), q);
    },
    { ...read, doc: DOCS.list },
  );
  http.api('get', '/v2/events/:id', (req, p) => ({ status: 200, body: events.get(p.accountId, req.params[0]!) }), { ...read, doc: DOCS.get });
  http.api('post', '/v2/events/:id/redeliver', (req, p) => ({ status: 200, body: events.redeliver(p.accountId, req.params[0]!, parse(Redeliver, req.body).webhookId) }), { ...write, doc: DOCS.redeliver });
}
