/**
 * OpenAPI descriptions of the Webhooks and Events routes (src/api/webhooks/routes.ts,
 * src/api/events/routes.ts), fed to the shared registry. Request bodies are the schemas that
 * validate them.
 */
import { documentRoute, valibot, type RouteDoc } from '../openapi/registry.js';
import { CreateWebhook, UpdateWebhook, EVENT_TYPES, WEBHOOK_STATUSES, WebhookObjectSchema, EventObjectSchema, EventWithDeliveriesSchema } from './schemas.js';
import { Redeliver } from '../events/schemas.js';
import { Deleted, listOf } from '../openapi/schemas.js';

const pageQuery: NonNullable<RouteDoc['query']> = [
  { name: 'limit', description: 'Page size, 1 to 100.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
  { name: 'after', description: 'Return items older than this id (next page).', schema: { type: 'string' } },
  { name: 'before', description: 'Return items newer than this id (previous page); not with `after`.', schema: { type: 'string' } },
];
const webhook = valibot(WebhookObjectSchema);
const id = { id: 'The webhook id (`wh_…`).' };

/** Registers the Webhooks and Events descriptions. Idempotent. */
export function documentWebhooks(): void {
  documentRoute('GET', '/v2/webhooks', {
    summary: 'List webhooks',
    query: [...pageQuery, { name: 'status', description: 'Only webhooks in this state.', schema: { type: 'string', enum: [...WEBHOOK_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of webhooks (no secrets).', schema: valibot(listOf(WebhookObjectSchema)) } },
  });
  documentRoute('POST', '/v2/webhooks', {
    summary: 'Create a webhook',
    description: '`events`: event types or `["*"]`; unknown types → 400. Private/loopback URLs → 400 `url_not_allowed` unless the operator allows them.',
    body: { schema: valibot(CreateWebhook) },
    responses: { 201: { description: 'The webhook with its `signingSecret` (shown only here and by roll_secret).', schema: webhook } },
    errors: { 400: ['param_required', 'parameter_invalid', 'parameter_unknown', 'url_not_allowed', 'webhook_limit_reached'] },
  });
  documentRoute('GET', '/v2/webhooks/:id', { summary: 'Retrieve a webhook', params: id, responses: { 200: { description: 'The webhook.', schema: webhook } } });
  documentRoute('PATCH', '/v2/webhooks/:id', {
    summary: 'Update a webhook',
    description: '`status`: `active` or `disabled`; `description: null` clears it.',
    params: id,
    body: { schema: valibot(UpdateWebhook), required: false },
    responses: { 200: { description: 'The updated webhook.', schema: webhook } },
    errors: { 400: ['parameter_invalid', 'parameter_unknown', 'url_not_allowed'] },
  });
  documentRoute('DELETE', '/v2/webhooks/:id', { summary: 'Delete a webhook', params: id, responses: { 200: { description: 'Deleted.', schema: valibot(Deleted('webhook')) } } });
  documentRoute('POST', '/v2/webhooks/:id/roll_secret', {
    summary: 'Roll the signing secret',
    description: 'The old secret stops signing at once.',
    params: id,
    responses: { 200: { description: 'The webhook with its new `signingSecret`.', schema: webhook } },
  });
  documentRoute('POST', '/v2/webhooks/:id/test', {
    summary: 'Send a webhook.test event',
    description: 'Delivered to this endpoint only, whatever it subscribes to. `livemode` is false.',
    params: id,
    responses: { 200: { description: 'The webhook.test event.', schema: valibot(EventObjectSchema) } },
    errors: { 409: ['webhook_disabled'] },
  });
  documentRoute('GET', '/v2/events', {
    summary: 'List events',
    query: [...pageQuery, { name: 'type', description: 'Only events of this type.', schema: { type: 'string', enum: [...EVENT_TYPES] } }],
    responses: { 200: { description: 'A list envelope of events.', schema: valibot(listOf(EventObjectSchema)) } },
  });
  documentRoute('GET', '/v2/events/:id', {
    summary: 'Retrieve an event with its deliveries',
    params: { id: 'The event id (`evt_…`).' },
    responses: { 200: { description: 'The event and, per endpoint, its delivery state and every attempt.', schema: valibot(EventWithDeliveriesSchema) } },
  });
  documentRoute('POST', '/v2/events/:id/redeliver', {
    summary: 'Redeliver an event',
    description: 'Starts a new delivery series (due now) to `webhookId`, or to every endpoint of the event and every active endpoint subscribed to its type.',
    params: { id: 'The event id (`evt_…`).' },
    body: { schema: valibot(Redeliver), required: false },
    responses: { 200: { description: 'The event with its deliveries.', schema: valibot(EventWithDeliveriesSchema) } },
  });
}
