/**
 * The webhooks feature (issue 6): Webhooks and Events routes, and the delivery engine fed by the
 * Outbox. `registerWebhooks(context)` is called by the composition root (src/main.ts); the engine
 * starts once the server listens and stops at shutdown (abandoned attempts stay due in SQLite).
 * The services it returns are the ones other features (the dashboard) must use: their `wake`
 * reaches the engine, which does not poll.
 */
import type { AppContext, Feature } from '../context.js';
import { WebhooksRepo } from '../db/webhooks-repo.js';
import { watchCommits } from '../db/database.js';
import { EventsQuery } from '../db/events-repo.js';
import { WebhooksService } from '../services/webhooks.js';
import { EventsService } from '../services/events.js';
import { registerWebhookRoutes } from '../api/webhooks/routes.js';
import { registerEventRoutes } from '../api/events/routes.js';
import { DeliveryEngine, type EngineOptions } from './engine.js';
import { PiscinaSigner } from './signer.js';

/** Engine overrides (tests, bench). */
export type WebhooksTuning = Partial<Pick<EngineOptions, 'perEndpoint' | 'maxInFlight' | 'timeoutMs' | 'pollMs'>>;

/** The feature: engine start/close, the engine, and the services wired to it. */
export interface WebhooksFeature extends Feature {
  engine: DeliveryEngine;
  webhooks: WebhooksService;
  events: EventsService;
}

/** Registers the routes and returns the feature (engine start/close, services). */
export function registerWebhooks(ctx: AppContext, tuning: WebhooksTuning = {}): WebhooksFeature {
  const repo = new WebhooksRepo(ctx.db);
  let engine: DeliveryEngine | null = null;
  const wake = (id: string) => engine?.wake(id);
  const webhooks = new WebhooksService({ db: ctx.db, repo, outbox: ctx.outbox, nodeSecret: ctx.nodeSecret, allowPrivate: ctx.config.webhooksAllowPrivate, wake, now: ctx.now });
  const events = new EventsService({ db: ctx.db, events: new EventsQuery(ctx.db), webhooks: repo, wake, now: ctx.now });
  registerWebhookRoutes(ctx.http, webhooks, ctx.guard);
  registerEventRoutes(ctx.http, events, ctx.guard);

  const signer = new PiscinaSigner();
  engine = new DeliveryEngine({
    repo,
    signer,
    secretOf: (row) => webhooks.secretOf(row),
    log: ctx.log.child('webhooks'),
    now: ctx.now,
    allowPrivate: ctx.config.webhooksAllowPrivate,
    commits: (onCommit) => watchCommits(ctx.db, onCommit),
    ...tuning,
  });
  const e = engine;
  let unsubscribe: (() => void) | null = null;
  return {
    engine: e,
    webhooks,
    events,
    start() {
      unsubscribe = ctx.outbox.subscribe(() => e.notify());
      e.start();
    },
    async close() {
      unsubscribe?.();
      await e.close();
      await signer.close();
    },
  };
}
