/**
 * Routes of the Events resource under `/v2/events` (docs/behaviour.md §6, §9): the list (filter `type`,
 * cursor pages), one event with its deliveries and attempts, and redelivery. The spec's scope table
 * has no events scope: reads take `webhooks:read`, redelivery `webhooks:write` (docs/webhooks.md).
 */
import type { ApiServices } from '../services.js';
import { parse, queryEnum } from '../validation.js';
import { resourceRoutes } from '../resource.js';
import { EVENT_TYPES, Redeliver } from './schemas.js';
import { EVENT_DOCS as DOCS } from './openapi.js';

/** Registers the event routes. */
export function mountEvents(s: ApiServices): void {
  const { events } = s;
  const r = resourceRoutes(s, { read: 'webhooks:read', write: 'webhooks:write' });
  r.list('/v2/events', DOCS.list, (req, p, q) => events.list(p.accountId, queryEnum(req.query, 'type', EVENT_TYPES), q));
  r.read('get', '/v2/events/:id', DOCS.get, (req, p) => ({ status: 200, body: events.get(p.accountId, req.params[0]!) }));
  r.write('post', '/v2/events/:id/redeliver', DOCS.redeliver, (req, p) => ({ status: 200, body: events.redeliver(p.accountId, req.params[0]!, parse(Redeliver, req.body).webhookId) }));
}
