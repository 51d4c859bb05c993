/**
 * Listeners (PRODUCT.md §3–§4, §13): listener sessions of every protocol (the registry), listener
 * tokens, who may play a stream (token-gated playback, session ids), the held-request caps, and
 * the listener/stats/token service the API serves. The delivery rooms (hls/, webrtc/) and the API
 * are given these by the composition root; this room imports none of them.
 */
import type { BlockList } from 'node:net';
import type { AppContext, Feature } from '../context.js';
import { ListenersRepo } from '../db/listeners-repo.js';
import { ListenerTokens } from '../auth/listener-tokens.js';
import { ListenerRegistry } from './registry.js';
import { HlsListenerAccess } from './hls-access.js';
import { ListenersService } from './service.js';
import { trustedProxies } from './geo.js';
import { HeldRequests } from './held.js';

/** The listeners room, built: what the delivery rooms and the API are given. */
export interface Listeners extends Feature {
  registry: ListenerRegistry;
  tokens: ListenerTokens;
  access: HlsListenerAccess;
  held: HeldRequests;
  service: ListenersService;
  /** `SKYLARK_TRUSTED_PROXIES` as a matcher. */
  trusted: BlockList;
}

/** Builds the listeners room; it recovers open sessions at start and closes them at shutdown. */
export function createListeners(ctx: AppContext): Listeners {
  const registry = new ListenerRegistry({ db: ctx.db, repo: new ListenersRepo(ctx.db), outbox: ctx.outbox, log: ctx.log.child('listeners'), now: ctx.now });
  const tokens = new ListenerTokens(ctx.nodeSecret, ctx.now);
  const trusted = trustedProxies(ctx.config.trustedProxies);
  const access = new HlsListenerAccess({ registry, tokens, streams: ctx.streams, trusted, nodeSecret: ctx.nodeSecret, now: ctx.now });
  const held = new HeldRequests({ maxTotal: ctx.config.limits.httpMaxHeld, maxPerAddress: ctx.config.limits.httpMaxHeldPerIp, trusted, limits: ctx.limits });
  return {
    registry,
    tokens,
    access,
    held,
    trusted,
    service: new ListenersService(registry, ctx.streams, tokens),
    start() {
      registry.recover();
    },
    close() {
      registry.close();
    },
  };
}
