/**
 * The messages between the main thread and its HTTP worker threads (docs/scaling.md). Everything
 * here crosses `postMessage` (structured clone); byte payloads are views of SharedArrayBuffers,
 * shared rather than copied.
 */
import type { MirrorMessage } from './mirror-updates.js';
import type { SessionBatch } from '../listeners/remote.js';
import type { LimitCause } from '../../base/limits/limits.js';
import type { LogLevel } from '../../base/logger.js';
import type { ListenMessage, ListenWant } from '../progressive/shared.js';

/** What a worker thread starts with (`workerData`). */
export interface WorkerInit {
  /** 1, 2, … (the main thread is 0). */
  index: number;
  host: string;
  port: number;
  /** The main thread's private unix socket (forwarded requests). */
  socketPath: string;
  /** The node secret (listener tokens, session id tags). */
  nodeSecret: Uint8Array;
  trustedProxies: string[];
  maxJsonBodyBytes: number;
  logLevel: LogLevel;
  /** The node-wide held-request counts (src/delivery/listeners/shared-counter.ts). */
  heldMemory: SharedArrayBuffer;
  httpMaxHeld: number;
  httpMaxHeldPerIp: number;
  /** The node-wide progressive listening connection counts. */
  listenMemory: SharedArrayBuffer;
  listenMaxConnections: number;
  listenMaxConnectionsPerIp: number;
  /** The registry's listener count (`ListenerRegistry.countCell`). */
  countCell: SharedArrayBuffer;
  /** The thread's loop waits at most once per this many µs while busy (docs/http.md "Fewer wake-ups under load"; 0 = off). */
  wakeIntervalUs: number;
  /** …while at least this many HTTP connections are open. */
  wakeMinConnections: number;
}

/** Per-thread request counts (tests: which thread served). */
export interface ThreadCounts {
  /** HLS requests answered here. */
  hls: number;
  /** Progressive listening requests answered here. */
  listen: number;
  /** Requests forwarded to the main thread. */
  forwarded: number;
  /** Answers by route class and status (src/base/http/tally.ts `HttpTally.nonZero`): a worker's, sent with its counts. */
  http?: Array<[number, number]>;
}

/** Main thread → worker. */
export type ToWorker =
  | MirrorMessage
  | ListenMessage
  | { t: 'forget'; handles: Int32Array }
  | { t: 'counts'; id: number }
  /** Throw an uncaught exception (tests: a crashed worker is logged and replaced). */
  | { t: 'fail' }
  | { t: 'stop' };

/** Worker → main thread. */
export type FromWorker =
  | { t: 'listening' }
  | { t: 'listen-failed'; message: string }
  | { t: 'sessions'; b: SessionBatch }
  | { t: 'log'; level: LogLevel; component: string; msg: string; fields?: Record<string, unknown> }
  | { t: 'limit'; cause: LimitCause; remote: string; fields?: Record<string, unknown> }
  | { t: 'counts'; id: number; counts: ThreadCounts }
  | ListenWant
  | { t: 'stopped' };
