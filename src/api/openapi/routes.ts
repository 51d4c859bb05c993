/**
 * `GET /v2/openapi.json` (PRODUCT.md §7, §9): the OpenAPI 3.1 document, built on first request from
 * every route registered by then (all of them: routes are registered before listening), then
 * cached. Needs no key and is not rate limited.
 */
import type { AppContext, Feature } from '../../context.js';
import { buildOpenApi } from './document.js';
import { documentRoute } from './registry.js';
import { documentStreams } from './streams.js';

/** Registers the document route (and the Streams descriptions). */
export function registerOpenApi(ctx: AppContext): Feature {
  documentStreams();
  documentRoute('GET', '/v2/openapi.json', {
    summary: 'This OpenAPI document',
    tags: ['meta'],
    public: true,
    responses: { 200: { description: 'The OpenAPI 3.1 document of `/v2`.', schema: { json: { type: 'object', required: ['openapi', 'paths'] } } } },
  });
  let cached: Record<string, unknown> | null = null;
  ctx.http.api('get', '/v2/openapi.json', () => {
    cached ??= buildOpenApi(ctx.http.routes(), ctx.urls());
    return { status: 200, body: cached };
  });
  return {};
}
