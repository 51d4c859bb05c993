/**
 * Builds the OpenAPI 3.1 document of `/v2` from the routes the HTTP server registered: their
 * scopes (from the Guard) and their `doc` option (a RouteDoc, src/control/api/openapi/registry.ts). Request
 * bodies are the very valibot schemas that validate requests. Every operation lists its error
 * answers with their `code`s (src/base/errors/codes.ts): the standard ones follow from what the route is (authenticated →
 * 401/403/429, path parameters → 404, a body → 400/413, POST → Idempotency-Key errors), plus the
 * route's own. A route with a raw body (`rawBody`, e.g. an audio upload) lists its media types.
 */
import type { RouteInfo } from '../../../base/http/server.js';
import type { RouteDoc, SchemaRef } from './registry.js';
import type { ErrorCode } from '../../../base/errors/errors.js';
import { AnyObject, ErrorEnvelope, jsonSchemaOf, type JsonSchema } from './schemas.js';
import { OAUTH_SCOPES } from '../../../base/auth/scopes.js';

/** The API version the document describes (spec "Versioning"). */
export const API_VERSION = '2.4.1';

/** The errors every operation of a kind answers (see `operation`), by status: a description and the codes (src/base/errors/codes.ts). */
export const STD_ERRORS: Record<number, { description: string; codes: ErrorCode[] }> = {
  400: { description: 'Invalid request', codes: ['invalid_json', 'parameter_invalid', 'param_required', 'parameter_unknown'] },
  401: { description: 'Not authenticated', codes: ['missing_token', 'invalid_token', 'token_expired', 'key_revoked'] },
  403: { description: 'The key or token lacks the scope', codes: ['insufficient_scope'] },
  404: { description: 'No such object (or not this account’s)', codes: ['resource_missing'] },
  409: { description: 'Conflict', codes: [] },
  413: { description: 'Body too large (JSON over 1 MiB)', codes: ['body_too_large'] },
  415: { description: 'Unsupported media type', codes: [] },
  429: { description: 'Rate limit exceeded; retry after `Retry-After` seconds', codes: ['rate_limit_exceeded'] },
  500: { description: 'Internal error; quote the request id', codes: ['internal_error'] },
};

const RATE_HEADERS = ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

