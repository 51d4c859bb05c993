/** Request schemas of the Events resource (PRODUCT.md §6, §9): the optional body of POST /events/{id}/redeliver. */
import * as v from 'valibot';

/** `webhookId` limits the redelivery to one endpoint; without it every endpoint of the event (or subscribed now) gets it. */
export const Redeliver = v.strictObject({
  webhookId: v.optional(v.pipe(v.string('must be a string'), v.regex(/^wh_[A-Za-z0-9]+$/, 'must be a webhook id (wh_…)'))),
});
export type RedeliverInput = v.InferOutput<typeof Redeliver>;
