/**
 * The API (`/v2`, spec and docs/behaviour.md §9): every resource is a folder `src/control/api/<resource>/` with
 * `routes.ts` (one function `(s: ApiServices) => void` that registers its routes through
 * `resourceRoutes` (./resource.ts): each with the resource's read or write scope and its OpenAPI
 * description; list routes answer the list envelope of ./lists.ts), `schemas.ts` (the valibot
 * schemas of its requests and answers) and `openapi.ts` (its `RouteDoc`s, passed as the routes'
 * `doc` option). Errors are ApiErrors with a code of src/base/errors/codes.ts. `mountApi` registers every
 * resource from the one list below; the composition root (src/app/control.ts) builds the services
 * (./services.ts) and calls it once, before `http.finish()`.
 */
import type { ApiServices } from './services.js';
import { mountStreams } from './streams/routes.js';
import { mountListeners } from './listeners/routes.js';
import { mountAccount } from './account/routes.js';
import { mountOpenApi } from './openapi/routes.js';
import { mountPodcasts } from './podcasts/routes.js';
import { mountPodcastStats } from './podcast-stats/routes.js';
import { mountWebhooks } from './webhooks/routes.js';
import { mountEvents } from './events/routes.js';

export type { ApiServices, UploadSettings } from './services.js';

/** Every resource, in the order its routes are registered (and listed in the OpenAPI document). */
const RESOURCES: ReadonlyArray<(s: ApiServices) => void> = [mountStreams, mountListeners, mountAccount, mountOpenApi, mountPodcasts, mountPodcastStats, mountWebhooks, mountEvents];

/** Registers every `/v2` route on `s.http`. */
export function mountApi(s: ApiServices): void {
  for (const mount of RESOURCES) mount(s);
}
