/**
 * The main thread's HTTP worker threads (`SKYLARK_HTTP_THREADS`, docs/scaling.md): it starts
 * `count − 1` workers (src/delivery/threads/worker.ts), each listening on the node's host:port beside the
 * main thread's App, sends them the serving state (src/delivery/threads/mirror-updates.ts), takes their session
 * batches (src/delivery/listeners/remote.ts), their log lines and limit hits, and answers nothing itself.
 *
 * - Start: every worker must be listening before `start` resolves (a refused bind fails the start).
 * - A worker that ends without being asked (a crash) is logged, its progressive listeners leave,
 *   and another is started after a pause (1 s, doubling up to 30 s while they keep failing), with
 *   a snapshot of the state.
 * - Stop (`close`): each worker closes its App (every connection), sends its last batch and ends;
 *   `close` resolves once all have ended. A worker is never terminated from outside: an ended
 *   thread with a uWS App still open takes the process down (uv_loop_close with open handles).
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import type { SessionIntake } from '../listeners/remote.js';
import type { MirrorMessage } from './mirror-updates.js';
import type { ListenFanout } from '../progressive/shared.js';
import type { FromWorker, ThreadCounts, ToWorker, WorkerInit } from './protocol.js';

export interface HttpThreadsOptions {
  /** Threads serving HTTP, the main thread included (so `count − 1` workers). */
  count: number;
  /** What every worker starts with, but its index. */
  init: Omit<WorkerInit, 'index'>;
  log: Logger;
  limits: Pick<Limits, 'hit'>;
  intake: SessionIntake;
  /** The messages a new worker starts from (the mirror updates' snapshot). */
  snapshot: () => MirrorMessage[];
  /** Progressive listening's chunk queues (src/delivery/progressive/shared.ts). */
  listen: ListenFanout;
  /** The process's running workers (`HttpWorkers`), which the process stops before it exits. */
  workers: HttpWorkers;
}

interface Slot {
  index: number;
  worker: Worker | null;
  /** A restart is waiting. */
  timer: NodeJS.Timeout | null;
  failures: number;
  /** When it was started (ms): a worker that ran a minute resets the backoff. */
  startedAt: number;
}

/** A worker's young generation when it is kept small: two 1 MB semi-spaces and V8's share for large objects (V8 counts 3 × a semi-space). */
export const SMALL_YOUNG_GENERATION_MB = 3;

/**
 * A worker's V8 limits: with `SKYLARK_YOUNG_GENERATION=small` (the default; bin/skylark.js leaves
 * the choice in the environment, src/base/config.ts validates it) its young generation stays at
 * SMALL_YOUNG_GENERATION_MB like the main thread's, instead of growing to V8's 48 MB under many
 * long-lived connections (docs/benchmarks.md "Where a listener's memory goes"); `v8`: V8's defaults.
 */
function workerLimits(): { maxYoungGenerationSizeMb?: number } {
  return process.env.SKYLARK_YOUNG_GENERATION === 'v8' ? {} : { maxYoungGenerationSizeMb: SMALL_YOUNG_GENERATION_MB };
}

/**
 * The HTTP worker threads of a process that have not ended, whichever server started them: the
 * process must not end while a worker's uWS App is open (Node aborts then, "uv_loop_close() while
 * having open handles"). The composition root makes one per process and gives it to every server.
 */
export class HttpWorkers {
  private readonly running = new Map<Worker, Promise<void>>();

  /** A worker started; `exit` resolves when it ends. */
  add(w: Worker, exit: Promise<void>): void {
    this.running.set(w, exit);
  }

  /** A worker ended. */
  delete(w: Worker): void {
    this.running.delete(w);
  }

  /**
   * Asks every worker to stop and waits up to `timeoutMs` (ms) for them to end; true when none is
   * left. For the exits that cannot wait for a graceful stop (a second signal, the stop's deadline).
   */
  async stopAll(timeoutMs: number): Promise<boolean> {
    if (this.running.size === 0) return true;
    for (const w of this.running.keys()) w.postMessage({ t: 'stop' } satisfies ToWorker);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.running.values()), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
    return this.running.size === 0;
  }
}

const RESTART_MIN_MS = 1000;
const RESTART_MAX_MS = 30_000;

/**
 * The worker script: the compiled one next to this file; when this file runs as TypeScript (the
 * tests, `tsx`), a bootstrap that registers tsx's loader in the new thread, then imports the
 * TypeScript source (a worker does not inherit its parent's loader hooks).
 */
