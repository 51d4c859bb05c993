/**
 * The answer schemas shared by every resource of the OpenAPI document (the error envelope, the
 * list envelope, deletions, and the pieces each resource's answer schemas are made of; the objects
 * themselves are valibot schemas beside each resource in `schemas.ts`), and the one converter from valibot to JSON Schema 2020-12 (`@valibot/to-json-schema`)
 * that the document uses for requests and responses alike. Responses list every field as required
 * (the API always sends every field, `null` when unset) and allow additional ones (clients must
 * tolerate fields added later).
 */
import * as v from 'valibot';
import { toJsonSchema } from '@valibot/to-json-schema';
import { ERROR_TYPES } from '../../../base/errors/errors.js';

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

// ── Pieces of the answer schemas beside each resource (src/control/api/<resource>/schemas.ts) ──

/** An object id with its prefix (`objectId('stm')`: `stm_…`). */
export const objectId = (prefix: string) => v.pipe(v.string(), v.regex(new RegExp(`^${prefix}_[A-Za-z0-9]+$`)));
/** An ISO 8601 timestamp as the API writes it. */
export const timestamp = v.pipe(v.string(), v.isoTimestamp());
export const nullableString = v.nullable(v.string());
/** A count (integer ≥ 0). */
export const count = v.pipe(v.number(), v.integer(), v.minValue(0));

/** spec "Errors": the envelope of every 4xx/5xx answer of `/v2`. */
export const ErrorEnvelope = v.object({
  error: v.object({
    type: v.picklist(ERROR_TYPES),
    code: v.string(),
    message: v.string(),
    param: v.optional(v.string()),
    requestId: objectId('req'),
  }),
});

/** A list envelope of `item` (spec "List envelope", docs/behaviour.md §9 "Lists"). */
export const listOf = (item: v.GenericSchema) =>
  v.object({ object: v.literal('list'), url: v.optional(v.string()), data: v.array(item), hasMore: v.boolean(), nextCursor: v.nullable(v.string()) });

/** Every delete answers this (docs/behaviour.md §9). */
export const Deleted = (object: string) => v.object({ id: v.string(), object: v.literal(object), deleted: v.literal(true) });

/** Any JSON object (routes registered without a response schema). */
export const AnyObject = v.record(v.string(), v.unknown());
