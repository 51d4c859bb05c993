/**
 * The OpenAPI registry: how a route describes itself for `GET /v2/openapi.json`. A resource either
 * passes `doc` in its route options (`http.api('get', '/v2/x', h, { ...guard.scope('x:read'), doc })`)
 * or calls `documentRoute('GET', '/v2/x', doc)` from its own module. Either way the document is built
 * from the routes the HTTP server actually registered, so a route without a doc still appears (with
 * its scope and the standard errors) and the OpenAPI test names it as undocumented.
 *
 * Schemas are valibot schemas (converted by src/api/openapi/schemas.ts) or plain JSON Schema objects
 * marked with `{ json: … }`.
 */

/** A valibot schema (opaque here: only src/api/openapi/schemas.ts converts it) or `{ json }` for literal JSON Schema. */
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
  /** Error answers beyond the standard ones the generator adds, with the `code`s they carry. */
  errors?: Record<number, string[]>;
  /** No key needed (the route has no guard). */
  public?: boolean;
}

const docs = new Map<string, RouteDoc>();

/** Describes `METHOD pattern` (pattern as registered, e.g. `/v2/streams/:id`; method as HTTP spells it). */
export function documentRoute(method: string, pattern: string, doc: RouteDoc): void {
  docs.set(`${method.toUpperCase()} ${pattern}`, doc);
}

/** The doc registered for `METHOD pattern`, if any. */
export function registeredDoc(method: string, pattern: string): RouteDoc | undefined {
  return docs.get(`${method.toUpperCase()} ${pattern}`);
}

/** `{ valibot: schema }` */
export const valibot = (schema: unknown): SchemaRef => ({ valibot: schema });