function workerScript(): URL {
  if (!fileURLToPath(import.meta.url).endsWith('.ts')) return new URL('./worker.js', import.meta.url);
  const api = createRequire(import.meta.url).resolve('tsx/esm/api').replace(/index\.cjs$/, 'index.mjs');
  const code = `import { register } from ${JSON.stringify(pathToFileURL(api).href)}; register(); await import(${JSON.stringify(new URL('./worker.ts', import.meta.url).href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

export class HttpThreads {
  private readonly slots: Slot[] = [];
  private closing = false;
  private nextQuery = 1;
  private readonly queries = new Map<number, (c: ThreadCounts) => void>();
  private readonly exits = new Set<Promise<void>>();

  constructor(private readonly o: HttpThreadsOptions) {
    for (let i = 1; i < o.count; i++) this.slots.push({ index: i, worker: null, timer: null, failures: 0, startedAt: 0 });
  }

  /** Starts every worker; resolves once all listen. @throws Error when one cannot listen */
  async start(): Promise<void> {
    await Promise.all(this.slots.map((s) => this.spawn(s)));
  }

  /** Posts `m` to every running worker. */
  post(m: ToWorker): void {
    for (const s of this.slots) if (s.worker) s.worker.postMessage(m);
  }

  /** Posts `m` to worker `index`. */
  postTo(index: number, m: ToWorker): void {
    this.slots.find((s) => s.index === index)?.worker?.postMessage(m);
  }

  /** Each running worker's request counts (thread index → counts). */
  async counts(): Promise<Map<number, ThreadCounts>> {
    const out = new Map<number, ThreadCounts>();
    await Promise.all(
      this.slots.map(
        (s) =>
          new Promise<void>((resolve) => {
            const w = s.worker;
            if (!w) return resolve();
            const id = this.nextQuery++;
            const timer = setTimeout(() => {
              this.queries.delete(id);
              resolve();
            }, 2000);
            this.queries.set(id, (c) => {
              clearTimeout(timer);
              out.set(s.index, c);
              resolve();
            });
            w.postMessage({ t: 'counts', id } satisfies ToWorker);
          }),
      ),
    );
    return out;
  }

  /** Stops every worker (see the module comment); resolves once all have ended. */
  async close(): Promise<void> {
    this.closing = true;
    for (const s of this.slots) {
      if (s.timer) clearTimeout(s.timer);
      s.timer = null;
      s.worker?.postMessage({ t: 'stop' } satisfies ToWorker);
    }
    await Promise.all([...this.exits]);
  }

  /** Starts slot `s`'s worker; resolves when it listens, rejects when it cannot. */
  private spawn(s: Slot): Promise<void> {
    const w = new Worker(workerScript(), { workerData: { ...this.o.init, index: s.index } satisfies WorkerInit, resourceLimits: workerLimits() });
    s.worker = w;
    s.startedAt = Date.now();
    const log = this.o.log;
    // The state as it is now, before anything else (messages are queued until the worker reads them).
    for (const m of this.o.snapshot()) w.postMessage(m);
    let listening = false;
    let exited!: () => void;
    const exit = new Promise<void>((r) => (exited = r));
    this.exits.add(exit);
    this.o.workers.add(w, exit);
    return new Promise<void>((resolve, reject) => {
      w.on('message', (m: FromWorker) => {
        try {
          this.onMessage(s, m, () => {
            listening = true;
            resolve();
          }, reject);
        } catch (e) {
          log.error('a message from an HTTP thread failed', { thread: s.index, err: e instanceof Error ? e.stack : String(e) });
        }
      });
      w.on('error', (e) => {
        log.error('an HTTP thread failed', { thread: s.index, err: e instanceof Error ? e.stack : String(e) });
      });
      w.on('exit', (code) => {
        this.o.workers.delete(w);
        this.exits.delete(exit);
        exited();
        if (s.worker === w) s.worker = null;
        this.o.intake.workerGone(s.index);
        this.o.listen.workerGone(s.index);
        if (!listening) return reject(new Error(`HTTP thread ${s.index} ended before listening (exit code ${code})`));
        if (this.closing) return;
        // Not asked to stop: a crash. Start another after a pause.
        if (Date.now() - s.startedAt > 60_000) s.failures = 0;
        const wait = Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** s.failures++);
        log.error('an HTTP thread ended unexpectedly: starting another', { thread: s.index, exitCode: code, restartInMs: wait });
        s.timer = setTimeout(() => {
          s.timer = null;
          if (this.closing) return;
          this.spawn(s).catch((e: Error) => log.error('an HTTP thread could not be restarted', { thread: s.index, err: e.message }));
        }, wait);
        s.timer.unref();
      });
    });
  }

  private onMessage(s: Slot, m: FromWorker, listening: () => void, failed: (e: Error) => void): void {
    switch (m.t) {
      case 'listening':
        return listening();
      case 'listen-failed':
        return failed(new Error(`HTTP thread ${s.index}: ${m.message}`));
      case 'sessions':
        return this.o.intake.take(s.index, m.b);
      case 'log':
        return this.o.log.child(m.component)[m.level](m.msg, m.fields);
      case 'limit':
        return this.o.limits.hit(m.cause, m.remote, m.fields);
      case 'counts': {
        const q = this.queries.get(m.id);
        this.queries.delete(m.id);
        return q?.(m.counts);
      }
      case 'listen-want':
        return this.o.listen.want(s.index, m);
      case 'stopped':
        return;
    }
  }
}