const HEADERS: Record<string, { description: string; schema: JsonSchema }> = {
  'X-Request-ID': { description: 'The request id (`req_…`), also in `error.requestId`.', schema: { type: 'string', pattern: '^req_' } },
  'RateLimit-Policy': { description: 'draft-ietf-httpapi-ratelimit-headers: `"<plan>";q=<limit>;w=60`.', schema: { type: 'string' } },
  RateLimit: { description: 'draft-ietf-httpapi-ratelimit-headers: `"<plan>";r=<remaining>;t=<seconds until one more request is allowed>`.', schema: { type: 'string' } },
  'X-RateLimit-Limit': { description: 'Requests allowed per 60 s window.', schema: { type: 'string', pattern: '^\\d+$' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the window.', schema: { type: 'string', pattern: '^\\d+$' } },
  'X-RateLimit-Reset': { description: 'Unix time (seconds) at which one more request is allowed.', schema: { type: 'string', pattern: '^\\d+$' } },
  'Retry-After': { description: 'Seconds to wait before retrying (429 only).', schema: { type: 'string', pattern: '^\\d+$' } },
  'Idempotent-Replayed': { description: '`true` when the answer is the stored one of an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
};

function schemaOf(ref: SchemaRef | undefined): JsonSchema {
  if (!ref) return jsonSchemaOf(AnyObject);
  return 'json' in ref ? ref.json : jsonSchemaOf(ref.valibot);
}

/** `/v2/streams/:id` → `/streams/{id}` (paths are relative to the server URL `{base_url}`, which ends in `/v2`). */
export function openApiPath(pattern: string): string {
  return pattern.replace(/^\/v2/, '').replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** The document for `routes` (JSON routes under `/v2/` only). */
export function buildOpenApi(routes: readonly RouteInfo[], urls: { baseUrl: string; authUrl: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const undocumented: string[] = [];
  for (const r of routes) {
    if (r.kind !== 'api' || !r.pattern.startsWith('/v2/') || r.method === 'HEAD' || r.method === 'OPTIONS') continue;
    const doc = r.doc as RouteDoc | undefined;
    if (!doc) undocumented.push(`${r.method} ${r.pattern}`);
    const path = openApiPath(r.pattern);
    (paths[path] ??= {})[r.method.toLowerCase()] = operation(r, doc, path);
  }
  const flow = {
    authorizationUrl: `${urls.authUrl}/oauth/authorize`,
    tokenUrl: `${urls.authUrl}/oauth/token`,
    refreshUrl: `${urls.authUrl}/oauth/token`,
    scopes: OAUTH_SCOPES,
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Skylark API',
      version: API_VERSION,
      summary: 'Live audio streaming and podcast hosting.',
      description:
        'Authenticate with `Authorization: Bearer <key or OAuth access token>`. Every answer carries `X-Request-ID`; authenticated answers carry the rate-limit headers. POST requests accept `Idempotency-Key` (kept 24 h).',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: urls.baseUrl }],
    security: [{ ApiKey: [] }, { OAuth2: [] }],
    paths,
    components: {
      schemas: { Error: jsonSchemaOf(ErrorEnvelope) },
      headers: Object.fromEntries(Object.entries(HEADERS).map(([k, h]) => [k, { description: h.description, schema: h.schema }])),
      securitySchemes: {
        ApiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'A secret key (`svc_sk_…`, full access) or a publishable key (`svc_pk_…`: GET on streams and podcasts, listener tokens).',
        },
        OAuth2: { type: 'oauth2', description: 'OAuth 2.0 authorization code flow with PKCE; access tokens are JWTs living 3600 s.', flows: { authorizationCode: flow } },
      },
    },
    ...(undocumented.length ? { 'x-undocumented-routes': undocumented } : {}),
  };
}

/** The OpenAPI operation object of route `r` at OpenAPI path `path` (its parameters, answers, errors and body). */
function operation(r: RouteInfo, doc: RouteDoc | undefined, path: string): Record<string, unknown> {
  const isPublic = doc?.public === true && !r.scope;
  const pathParams = [...path.matchAll(/\{([A-Za-z0-9_]+)\}/g)].map((m) => m[1]!);
  const rawBody = doc?.rawBody;
  const hasBody = rawBody !== undefined || doc?.body !== undefined || r.method === 'POST' || r.method === 'PATCH' || r.method === 'PUT';
  const parameters = parametersOf(r, doc, pathParams);
  const responses = successResponses(r, doc, isPublic);
  errorResponses(responses, errorCodes(r, doc, { isPublic, hasBody, pathParams: pathParams.length > 0 }), doc, isPublic);
  const op: Record<string, unknown> = {
    operationId: doc?.operationId ?? operationId(r.method, path),
    summary: doc?.summary ?? `${r.method} ${path}`,
    tags: doc?.tags ?? [path.split('/')[1] ?? 'api'],
    ...(doc?.description ? { description: doc.description } : {}),
    ...(doc?.deprecated ? { deprecated: true } : {}),
    security: isPublic ? [] : [{ ApiKey: [] }, { OAuth2: r.scope && r.scope in OAUTH_SCOPES ? [r.scope] : r.scope === 'listener_tokens:write' ? ['streams:read'] : [] }],
    ...(r.scope ? { 'x-scope': r.scope } : {}),
    ...(parameters.length ? { parameters } : {}),
    responses,
  };
  if (rawBody) {
    op.requestBody = {
      required: true,
      ...(rawBody.description ? { description: rawBody.description } : {}),
      // OpenAPI 3.1 §4.8.14.4: a binary body is a media type without a schema.
      content: Object.fromEntries(rawBody.mediaTypes.map((t) => [t, {}])),
    };
  } else if (hasBody) {
    op.requestBody = {
      required: doc?.body?.required ?? (r.method === 'POST' && doc?.body !== undefined),
      ...(doc?.body?.description ? { description: doc.body.description } : {}),
      content: { 'application/json': { schema: doc?.body ? schemaOf(doc.body.schema) : { type: 'object' } } },
    };
  }
  return op;
}

/** The operation's parameters: its path parameters, the query parameters it lists, `Idempotency-Key` on a POST. */
function parametersOf(r: RouteInfo, doc: RouteDoc | undefined, pathParams: string[]): unknown[] {
  const parameters: unknown[] = pathParams.map((name) => ({ name, in: 'path', required: true, description: doc?.params?.[name] ?? `The object's id.`, schema: { type: 'string' } }));
  for (const q of doc?.query ?? []) parameters.push({ name: q.name, in: 'query', required: q.required ?? false, description: q.description, schema: q.schema });
  if (r.method === 'POST') {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: 'Makes the request safe to retry for 24 h: a retry with the same key and body gets the stored answer (with `Idempotent-Replayed: true`).',
      schema: { type: 'string', maxLength: 255 },
    });
  }
  return parameters;
}

