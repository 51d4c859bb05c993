/**
 * What the composition root hands to the feature modules that are not API resources (listeners,
 * idempotency, OAuth, the dashboard): shared infrastructure, created once in `startServer`. A
 * feature registers its routes and background work and returns how to stop it (`Feature`). The API
 * resources are given `ApiServices` instead (src/api/services.ts).
 */
import type { Config, PublicUrls } from './config/config.js';
import type { Database } from './db/database.js';
import type { AccountsRepo } from './db/accounts-repo.js';
import type { StreamsRepo } from './db/streams-repo.js';
import type { Outbox } from './events/outbox.js';
import type { HttpServer } from './http/server.js';
import type { Guard } from './auth/guard.js';
import type { Logger } from './log/logger.js';
import type { Publishing } from './ingest/publishing.js';
import type { Limits } from './limits/limits.js';

export interface AppContext {
  config: Config;
  db: Database;
  /** The node secret (32 bytes) from `<dataDir>/secret.key`. */
  nodeSecret: Buffer;
  accounts: AccountsRepo;
  streams: StreamsRepo;
  outbox: Outbox;
  http: HttpServer;
  guard: Guard;
  /** Publishers and the live state machine (ingest). */
  ingest: Publishing;
  /** Live listeners of a stream: HLS sessions and WebRTC peers (PRODUCT.md §4); 0 until the listeners feature is registered. */
  listenerCount: (streamId: string) => number;
  log: Logger;
  /** Counts and logs hits of the node's limits (PRODUCT.md §13). */
  limits: Limits;
  /** Public URLs; known once listening (throws before). */
  urls: () => PublicUrls;
  now: () => number;
}

/**
 * Background work the composition root starts and stops (the listeners room, the publication
 * scheduler, webhook delivery, …): `start` runs after listening (URLs known), in order; `close` at
 * shutdown, in reverse order.
 */
export interface Feature {
  start?(): void | Promise<void>;
  close?(): void | Promise<void>;
}
