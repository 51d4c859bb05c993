/**
 * Response schemas of the OpenAPI document (valibot, like the request schemas beside each
 * resource), and the one converter from valibot to JSON Schema 2020-12 (`@valibot/to-json-schema`)
 * that the document uses for requests and responses alike. Responses list every field as required
 * (the API always sends every field, `null` when unset) and allow additional ones (clients must
 * tolerate fields added later).
 */
import * as v from 'valibot';
import { toJsonSchema } from '@valibot/to-json-schema';

/** A JSON Schema object (2020-12). */
export type JsonSchema = Record<string, unknown>;

/** valibot → JSON Schema 2020-12. `custom` checks become `{type: object}` (our only use: plain-object guards); `check` and `transform` actions are dropped. */
export function jsonSchemaOf(schema: unknown): JsonSchema {
  const out = toJsonSchema(schema as v.GenericSchema, {
    target: 'draft-2020-12',
    errorMode: 'ignore',
    typeMode: 'ignore',
    overrideSchema: (c) => (c.valibotSchema.type === 'custom' ? { type: 'object' } : undefined),
  }) as JsonSchema;
  delete out.$schema;
  return out;
}

const id = (prefix: string) => v.pipe(v.string(), v.regex(new RegExp(`^${prefix}_[A-Za-z0-9]+$`)));
const timestamp = v.pipe(v.string(), v.isoTimestamp());
const nullableString = v.nullable(v.string());

/** spec "Errors": the envelope of every 4xx/5xx answer of `/v2`. */
export const ErrorEnvelope = v.object({
  error: v.object({
    type: v.picklist(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'conflict_error', 'rate_limit_error', 'api_error']),
    code: v.string(),
    message: v.string(),
    param: v.optional(v.string()),
    requestId: id('req'),
  }),
});

/** spec "Stream", PRODUCT.md §2, §9. `streamKey` only for secret keys. */
export const StreamObject = v.object({
  id: id('stm'),
  object: v.literal('stream'),
  title: v.string(),
  title_en: nullableString,
  title_ru: nullableString,
  title_de: nullableString,
  title_fr: nullableString,
  status: v.picklist(['idle', 'live', 'ended']),
  quality: v.picklist(['low', 'medium', 'high']),
  codec: v.picklist(['aac', 'opus', 'mp3']),
  region: v.picklist(['eu-west-1', 'ap-southeast-1']),
  rtmpUrl: v.string(),
  streamKey: v.optional(v.pipe(v.string(), v.regex(/^sk_[a-z0-9]+_[A-Za-z0-9]+$/))),
  hlsUrl: v.string(),
  listenerCount: v.pipe(v.number(), v.integer(), v.minValue(0)),
  reconnectWindow: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(300)),
  recording: v.nullable(v.object({ podcastId: v.string() })),
  playback: v.picklist(['public', 'token']),
  createdAt: timestamp,
  startedAt: v.nullable(timestamp),
  endedAt: v.nullable(timestamp),
  metadata: v.record(v.string(), v.string()),
});

/** A list envelope of `item` (spec "List envelope", PRODUCT.md §9 "Lists"). */
export const listOf = (item: v.GenericSchema) =>
  v.object({ object: v.literal('list'), url: v.optional(v.string()), data: v.array(item), hasMore: v.boolean(), nextCursor: v.nullable(v.string()) });

/** Every delete answers this (PRODUCT.md §9). */
export const Deleted = (object: string) => v.object({ id: v.string(), object: v.literal(object), deleted: v.literal(true) });

/** GET /v2/account. */
export const AccountObject = v.object({
  id: id('acct'),
  object: v.literal('account'),
  name: v.string(),
  plan: v.picklist(['free', 'paid']),
  defaultRegion: v.picklist(['eu-west-1', 'ap-southeast-1']),
  email: nullableString,
  createdAt: timestamp,
  usage: v.object({
    object: v.literal('rate_limit_usage'),
    windowSeconds: v.pipe(v.number(), v.integer()),
    limit: v.pipe(v.number(), v.integer()),
    used: v.pipe(v.number(), v.integer(), v.minValue(0)),
    remaining: v.pipe(v.number(), v.integer(), v.minValue(0)),
    resetsAt: timestamp,
  }),
});

/** Any JSON object (routes registered without a response schema). */
export const AnyObject = v.record(v.string(), v.unknown());
