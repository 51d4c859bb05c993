/**
 * How a route describes itself for `GET /v2/openapi.json`: every resource passes a `RouteDoc` as
 * the `doc` option of its routes (`http.api('get', '/v2/x', h, { ...guard.scope('x:read'), doc })`),
 * written in its own `src/control/api/<resource>/openapi.ts`. The document is built from the routes the
 * HTTP server actually registered, so a route without a doc still appears (with its scope and the
 * standard errors) and the OpenAPI test names it as undocumented.
 *
 * Schemas are valibot schemas (converted by src/control/api/openapi/schemas.ts) or plain JSON Schema objects
 * marked with `{ json: … }`.
 */
import type { ErrorCode } from '../../../base/errors/errors.js';

/** A valibot schema (opaque here: only src/control/api/openapi/schemas.ts converts it) or `{ json }` for literal JSON Schema. */
export type SchemaRef = { valibot: unknown } | { json: Record<string, unknown> };

/** One operation's description. */
export interface RouteDoc {
  summary: string;
  description?: string;
  /** Defaults to the path's first segment (`streams`). */
  tags?: string[];
  operationId?: string;
  deprecated?: boolean;
  /** Descriptions of the path parameters by name (`id`). */
  params?: Record<string, string>;
  query?: Array<{ name: string; description: string; schema: Record<string, unknown>; required?: boolean }>;
  /** JSON request body; `required` defaults to true. */
  body?: { schema: SchemaRef; required?: boolean; description?: string };
  /**
   * A raw (non-JSON) request body instead of `body`, e.g. an audio upload: the media types it may
   * have (each answered as a binary body). Always required. The JSON-body 400 codes
   * (`invalid_json`, `parameter_*`) are not added for such a route; list its own in `errors`.
   */
  rawBody?: { mediaTypes: string[]; description?: string };
  /** Descriptions replacing the generic ones of error statuses (e.g. 413 of an upload with its own limit). */
  errorDescriptions?: Record<number, string>;
  /** The success answer(s): status → description and schema. */
  responses: Record<number, { description: string; schema?: SchemaRef; headers?: Record<string, { description: string; schema: Record<string, unknown> }> }>;
  /** Error answers beyond the standard ones the generator adds, with the `code`s they carry (src/base/errors/codes.ts). */
  errors?: Record<number, ErrorCode[]>;
  /** No key needed (the route has no guard). */
  public?: boolean;
}

/** `{ valibot: schema }` */
export const valibot = (schema: unknown): SchemaRef => ({ valibot: schema });
