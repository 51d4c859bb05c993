/**
 * Listeners (docs/behaviour.md §3–§4, §13): listener sessions of every protocol (the registry), listener
 * tokens, who may play a stream (token-gated playback, session ids), the held-request caps, and
 * the listener/stats/token service the API serves, and the edge log receiver (docs/behaviour.md §12).
 * The delivery rooms (hls/, webrtc/) and the API are given these by the composition root; this
 * room imports none of them.
 */
import type { BlockList } from 'node:net';
import type { Feature } from '../../base/background.js';
import type { Config } from '../../base/config.js';
import type { Database } from '../../base/db/database.js';
import type { StreamsRepo } from '../../base/db/streams-repo.js';
import type { Outbox } from '../../base/outbox.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import type { ListenersRepo } from '../../base/db/listeners-repo.js';
import { ListenerTokens } from '../../base/auth/listener-tokens.js';
import { ListenerRegistry } from './registry.js';
import { CachedPolicies, HlsListenerAccess, registrySessions } from './hls-access.js';
import { trustedProxies } from '../../base/http/client-address.js';
import { HeldRequests } from './held.js';
import { EdgeLogReceiver, edgeLogSecretOf } from './edge-log.js';

/** What the listeners room is built from (given by the composition root, src/app/delivery.ts). */
export interface ListenersDeps {
  config: Pick<Config, 'limits' | 'trustedProxies'>;
  db: Database;
  /** Listener sessions as stored. */
  repo: ListenersRepo;
  /** Streams' playback policies (who may listen). */
  streams: StreamsRepo;
  outbox: Outbox;
  /** The node secret (32 bytes): listener tokens and session ids. */
  nodeSecret: Buffer;
  log: Logger;
  limits: Limits;
  now: () => number;
}

/**
 * The listeners room, built: what the delivery rooms are given; the control plane is given
 * `registry` and `tokens` as its `ListenersRoom` (src/control/services/listeners.ts) by the composition root.
 */
export interface Listeners extends Feature {
  registry: ListenerRegistry;
  tokens: ListenerTokens;
  access: HlsListenerAccess;
  held: HeldRequests;
  /** `SKYLARK_TRUSTED_PROXIES` as a matcher. */
  trusted: BlockList;
}

/** Builds the listeners room; it recovers open sessions at start and closes them at shutdown. */
export function createListeners(d: ListenersDeps): Listeners {
  const registry = new ListenerRegistry({
    db: d.db,
    repo: d.repo,
    outbox: d.outbox,
    log: d.log.child('listeners'),
    now: d.now,
    hlsSessionsPerIpPerMinute: d.config.limits.hlsSessionsPerIpPerMinute,
    limits: d.limits,
  });
  const tokens = new ListenerTokens(d.nodeSecret, d.now);
  const trusted = trustedProxies(d.config.trustedProxies);
  const access = new HlsListenerAccess({ sessions: registrySessions(registry), policies: new CachedPolicies(d.streams, d.now), tokens, trusted, nodeSecret: d.nodeSecret, now: d.now });
  const held = new HeldRequests({ maxTotal: d.config.limits.httpMaxHeld, maxPerAddress: d.config.limits.httpMaxHeldPerIp, trusted, limits: d.limits });
  return {
    registry,
    tokens,
    access,
    held,
    trusted,
    start() {
      registry.recover();
    },
    close() {
      registry.close();
    },
  };
}

/** What the edge log receiver is built from. */
export interface EdgeLogDeps {
  config: Pick<Config, 'edgeLogHost' | 'edgeLogPort' | 'edgeLogSecret' | 'trustedProxies'>;
  /** The node secret: the default edge log secret is derived from it. */
  nodeSecret: Buffer;
  limits: Limits;
  log: Logger;
  now: () => number;
}

/**
 * The edge log receiver (docs/behaviour.md §12) when `SKYLARK_EDGE_LOG_HOST`/`SKYLARK_EDGE_LOG_PORT` turn
 * it on, else null. `layerTimeoutMs`: a listener's timeout on a served layer (null: no such layer).
 * `listen()` binds it (the composition root, with the other listeners); `close()` stops it.
 */
export function createEdgeLog(d: EdgeLogDeps, listeners: Listeners, layerTimeoutMs: (streamId: string, layer: string) => number | null): EdgeLogReceiver | null {
  if (d.config.edgeLogHost === undefined || d.config.edgeLogPort === undefined) return null;
  if (d.config.trustedProxies.length === 0) {
    d.log.warn('the edge log receiver is on but SKYLARK_TRUSTED_PROXIES is empty: every line will be dropped; list the edges there', { setting: 'SKYLARK_TRUSTED_PROXIES' });
  }
  return new EdgeLogReceiver({
    registry: listeners.registry,
    access: listeners.access,
    trusted: listeners.trusted,
    secret: d.config.edgeLogSecret ?? edgeLogSecretOf(d.nodeSecret),
    limits: d.limits,
    log: d.log.child('edge-log'),
    layerTimeoutMs,
    now: d.now,
  });
}
