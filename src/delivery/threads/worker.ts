/**
 * An HTTP worker thread (docs/scaling.md; docs/architecture.md "uWS rules" 6): its own uWS App on the node's
 * host:port (the kernel spreads connections over the threads' listen sockets, SO_REUSEPORT). It
 * serves HLS and progressive listening from its mirror of the serving state, which the main
 * thread keeps up to date (src/delivery/threads/mirror-updates.ts); it checks listener tokens and session ids itself (the node
 * secret is in `workerData`); it reports sessions to the main thread's registry in batches
 * (src/delivery/listeners/remote.ts) and counts held requests and listening connections in the node-wide
 * shared counters. Every other request is forwarded to the main thread (src/base/http/proxy.ts).
 *
 * A stop message closes the App (every connection: held requests and listeners end), sends the
 * last batch and lets the thread end. No exception escapes a uWS callback (the route kinds answer
 * 500); one that escapes anything else is logged, the App is closed and the thread ends with code
 * 1, and the main thread starts another.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { HttpServer } from '../../base/http/server.js';
import { registerHlsRoutes } from '../hls/routes.js';
import { CATCH_UP_PATTERNS } from '../catch-up/paths.js';
import { MirrorSource } from '../hls/mirror.js';
import { HlsListenerAccess, type StreamPolicy } from '../listeners/hls-access.js';
import { HeldRequests } from '../listeners/held.js';
import { RemoteSessions } from '../listeners/remote.js';
import { trustedProxies } from '../../base/http/client-address.js';
import { ListenerTokens } from '../../base/auth/listener-tokens.js';
import { MAX_LISTENERS } from '../listeners/session.js';
import { SharedAddressCounter } from '../listeners/shared-counter.js';
import { registerListenHandlers } from '../progressive/routes.js';
import { MirrorQueues } from '../progressive/shared.js';
import { Mount } from '../progressive/mount.js';
import { coalesceLoop } from '../../native/http-front.js';
import type { MirrorLayer } from '../hls/mirror.js';
import type { Logger, LogLevel } from '../../base/logger.js';
import type { LimitCause } from '../../base/limits/limits.js';
import type { FromWorker, ThreadCounts, ToWorker, WorkerInit } from './protocol.js';

const port = parentPort!;
const init = workerData as WorkerInit;
const post = (m: FromWorker) => port.postMessage(m);

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
/** A logger whose lines the main thread writes (its logger, its redaction, its sink). */
function remoteLogger(component: string): Logger {
  // Every line goes to the main thread's logger, which applies its own level.
  const min = ORDER.debug;
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < min) return;
    post({ t: 'log', level, component, msg, ...(fields ? { fields: plain(fields) } : {}) });
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (c) => remoteLogger(`${component}.${c}`),
  };
}
/** Fields as they survive a structured clone (errors and functions as text). */
const plain = (f: Record<string, unknown>): Record<string, unknown> => JSON.parse(JSON.stringify(f, (_k, v) => (v instanceof Error ? v.message : typeof v === 'function' || typeof v === 'bigint' ? String(v) : v))) as Record<string, unknown>;

const log = remoteLogger(`http-thread-${init.index}`);
const limits = { hit: (cause: LimitCause, remote: string, fields?: Record<string, unknown>) => post({ t: 'limit', cause, remote, ...(fields ? { fields: plain(fields) } : {}) }) };
const counts: ThreadCounts = { hls: 0, listen: 0, forwarded: 0 };

const nodeSecret = Buffer.from(init.nodeSecret);
const trusted = trustedProxies(init.trustedProxies);
const mirror = new MirrorSource();
const policies = new Map<string, StreamPolicy | null>();
const stations = new Map<string, ReadonlyArray<readonly [string, string]>>();
const countCell = new Int32Array(init.countCell);
const sessions = new RemoteSessions((b) => post({ t: 'sessions', b }), countCell);
const tokens = new ListenerTokens(nodeSecret);
const access = new HlsListenerAccess({ sessions, policies: { policy: (id) => policies.get(id) ?? null }, tokens, trusted, nodeSecret });
const held = new HeldRequests({ maxTotal: init.httpMaxHeld, maxPerAddress: init.httpMaxHeldPerIp, trusted, limits, memory: init.heldMemory });

