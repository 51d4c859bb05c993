/**
 * Progressive listening across HTTP threads (docs/scaling.md): a worker thread's mounts read the
 * main thread's chunk queues, chunk bytes shared, not copied.
 *
 * - A worker's first listener of a layer asks for it (`listen-want`); the main thread answers
 *   with its queue's backlog, then posts each new batch of chunks as it is encoded, with the ICY
 *   title of that moment, and the end. The chunk bytes are views of SharedArrayBuffers the main
 *   thread filled once (src/delivery/progressive/queue.ts `EncodedQueue` with `share`): every thread's listeners
 *   write the same memory. The main thread keeps one queue per layer for all threads (its own
 *   mounts included) while anyone reads it.
 * - A worker lets go of a layer (`listen-want` false) when its mount did (LINGER_MS after its last
 *   listener); a worker that ended lets go of everything.
 */
import type { Layer } from '../../live/media/layer.js';
import { EncodedQueue, MirrorQueue, type Chunk } from './queue.js';

/** Main thread → worker: chunks of a layer's queue (`backlog`: the first post), or its end. */
export type ListenMessage =
  | { t: 'listen'; id: string; layer: string; unitMs: number; chunks: Chunk[]; header: Uint8Array; title: string | null }
  | { t: 'listen-end'; id: string; layer: string };

/** Worker → main thread: wants (or no longer wants) a layer's chunks. */
export interface ListenWant {
  t: 'listen-want';
  id: string;
  layer: string;
  want: boolean;
}

const key = (id: string, layer: string) => `${id}\n${layer}`;

/** The main thread's queues, one per layer, shared by its own mounts and every worker that reads it. */
export class SharedQueues {
  private readonly queues = new Map<Layer, { q: EncodedQueue; refs: number }>();

  /**
   * @param share put chunk bytes in shared memory (a node with worker threads)
   * @param title the ICY title of a stream now
   * @param onError a part/segment of `layer` could not be read back
   */
  constructor(
    private readonly share: boolean,
    private readonly title: (streamId: string) => string | null,
    private readonly onError: (streamId: string, layer: Layer, e: Error) => void,
  ) {}

  /** The queue of `layer` (made on first use); give it back with `release`. */
  acquire(streamId: string, layer: Layer): EncodedQueue {
    let e = this.queues.get(layer);
    if (!e || e.q.ended) {
      const q = new EncodedQueue(layer, () => this.title(streamId), this.share, (err) => this.onError(streamId, layer, err));
      this.queues.set(layer, (e = { q, refs: 0 }));
    }
    e.refs++;
    return e.q;
  }

  /** Gives back a queue of `acquire`: the last one out stops it. */
  release(layer: Layer, q: EncodedQueue): void {
    const e = this.queues.get(layer);
    if (!e || e.q !== q) return;
    if (--e.refs > 0) return;
    this.queues.delete(layer);
    q.dispose();
  }

  /** Stops every queue (shutdown). */
  close(): void {
    for (const e of this.queues.values()) e.q.dispose();
    this.queues.clear();
  }
}

/** The main thread's side: which workers read which layer's queue. */
export class ListenFanout {
  private readonly subs = new Map<string, { layer: Layer; q: EncodedQueue; workers: Set<number>; stop: () => void }>();

  /**
   * @param layerOf the live layer of a stream by name (null: none, or ended)
   * @param post posts a message to one worker
   */
  constructor(
    private readonly queues: SharedQueues,
    private readonly layerOf: (streamId: string, layer: string) => Layer | null,
    private readonly post: (worker: number, m: ListenMessage) => void,
  ) {}

  /** Worker `worker` wants (or lets go of) a layer's chunks. */
  want(worker: number, w: ListenWant): void {
    const k = key(w.id, w.layer);
    let sub = this.subs.get(k);
    if (!w.want) {
      if (!sub) return;
      sub.workers.delete(worker);
      if (sub.workers.size === 0) this.stop(k);
      return;
    }
    if (sub && sub.q.ended) {
      this.stop(k);
      sub = undefined;
    }
    if (!sub) {
      const layer = this.layerOf(w.id, w.layer);
      if (!layer) return this.post(worker, { t: 'listen-end', id: w.id, layer: w.layer });
      const q = this.queues.acquire(w.id, layer);
      const s = { layer, q, workers: new Set<number>(), stop: () => {} };
      s.stop = q.read({
        chunks: (added) => {
          const m: ListenMessage = { t: 'listen', id: w.id, layer: w.layer, unitMs: q.unitMs, chunks: added.map(wire), header: q.header, title: q.title() };
          for (const wk of s.workers) this.post(wk, m);
        },
        end: () => {
          for (const wk of s.workers) this.post(wk, { t: 'listen-end', id: w.id, layer: w.layer });
          if (this.subs.get(k) === s) this.stop(k);
        },
      });
      this.subs.set(k, (sub = s));
    }
    if (sub.workers.has(worker)) return;
    sub.workers.add(worker);
    const q = sub.q;
    // The backlog: what a listener's burst is cut from.
    this.post(worker, { t: 'listen', id: w.id, layer: w.layer, unitMs: q.unitMs, chunks: q.all().map(wire), header: q.header, title: q.title() });
  }

  /** Worker `worker` ended: it reads nothing any more. */
  workerGone(worker: number): void {
    for (const [k, s] of [...this.subs]) {
      s.workers.delete(worker);
      if (s.workers.size === 0) this.stop(k);
    }
  }

  /** Stops (shutdown). */
  close(): void {
    for (const k of [...this.subs.keys()]) this.stop(k);
  }

  private stop(k: string): void {
    const s = this.subs.get(k);
    if (!s) return;
    this.subs.delete(k);
    s.stop();
    this.queues.release(s.layer, s.q);
  }
}

/** A chunk as it crosses to a worker (its bytes are shared memory already). */
const wire = (c: Chunk): Chunk => ({ data: c.data, ms: c.ms, header: c.header, startable: c.startable });

/** A worker thread's mirrored queues, by stream and layer. */
export class MirrorQueues {
  private readonly queues = new Map<string, MirrorQueue>();

  /** @param want tells the main thread this worker wants (or lets go of) a layer's chunks */
  constructor(private readonly want: (w: ListenWant) => void) {}

  /** The mirrored queue of a layer, asked for on first use (not ready until the backlog arrives). */
  acquire(id: string, layer: string, unitMs: number): MirrorQueue {
    const k = key(id, layer);
    let q = this.queues.get(k);
    if (!q || q.ended) {
      this.queues.set(k, (q = new MirrorQueue(unitMs)));
      this.want({ t: 'listen-want', id, layer, want: true });
    }
    return q;
  }

  /** A mount let go of its queue. */
  release(id: string, layer: string, q: MirrorQueue): void {
    const k = key(id, layer);
    if (this.queues.get(k) !== q) return;
    this.queues.delete(k);
    q.close();
    this.want({ t: 'listen-want', id, layer, want: false });
  }

  /** A message of the main thread. */
  take(m: ListenMessage): void {
    const q = this.queues.get(key(m.id, m.layer));
    if (!q) return;
    if (m.t === 'listen-end') {
      this.queues.delete(key(m.id, m.layer));
      q.close();
    } else q.take(m.chunks, m.header, m.title);
  }

  /** Every queue ends (shutdown). */
  close(): void {
    for (const q of this.queues.values()) q.close();
    this.queues.clear();
  }
}
