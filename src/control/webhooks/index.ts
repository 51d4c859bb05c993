/**
 * Webhook dispatch (docs/behaviour.md §6): the dispatcher that reads the outbox's pending deliveries from
 * SQLite, signs each in Piscina workers and POSTs it, on the exact retry schedule. Built by the
 * composition root (src/main.ts) with the secrets' decryption handed in; it starts once the server
 * listens and stops at shutdown (abandoned attempts stay due in SQLite). Knows no services and
 * mounts no routes: the Webhooks and Events resources are the API's (src/control/api/webhooks,
 * src/control/api/events), and what they change reaches the engine through `wake`/`notify`.
 */
import type { Feature } from '../../base/background.js';
import type { Database } from '../../base/db/database.js';
import type { Outbox } from '../../base/outbox.js';
import type { Logger } from '../../base/logger.js';
import type { WebhookRow, WebhooksRepo } from '../../base/db/webhooks-repo.js';
import { watchCommits } from '../../base/db/database.js';
import { Dispatcher, type EngineOptions, type InternalDestination } from './dispatch.js';
import { PiscinaSigner } from './signer.js';

/** Engine overrides (tests, bench). */
export type WebhooksTuning = Partial<Pick<EngineOptions, 'perEndpoint' | 'maxInFlight' | 'timeoutMs' | 'pollMs'>>;

/** What the dispatcher is built from. */
export interface DispatchDeps {
  db: Database;
  repo: WebhooksRepo;
  outbox: Outbox;
  log: Logger;
  now: () => number;
  /** Loopback and private destinations allowed (SKYLARK_WEBHOOKS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The endpoint's signing secret (`whsec_…`), decrypted. */
  secretOf: (row: WebhookRow) => string;
  tuning?: WebhooksTuning;
  /** Lanes that are not webhook endpoints: the feed-update notifications (./feed-notify.ts). */
  internal?: InternalDestination[];
}

/** The started engine (start: after listening; close: at shutdown). */
export interface WebhookDispatch extends Feature {
  engine: Dispatcher;
}

/** Builds the dispatcher and its signer; it listens to the outbox from `start()`. */
export function createDispatch(d: DispatchDeps): WebhookDispatch {
  const signer = new PiscinaSigner();
  const engine = new Dispatcher({
    repo: d.repo,
    signer,
    secretOf: d.secretOf,
    log: d.log,
    now: d.now,
    allowPrivate: d.allowPrivate,
    commits: (onCommit) => watchCommits(d.db, onCommit),
    internal: d.internal ?? [],
    ...d.tuning,
  });
  let unsubscribe: (() => void) | null = null;
  return {
    engine,
    start() {
      unsubscribe = d.outbox.subscribe(() => engine.notify());
      engine.start();
    },
    async close() {
      unsubscribe?.();
      await engine.close();
      await signer.close();
    },
  };
}
