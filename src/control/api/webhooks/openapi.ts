/**
 * OpenAPI descriptions of the Webhooks routes (./routes.ts), passed as the routes' `doc` option.
 * Request bodies are the schemas that validate them (./schemas.ts).
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { Deleted, listOf } from '../openapi/schemas.js';
import { pageQueryDoc } from '../lists.js';
import { EventObjectSchema } from '../events/schemas.js';
import { CreateWebhook, UpdateWebhook, WEBHOOK_STATUSES, WebhookObjectSchema } from './schemas.js';

const webhook = valibot(WebhookObjectSchema);
const id = { id: 'The webhook id (`wh_…`).' };

/** The descriptions, by route (keys used in ./routes.ts). */
export const WEBHOOK_DOCS = {
  list: {
    summary: 'List webhooks',
    query: [...pageQueryDoc(), { name: 'status', description: 'Only webhooks in this state.', schema: { type: 'string', enum: [...WEBHOOK_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of webhooks (no secrets).', schema: valibot(listOf(WebhookObjectSchema)) } },
  },
  create: {
    summary: 'Create a webhook',
    description: '`events`: event types or `["*"]`; unknown types → 400. Private/loopback URLs → 400 `url_not_allowed` unless the operator allows them.',
    body: { schema: valibot(CreateWebhook) },
    responses: { 201: { description: 'The webhook with its `signingSecret` (shown only here and by roll_secret).', schema: webhook } },
    errors: { 400: ['param_required', 'parameter_invalid', 'parameter_unknown', 'url_not_allowed', 'webhook_limit_reached'] },
  },
  get: { summary: 'Retrieve a webhook', params: id, responses: { 200: { description: 'The webhook.', schema: webhook } } },
  update: {
    summary: 'Update a webhook',
    description: '`status`: `active` or `disabled`; `description: null` clears it.',
    params: id,
    body: { schema: valibot(UpdateWebhook), required: false },
    responses: { 200: { description: 'The updated webhook.', schema: webhook } },
    errors: { 400: ['parameter_invalid', 'parameter_unknown', 'url_not_allowed'] },
  },
  delete: { summary: 'Delete a webhook', params: id, responses: { 200: { description: 'Deleted.', schema: valibot(Deleted('webhook')) } } },
  rollSecret: {
    summary: 'Roll the signing secret',
    description: 'The old secret stops signing at once.',
    params: id,
    responses: { 200: { description: 'The webhook with its new `signingSecret`.', schema: webhook } },
  },
  test: {
    summary: 'Send a webhook.test event',
    description: 'Delivered to this endpoint only, whatever it subscribes to. `livemode` is false.',
    params: id,
    responses: { 200: { description: 'The webhook.test event.', schema: valibot(EventObjectSchema) } },
    errors: { 409: ['webhook_disabled'] },
  },
} satisfies Record<string, RouteDoc>;
