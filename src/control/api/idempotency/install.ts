/** Installs the Idempotency-Key store on the HTTP server (every JSON POST under it). */
import type { Feature } from '../../../base/background.js';
import type { HttpServer } from '../../../base/http/server.js';
import { IdempotencyStore } from './store.js';

/** What the Idempotency-Key store is built from. */
export interface IdempotencyDeps {
  http: HttpServer;
  /** The database stored answers live in (the store keeps its own statements). */
  db: ConstructorParameters<typeof IdempotencyStore>[0];
  /** The node secret (32 bytes): stored answers are encrypted under it. */
  nodeSecret: Buffer;
  now: () => number;
}

/** Installs the store on `d.http`; nothing to start or stop. */
export function registerIdempotency(d: IdempotencyDeps): Feature {
  d.http.useIdempotency(new IdempotencyStore(d.db, d.nodeSecret, d.now));
  return {};
}
