/**
 * Routes of the Webhooks resource under `/v2/webhooks` (spec "Webhooks", PRODUCT.md §6, §9).
 * Scopes: reads `webhooks:read`, writes `webhooks:write` (publishable keys have neither → 403). The
 * key is checked before the body is read, then the body is validated (400), then the service runs.
 */
import type { ApiServices } from '../services.js';
import { parse, parsePageQuery, queryEnum } from '../validation.js';
import { listReply } from '../lists.js';
import { CreateWebhook, UpdateWebhook, WEBHOOK_STATUSES } from './schemas.js';
import { WEBHOOK_DOCS as DOCS } from './openapi.js';

/** Registers the webhook routes. */
export function mountWebhooks(s: ApiServices): void {
  const { http, webhooks } = s;
  const read = s.guard.scope('webhooks:read');
  const write = s.guard.scope('webhooks:write');

  http.api(
    'get',
    '/v2/webhooks',
    (req, p) => {
      const q = parsePageQuery(req.query);
      return listReply('/v2/webhooks', webhooks.list(p.accountId, queryEnum(req.query, 'status', WEBHOOK_STATUSES), q), q);
    },
    { ...read, doc: DOCS.list },
  );
  http.api('post', '/v2/webhooks', async (req, p) => ({ status: 201, body: await webhooks.create(p.accountId, parse(CreateWebhook, req.body)) }), { ...write, doc: DOCS.create });
  http.api('get', '/v2/webhooks/:id', (req, p) => ({ status: 200, body: webhooks.get(p.accountId, req.params[0]!) }), { ...read, doc: DOCS.get });
  http.api('patch', '/v2/webhooks/:id', async (req, p) => ({ status: 200, body: await webhooks.update(p.accountId, req.params[0]!, parse(UpdateWebhook, req.body)) }), { ...write, doc: DOCS.update });
  http.api('del', '/v2/webhooks/:id', (req, p) => ({ status: 200, body: webhooks.delete(p.accountId, req.params[0]!) }), { ...write, doc: DOCS.delete });
  http.api('post', '/v2/webhooks/:id/roll_secret', (req, p) => ({ status: 200, body: webhooks.rollSecret(p.accountId, req.params[0]!) }), { ...write, doc: DOCS.rollSecret });
  http.api('post', '/v2/webhooks/:id/test', (req, p) => ({ status: 200, body: webhooks.test(p.accountId, req.params[0]!) }), { ...write, doc: DOCS.test });
}