/** References to `X-Request-ID` and, `withRate`, the rate-limit headers. */
const standardHeaders = (withRate: boolean) => Object.fromEntries(['X-Request-ID', ...(withRate ? RATE_HEADERS : [])].map((h) => [h, { $ref: `#/components/headers/${h}` }]));

/** The answers the route documents (a bare 200 when it documents none), by status. */
function successResponses(r: RouteInfo, doc: RouteDoc | undefined, isPublic: boolean): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, res] of Object.entries(doc?.responses ?? { 200: { description: 'Success (this route has no description yet).' } })) {
    responses[status] = {
      description: res.description,
      headers: { ...standardHeaders(!isPublic), ...(r.method === 'POST' ? { 'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' } } : {}), ...res.headers },
      content: { 'application/json': { schema: schemaOf(res.schema) } },
    };
  }
  return responses;
}

/** The error codes the route may answer, by status: the standard ones of what the route is (see `STD_ERRORS`), then its own. */
function errorCodes(r: RouteInfo, doc: RouteDoc | undefined, o: { isPublic: boolean; hasBody: boolean; pathParams: boolean }): Record<number, Set<ErrorCode>> {
  const hasQuery = (doc?.query?.length ?? 0) > 0;
  const errors: Record<number, Set<ErrorCode>> = {};
  const add = (status: number, codes: ErrorCode[]) => {
    const set = (errors[status] ??= new Set());
    for (const c of codes) set.add(c);
  };
  if (!o.isPublic) {
    add(401, STD_ERRORS[401]!.codes);
    add(403, STD_ERRORS[403]!.codes);
    add(429, STD_ERRORS[429]!.codes);
  }
  const jsonBody = o.hasBody && !doc?.rawBody;
  if (o.hasBody || hasQuery || r.method === 'POST') add(400, jsonBody || hasQuery ? STD_ERRORS[400]!.codes : []);
  add(400, ['parameter_unknown']); // any route refuses a query parameter it does not list
  if (o.hasBody) add(413, STD_ERRORS[413]!.codes);
  if (o.pathParams) add(404, STD_ERRORS[404]!.codes);
  if (r.method === 'POST') {
    add(400, ['idempotency_key_reused', 'idempotency_key_invalid']);
    add(409, ['idempotency_key_in_use']);
  }
  add(500, STD_ERRORS[500]!.codes);
  for (const [s, codes] of Object.entries(doc?.errors ?? {})) add(Number(s), codes);
  return errors;
}

/** Adds to `responses` one error answer per status of `errors` (the `Error` envelope, its codes listed). */
function errorResponses(responses: Record<string, unknown>, errors: Record<number, Set<ErrorCode>>, doc: RouteDoc | undefined, isPublic: boolean): void {
  for (const [s, codes] of Object.entries(errors)) {
    const status = Number(s);
    responses[s] = {
      description: `${doc?.errorDescriptions?.[status] ?? STD_ERRORS[status]?.description ?? 'Error'}. \`error.code\`: ${[...codes].map((c) => `\`${c}\``).join(', ') || 'see the message'}.`,
      headers: {
        ...standardHeaders(!isPublic && status !== 401),
        ...(status === 429 ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
        ...(status === 401 || status === 403 ? { 'WWW-Authenticate': { description: 'RFC 6750 §3 challenge, e.g. `Bearer error="insufficient_scope", scope="streams:write"`.', schema: { type: 'string' } } } : {}),
      },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
}

/** `POST /streams/{id}/reset_stream_key` → `postStreamsIdResetStreamKey`. */
function operationId(method: string, path: string): string {
  const words = path
    .split(/[/{}_]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1));
  return method.toLowerCase() + words.join('');
}
