/**
 * Serving HTTP on every core (docs/scaling.md): the main thread's half of the worker threads —
 * the mirror updates (watching every hub the media registry opens), the session intake and the threads
 * themselves — put together by `startHttpThreads` for the composition root.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { MediaRegistry } from '../../live/media/registry.js';
import type { HubSource } from '../hls/source.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import type { ListenerRegistry } from '../listeners/registry.js';
import type { StreamPolicy } from '../listeners/hls-access.js';
import { SessionIntake } from '../listeners/remote.js';
import { MirrorUpdates } from './mirror-updates.js';
import { HttpThreads, type HttpWorkers } from './threads.js';
export { HttpWorkers } from './threads.js';
import type { ListenFeature } from '../progressive/main-routes.js';
import type { ThreadCounts, WorkerInit } from './protocol.js';

export type { ThreadCounts } from './protocol.js';

/**
 * A free TCP port on `host` (the kernel's pick, released at once): every thread binds it
 * explicitly, since a second socket cannot join a port the kernel picked for a first one.
 */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A private directory (mode 0700) for the main thread's unix socket, and the socket's path in it. */
export function privateSocketPath(): { socketPath: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-http-'));
  return { socketPath: path.join(dir, 'main.sock'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface HttpThreadsDeps {
  /** Threads serving HTTP, the main thread included (≥ 2 here). */
  count: number;
  host: string;
  port: number;
  socketPath: string;
  media: MediaRegistry;
  /** The main thread's HLS views (rendering into shared memory). */
  source: HubSource;
  registry: ListenerRegistry;
  policy: (streamId: string) => StreamPolicy | null;
  /** Subscribes to changes of a stream's row (a PATCH or DELETE through this process); returns the unsubscribe. The policy goes to the workers at once. */
  changes?: (fn: (streamId: string) => void) => () => void;
  /** The main thread's progressive listening (titles, node-wide caps, chunk queues). */
  listen: ListenFeature;
  log: Logger;
  limits: Pick<Limits, 'hit'>;
  /** The process's running workers (stopped before the process exits). */
  workers: HttpWorkers;
  /** What each worker starts with besides its address and the mirror snapshot. */
  init: Omit<WorkerInit, 'index' | 'host' | 'port' | 'socketPath' | 'countCell' | 'listenMemory'>;
}

/** The running worker threads, for the composition root. */
export interface RunningThreads {
  /** Each worker's request counts (thread index → counts). */
  counts(): Promise<Map<number, ThreadCounts>>;
  /** Makes worker `index` throw an uncaught exception (tests: it is logged and replaced). */
  fail(index: number): void;
  /** Stops the workers and the mirror updates; resolves once every worker ended. */
  close(): Promise<void>;
}

/** Starts the mirror updates, the intake and `count − 1` workers; resolves once every worker listens. @throws Error when one cannot */
export async function startHttpThreads(d: HttpThreadsDeps): Promise<RunningThreads> {
  // The mirror updates and the threads need each other: they post through the threads, a new thread
  // starts from the mirror updates' snapshot.
  let threads: HttpThreads | null = null;
  const updates = new MirrorUpdates({
    source: d.source,
    current: (id) => d.media.get(id),
    policy: d.policy,
    station: (id) => d.listen.station(id),
    post: (m) => threads?.post(m),
  });
  const listen = d.listen.fanout((w, m) => threads?.postTo(w, m));
  const intake = new SessionIntake(d.registry, (w, handles) => threads?.postTo(w, { t: 'forget', handles }));
  d.media.onOpen((hub) => updates.watch(hub));
  const offChanges = d.changes?.((id) => updates.policyChanged(id));
  threads = new HttpThreads({
    count: d.count,
    init: { ...d.init, host: d.host, port: d.port, socketPath: d.socketPath, countCell: d.registry.countCell.buffer as SharedArrayBuffer, listenMemory: d.listen.caps.memory },
    log: d.log,
    limits: d.limits,
    intake,
    snapshot: () => updates.snapshot(),
    listen,
    workers: d.workers,
  });
  const t = threads;
  try {
    await t.start();
  } catch (e) {
    await t.close();
    offChanges?.();
    updates.close();
    intake.close();
    throw e;
  }
  return {
    counts: () => t.counts(),
    fail: (index) => t.postTo(index, { t: 'fail' }),
    async close() {
      await t.close();
      offChanges?.();
      updates.close();
      intake.close();
    },
  };
}
