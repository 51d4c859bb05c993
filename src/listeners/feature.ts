/**
 * The listeners feature (issue 4, PRODUCT.md §3–§4): listener sessions (HLS and WebRTC), the HLS
 * routes with session ids, token-gated playback and the held-request caps, WHEP with its
 * pending-offer caps (§13), the listener/stats/token endpoints, and the live `listenerCount` of
 * streams. Registered from the composition root.
 */
import type { AppContext, Feature } from '../context.js';
import type { MediaRegistry } from '../media/hub.js';
import { ListenersRepo } from '../db/listeners-repo.js';
import { ListenerTokens } from '../auth/listener-tokens.js';
import { registerHlsRoutes } from '../hls/routes.js';
import { registerListenerRoutes } from '../api/listeners/routes.js';
import { registerWhep } from '../webrtc/whep.js';
import { ListenerRegistry } from './registry.js';
import { HlsListenerAccess } from './hls-access.js';
import { ListenersService } from './service.js';
import { trustedProxies } from './geo.js';
import { HeldRequests } from './held.js';

/** What the feature needs beyond the shared context. */
export interface ListenersOptions {
  media: MediaRegistry;
}

/** Registers HLS, WHEP and the listener endpoints; the feature recovers open sessions at start. */
export function registerListeners(ctx: AppContext, opts: ListenersOptions): Feature & { registry: ListenerRegistry } {
  const registry = new ListenerRegistry({ db: ctx.db, repo: new ListenersRepo(ctx.db), outbox: ctx.outbox, log: ctx.log.child('listeners'), now: ctx.now });
  const tokens = new ListenerTokens(ctx.nodeSecret, ctx.now);
  const trusted = trustedProxies(ctx.config.trustedProxies);
  const access = new HlsListenerAccess({ registry, tokens, streams: ctx.streams, trusted, nodeSecret: ctx.nodeSecret, now: ctx.now });
  const held = new HeldRequests({ maxTotal: ctx.config.limits.httpMaxHeld, maxPerAddress: ctx.config.limits.httpMaxHeldPerIp, trusted, limits: ctx.limits });
  registerHlsRoutes(ctx.http, opts.media, { access, hold: held });
  const whep = registerWhep({ http: ctx.http, media: opts.media, registry, tokens, access, trusted, config: ctx.config, log: ctx.log.child('webrtc'), urls: ctx.urls, limits: ctx.limits });
  registerListenerRoutes(ctx.http, new ListenersService(registry, ctx.streams, tokens), ctx.guard, ctx.urls);
  return {
    registry,
    start() {
      registry.recover();
    },
    async close() {
      await whep.close();
      registry.close();
    },
  };
}
