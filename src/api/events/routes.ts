/**
 * Routes of the Events resource under `/v2/events` (PRODUCT.md §6, §9): the list (filter `type`,
 * cursor pages), one event with its deliveries and attempts, and redelivery. The spec's scope table
 * has no events scope: reads take `webhooks:read`, redelivery `webhooks:write` (docs/webhooks.md).
 */
import type { HttpServer } from '../../http/server.js';
import type { EventsService } from '../../services/events.js';
import type { Guard } from '../../auth/guard.js';
import { parse, parsePageQuery, queryEnum } from '../validation.js';
import { EVENT_TYPES } from '../webhooks/schemas.js';
import { Redeliver } from './schemas.js';

/** Registers the event routes on `http`. */
export function registerEventRoutes(http: HttpServer, events: EventsService, guard: Guard): void {
  const read = guard.scope('webhooks:read');
  const write = guard.scope('webhooks:write');

  http.api(
    'get',
    '/v2/events',
    (req, p) => {
      const q = parsePageQuery(req.query);
      const type = queryEnum(req.query, 'type', EVENT_TYPES);
      const page = events.list(p.accountId, type, q);
      const cursorItem = q.before !== undefined ? page.data[0] : page.data[page.data.length - 1];
      return {
        status: 200,
        body: { object: 'list', url: '/v2/events', data: page.data, hasMore: page.hasMore, nextCursor: page.hasMore && cursorItem ? cursorItem.id : null },
      };
    },
    read,
  );

  http.api('get', '/v2/events/:id', (req, p) => ({ status: 200, body: events.get(p.accountId, req.params[0]!) }), read);

  http.api(
    'post',
    '/v2/events/:id/redeliver',
    (req, p) => ({ status: 200, body: events.redeliver(p.accountId, req.params[0]!, parse(Redeliver, req.body).webhookId) }),
    write,
  );
}
