/**
 * Listeners (docs/behaviour.md §3–§4, §13): listener sessions of every protocol (the registry), listener
 * tokens, who may play a stream (token-gated playback, session ids), the held-request caps, and
 * the listener/stats/token service the API serves, and the edge log receiver (docs/behaviour.md §12).
 * The delivery rooms (hls/, webrtc/) and the API are given these by the composition root; this
 * room imports none of them.
 */
import type { BlockList } from 'node:net';
import type { AppContext, Feature } from '../../context.js';
import { ListenersRepo } from '../../base/db/listeners-repo.js';
import { ListenerTokens } from '../../base/auth/listener-tokens.js';
import { ListenerRegistry } from './registry.js';
import { CachedPolicies, HlsListenerAccess, registrySessions } from './hls-access.js';
import { ListenersService } from './service.js';
import { trustedProxies } from './geo.js';
import { HeldRequests } from './held.js';
import { EdgeLogReceiver, edgeLogSecretOf } from './edge-log.js';

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
  const registry = new ListenerRegistry({
    db: ctx.db,
    repo: new ListenersRepo(ctx.db),
    outbox: ctx.outbox,
    log: ctx.log.child('listeners'),
    now: ctx.now,
    hlsSessionsPerIpPerMinute: ctx.config.limits.hlsSessionsPerIpPerMinute,
    limits: ctx.limits,
  });
  const tokens = new ListenerTokens(ctx.nodeSecret, ctx.now);
  const trusted = trustedProxies(ctx.config.trustedProxies);
  const access = new HlsListenerAccess({ sessions: registrySessions(registry), policies: new CachedPolicies(ctx.streams, ctx.now), tokens, trusted, nodeSecret: ctx.nodeSecret });
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

/**
 * The edge log receiver (docs/behaviour.md §12) when `SKYLARK_EDGE_LOG_HOST`/`SKYLARK_EDGE_LOG_PORT` turn
 * it on, else null. `layerTimeoutMs`: a listener's timeout on a served layer (null: no such layer).
 * `listen()` binds it (the composition root, with the other listeners); `close()` stops it.
 */
export function createEdgeLog(ctx: AppContext, listeners: Listeners, layerTimeoutMs: (streamId: string, layer: string) => number | null): EdgeLogReceiver | null {
  if (ctx.config.edgeLogHost === undefined || ctx.config.edgeLogPort === undefined) return null;
  if (ctx.config.trustedProxies.length === 0) {
    ctx.log.warn('the edge log receiver is on but SKYLARK_TRUSTED_PROXIES is empty: every line will be dropped; list the edges there', { setting: 'SKYLARK_TRUSTED_PROXIES' });
  }
  return new EdgeLogReceiver({
    registry: listeners.registry,
    access: listeners.access,
    trusted: listeners.trusted,
    secret: ctx.config.edgeLogSecret ?? edgeLogSecretOf(ctx.nodeSecret),
    limits: ctx.limits,
    log: ctx.log.child('edge-log'),
    layerTimeoutMs,
    now: ctx.now,
  });
}
