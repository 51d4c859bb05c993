/**
 * Request schemas of the Events resource (docs/behaviour.md §6, §9): the `type` filter of the list and the
 * optional body of POST /events/{id}/redeliver; and the event objects it answers.
 */
import * as v from 'valibot';
import { EVENT_TYPES, type EventType } from '../../../base/outbox.js';

export { EVENT_TYPES };

/** `webhookId` limits the redelivery to one endpoint; without it every endpoint of the event (or subscribed now) gets it. */
export const Redeliver = v.strictObject({
  webhookId: v.optional(v.pipe(v.string('must be a string'), v.regex(/^wh_[A-Za-z0-9]+$/, 'must be a webhook id (wh_…)'))),
});
export type RedeliverInput = v.InferOutput<typeof Redeliver>;

// ── Answers (for the OpenAPI document; ./openapi.ts) ──

/** The event object (spec "Event"). */
export const EventObjectSchema = v.object({
  id: v.string(),
  object: v.literal('event'),
  type: v.picklist(EVENT_TYPES as EventType[]),
  created: v.number(),
  livemode: v.boolean(),
  data: v.object({ object: v.record(v.string(), v.unknown()) }),
});

/** An event with its deliveries (GET /events/{id}, docs/behaviour.md §9). */
export const EventWithDeliveriesSchema = v.object({
  ...EventObjectSchema.entries,
  deliveries: v.array(
    v.object({
      webhookId: v.string(),
      status: v.picklist(['pending', 'delivered', 'undelivered']),
      nextAttemptAt: v.nullable(v.string()),
      attempts: v.array(
        v.object({
          attemptedAt: v.string(),
          responseStatus: v.nullable(v.number()),
          durationMs: v.number(),
          error: v.nullable(v.string()),
          responseBody: v.nullable(v.string()),
        }),
      ),
    }),
  ),
});