const http = new HttpServer({ maxJsonBodyBytes: init.maxJsonBodyBytes, log: log.child('http'), limits });
registerHlsRoutes(http, mirror, { access, hold: held, served: counts });

// Progressive listening: mounts over the main thread's chunk queues (src/delivery/progressive/shared.ts).
const queues = new MirrorQueues((w) => post(w));
const mounts = new Map<string, Mount>();
registerListenHandlers<number>(http, {
  log: log.child('listen'),
  limits,
  caps: new SharedAddressCounter(init.listenMaxConnections, init.listenMaxConnectionsPerIp, init.listenMemory),
  trusted,
  tokens,
  policy: (id) => policies.get(id) ?? null,
  station: (id) => stations.get(id) ?? [['icy-name', '']],
  stream: (id) => {
    const s = mirror.get(id);
    return s ? { ended: s.ended, codec: s.codec, playable: s.playable, layers: () => s.layers.values() } : undefined;
  },
  mount: (id, layer) => {
    const key = `${id}\n${layer.name}`;
    let m = mounts.get(key);
    if (m?.open) return m;
    const q = queues.acquire(id, layer.name, (layer as MirrorLayer).unitMs);
    const mount: Mount = new Mount({
      streamId: id,
      queue: q,
      onDispose: () => {
        if (mounts.get(key) === mount) mounts.delete(key);
        queues.release(id, layer.name, q);
      },
    });
    m = mount;
    if (m.open) mounts.set(key, m);
    return m;
  },
  full: () => Atomics.load(countCell, 0) >= MAX_LISTENERS,
  open: (j) => sessions.open(j),
  seen: (h) => sessions.seenNow(h),
  close: (h) => sessions.close(h),
  counts,
});

// Catch-up addresses are the main thread's (they read SQLite and the disk).
http.forwardRest(init.socketPath, counts, CATCH_UP_PATTERNS);

let stopping = false;
/** Closes every connection, sends the last batch, lets the thread end. */
function stop(code: 0 | 1): void {
  if (stopping) return;
  stopping = true;
  try {
    http.close();
    for (const m of [...mounts.values()]) m.close();
    queues.close();
  } catch (e) {
    log.error('closing the HTTP server failed', { err: e instanceof Error ? e.message : String(e) });
  }
  sessions.flush();
  post({ t: 'stopped' });
  port.close();
  if (code !== 0) process.exitCode = code;
}

function onMessage(m: ToWorker): void {
  switch (m.t) {
    case 'stream':
      return mirror.apply(m.u);
    case 'drop':
      if (mirror.get(m.id)?.gen === m.gen) {
        policies.delete(m.id);
        stations.delete(m.id);
      }
      return mirror.drop(m.id, m.gen);
    case 'policy':
      policies.set(m.id, m.policy);
      stations.set(m.id, m.station);
      return;
    case 'listen':
    case 'listen-end':
      return queues.take(m);
    case 'forget':
      return sessions.forget(m.handles);
    case 'counts':
      return post({ t: 'counts', id: m.id, counts: { ...counts, http: http.replies.tally.nonZero() } });
    case 'fail':
      setTimeout(() => {
        throw new Error('a failure the main thread asked for (tests)');
      });
      return;
    case 'stop':
      return stop(0);
  }
}

port.on('message', (m: ToWorker) => {
  try {
    onMessage(m);
  } catch (e) {
    log.error('a message from the main thread failed', { type: m.t, err: e instanceof Error ? e.stack : String(e) });
  }
});

process.on('uncaughtException', (e) => {
  log.error('uncaught exception in an HTTP thread: stopping it (the main thread starts another)', { err: e instanceof Error ? e.stack : String(e) });
  stop(1);
});
process.on('unhandledRejection', (e) => {
  log.error('unhandled rejection in an HTTP thread', { err: e instanceof Error ? e.stack : String(e) });
});

http.listen(init.host, init.port).then(
  () => {
    if (init.wakeIntervalUs > 0) coalesceLoop(init.wakeIntervalUs, init.wakeMinConnections);
    post({ t: 'listening' });
  },
  (e: Error) => {
    post({ t: 'listen-failed', message: e.message });
    stop(1);
  },
);
