/**
 * `GET /v2/openapi.json` (docs/behaviour.md §7, §9): the OpenAPI 3.1 document, built on first request from
 * every route registered by then (all of them: routes are registered before listening), then
 * cached. Needs no key and is not rate limited.
 */
import type { ApiServices } from '../services.js';
import { buildOpenApi } from './document.js';
import { OPENAPI_DOCS as DOCS } from './openapi.js';
import { rejectUnknownQuery } from '../validation.js';

/** The document takes no query parameter (any is 400 `parameter_unknown`). */
const NO_QUERY: ReadonlySet<string> = new Set();

/** Registers the document route. */
export function mountOpenApi(s: ApiServices): void {
  let cached: Record<string, unknown> | null = null;
  s.http.api(
    'get',
    '/v2/openapi.json',
    (req) => {
      rejectUnknownQuery(req.query, NO_QUERY);
      cached ??= buildOpenApi(s.http.routes(), s.urls());
      return { status: 200, body: cached };
    },
    { doc: DOCS.document },
  );
}
