/** Installs the Idempotency-Key store on the HTTP server (every JSON POST under it). */
import type { AppContext, Feature } from '../../../context.js';
import { IdempotencyStore } from './store.js';

export function registerIdempotency(ctx: AppContext): Feature {
  ctx.http.useIdempotency(new IdempotencyStore(ctx.db, ctx.nodeSecret, ctx.now));
  return {};
}
