/**
 * Routes of the Webhooks resource under `/v2/webhooks` (spec "Webhooks", PRODUCT.md §6, §9).
 * Scopes: reads `webhooks:read`, writes `webhooks:write` (publishable keys have neither → 403). The
 * key is checked before the body is read, then the body is validated (400), then the service runs.
 */
import type { HttpServer } from '../../http/server.js';
import type { WebhooksService } from '../../services/webhooks.js';
import type { Guard } from '../../auth/guard.js';
import { parse, parsePageQuery, queryEnum } from '../validation.js';
import { CreateWebhook, UpdateWebhook, WEBHOOK_STATUSES } from './schemas.js';
import { documentWebhooks } from './openapi.js';

/** Registers the webhook routes on `http`. */
export function registerWebhookRoutes(http: HttpServer, webhooks: WebhooksService, guard: Guard): void {
  const read = guard.scope('webhooks:read');
  const write = guard.scope('webhooks:write');
  documentWebhooks(); // also describes the Events routes

  http.api(
    'get',
    '/v2/webhooks',
    (req, p) => {
      const q = parsePageQuery(req.query);
      const status = queryEnum(req.query, 'status', WEBHOOK_STATUSES);
      const page = webhooks.list(p.accountId, status, q);
      const cursorItem = q.before !== undefined ? page.data[0] : page.data[page.data.length - 1];
      return {
        status: 200,
        body: { object: 'list', url: '/v2/webhooks', data: page.data, hasMore: page.hasMore, nextCursor: page.hasMore && cursorItem ? cursorItem.id : null },
      };
    },
    read,
  );

  http.api('post', '/v2/webhooks', async (req, p) => ({ status: 201, body: await webhooks.create(p.accountId, parse(CreateWebhook, req.body)) }), write);

  http.api('get', '/v2/webhooks/:id', (req, p) => ({ status: 200, body: webhooks.get(p.accountId, req.params[0]!) }), read);

  http.api(
    'patch',
    '/v2/webhooks/:id',
    async (req, p) => ({ status: 200, body: await webhooks.update(p.accountId, req.params[0]!, parse(UpdateWebhook, req.body)) }),
    write,
  );

  http.api('del', '/v2/webhooks/:id', (req, p) => ({ status: 200, body: webhooks.delete(p.accountId, req.params[0]!) }), write);

  http.api('post', '/v2/webhooks/:id/roll_secret', (req, p) => ({ status: 200, body: webhooks.rollSecret(p.accountId, req.params[0]!) }), write);

  http.api('post', '/v2/webhooks/:id/test', (req, p) => ({ status: 200, body: webhooks.test(p.accountId, req.params[0]!) }), write);
}
