/** OpenAPI description of `GET /v2/openapi.json` itself (./routes.ts), passed as its `doc` option. */
import type { RouteDoc } from './registry.js';

export const OPENAPI_DOCS = {
  document: {
    summary: 'This OpenAPI document',
    tags: ['meta'],
    public: true,
    responses: { 200: { description: 'The OpenAPI 3.1 document of `/v2`.', schema: { json: { type: 'object', required: ['openapi', 'paths'] } } } },
  },
} satisfies Record<string, RouteDoc>;
