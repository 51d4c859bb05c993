/**
 * Request schemas of the Webhooks resource (spec "Webhooks", "Event types"; docs/behaviour.md §6, §9).
 * `events` lists event types of the spec or `"*"` (all); an unknown type is a 400 naming it.
 */
import * as v from 'valibot';
import { EVENT_TYPES } from '../../../base/outbox.js';

export { EVENT_TYPES };

export const WEBHOOK_STATUSES = ['active', 'disabled'] as const;
export const DESCRIPTION_MAX = 500;
export const URL_MAX = 2048;

const known = new Set<string>([...EVENT_TYPES, '*']);
const url = v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'), v.maxLength(URL_MAX, `must be at most ${URL_MAX} characters`));
const events = v.pipe(
  v.array(v.string('event types are strings'), 'must be an array of event types'),
  v.minLength(1, 'must name at least one event type (or "*")'),
  v.maxLength(EVENT_TYPES.length + 1, 'names too many event types'),
  v.check(
    (a) => a.every((t) => known.has(t)),
    (issue) => `Unknown event type '${(issue.input as string[]).find((t) => !known.has(t))}'; use one of ${[...EVENT_TYPES, '*'].join(', ')}.`,
  ),
);
const description = v.pipe(v.string('must be a string'), v.maxLength(DESCRIPTION_MAX, `must be at most ${DESCRIPTION_MAX} characters`));

export const CreateWebhook = v.strictObject({
  url,
  events,
  description: v.optional(description),
});

export const UpdateWebhook = v.strictObject({
  url: v.optional(url),
  events: v.optional(events),
  /** `null` clears it. */
  description: v.optional(v.nullable(description)),
  status: v.optional(v.picklist(WEBHOOK_STATUSES, 'must be active or disabled')),
});

// ── Answers (for the OpenAPI document; ./openapi.ts) ──

/** The webhook object (spec "Webhook"); `signingSecret` only in the create and roll answers. */
export const WebhookObjectSchema = v.object({
  id: v.string(),
  object: v.literal('webhook'),
  url: v.string(),
  events: v.array(v.string()),
  description: v.nullable(v.string()),
  status: v.picklist(WEBHOOK_STATUSES),
  createdAt: v.string(),
  signingSecret: v.optional(v.string()),
});
