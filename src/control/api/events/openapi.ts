/**
 * OpenAPI descriptions of the Events routes (./routes.ts), passed as the routes' `doc` option.
 * Request bodies are the schemas that validate them (./schemas.ts).
 */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { listOf } from '../openapi/schemas.js';
import { pageQueryDoc } from '../lists.js';
import { EVENT_TYPES, EventObjectSchema, EventWithDeliveriesSchema, Redeliver } from './schemas.js';

const id = { id: 'The event id (`evt_…`).' };

/** The descriptions, by route (keys used in ./routes.ts). */
export const EVENT_DOCS = {
  list: {
    summary: 'List events',
    query: [...pageQueryDoc(), { name: 'type', description: 'Only events of this type.', schema: { type: 'string', enum: [...EVENT_TYPES] } }],
    responses: { 200: { description: 'A list envelope of events.', schema: valibot(listOf(EventObjectSchema)) } },
  },
  get: {
    summary: 'Retrieve an event with its deliveries',
    params: id,
    responses: { 200: { description: 'The event and, per endpoint, its delivery state and every attempt.', schema: valibot(EventWithDeliveriesSchema) } },
  },
  redeliver: {
    summary: 'Redeliver an event',
    description: 'Starts a new delivery series (due now) to `webhookId`, or to every endpoint of the event and every active endpoint subscribed to its type.',
    params: id,
    body: { schema: valibot(Redeliver), required: false },
    responses: { 200: { description: 'The event with its deliveries.', schema: valibot(EventWithDeliveriesSchema) } },
  },
} satisfies Record<string, RouteDoc>;
