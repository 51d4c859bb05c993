/**
 * What the composition root hands to the feature modules that are not API resources (listeners,
 * idempotency, OAuth, the dashboard): shared infrastructure, created once in `startServer`. A
 * feature registers its routes and background work and returns how to stop it (`Feature`). The API
 * resources are given `ApiServices` instead (src/control/api/services.ts).
 */
import type { Config, PublicUrls } from './base/config.js';
import type { Database } from './base/db/database.js';
import type { AccountsRepo } from './base/db/accounts-repo.js';
import type { StreamsRepo } from './base/db/streams-repo.js';
import type { Outbox } from './base/outbox.js';
import type { HttpServer } from './base/http/server.js';
import type { Guard } from './base/auth/guard.js';
import type { Logger } from './base/logger.js';
import type { Publishing } from './live/ingest/publishing.js';
import type { Limits } from './base/limits/limits.js';

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
  /** Live listeners of a stream: HLS sessions and WebRTC peers (docs/behaviour.md §4); 0 until the listeners feature is registered. */
  listenerCount: (streamId: string) => number;
  log: Logger;
  /** Counts and logs hits of the node's limits (docs/behaviour.md §13). */
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
