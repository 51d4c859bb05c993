/**
 * Routes of the Webhooks resource under `/v2/webhooks` (spec "Webhooks", docs/behaviour.md §6, §9).
 * Scopes: reads `webhooks:read`, writes `webhooks:write` (publishable keys have neither → 403). The
 * key is checked before the body is read, then the body is validated (400), then the service runs.
 */
import type { ApiServices } from '../services.js';
import { parse, queryEnum } from '../validation.js';
import { resourceRoutes } from '../resource.js';
import { CreateWebhook, UpdateWebhook, WEBHOOK_STATUSES } from './schemas.js';
import { WEBHOOK_DOCS as DOCS } from './openapi.js';

/** Registers the webhook routes. */
export function mountWebhooks(s: ApiServices): void {
  const { webhooks } = s;
  const r = resourceRoutes(s, { read: 'webhooks:read', write: 'webhooks:write' });
  r.list('/v2/webhooks', DOCS.list, (req, p, q) => webhooks.list(p.accountId, queryEnum(req.query, 'status', WEBHOOK_STATUSES), q));
  r.write('post', '/v2/webhooks', DOCS.create, async (req, p) => ({ status: 201, body: await webhooks.create(p.accountId, parse(CreateWebhook, req.body)) }));
  r.read('get', '/v2/webhooks/:id', DOCS.get, (req, p) => ({ status: 200, body: webhooks.get(p.accountId, req.params[0]!) }));
  r.write('patch', '/v2/webhooks/:id', DOCS.update, async (req, p) => ({ status: 200, body: await webhooks.update(p.accountId, req.params[0]!, parse(UpdateWebhook, req.body)) }));
  r.write('del', '/v2/webhooks/:id', DOCS.delete, (req, p) => ({ status: 200, body: webhooks.delete(p.accountId, req.params[0]!) }));
  r.write('post', '/v2/webhooks/:id/roll_secret', DOCS.rollSecret, (req, p) => ({ status: 200, body: webhooks.rollSecret(p.accountId, req.params[0]!) }));
  r.write('post', '/v2/webhooks/:id/test', DOCS.test, (req, p) => ({ status: 200, body: webhooks.test(p.accountId, req.params[0]!) }));
}
