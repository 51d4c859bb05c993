/**
 * A mount (Icecast's word): the progressive listening output of one layer of one stream, shared by
 * every listener of it (docs/behaviour.md §10 "Listening"; the model of Icecast's `source.c`/`refbuf.c`).
 *
 * - One queue of immutable chunks (src/delivery/progressive/queue.ts; src/delivery/progressive/encoder.ts): each part
 *   (LL-HLS layers) or segment (classic layers) the layer makes is read back and written in the
 *   listening format once, cut into ~0.5 s chunks that start on frame/page boundaries. Chunks
 *   carry sequence numbers and audio times; every listener holds only its position (the next
 *   chunk's sequence number) and writes the shared chunks themselves — there is no per-listener
 *   copy of the audio. On a worker thread the queue is the main thread's, mirrored: the same
 *   chunk bytes in shared memory (src/delivery/progressive/shared.ts), and its listeners wait for the main
 *   thread's backlog (a millisecond or so) before their burst is written.
 * - A new listener gets the format's header (Ogg: OpusHead/OpusTags pages), then a burst starting
 *   on a chunk boundary 2–4 s back from the live edge, then real time. A mount created for the
 *   first listener builds its queue from the layer's retained parts/segments, so that listener
 *   gets its burst too.
 * - Slow listeners: a listener whose unsent audio exceeds SLOW_MS (10 s) is disconnected and
 *   reported (`left('slow')`); nobody else notices. "Unsent" counts from the start of the last
 *   batch of writes that found the HTTP layer's buffer empty (the first write of a batch returns
 *   false while bytes of earlier batches wait), so what the HTTP layer buffers for a listener is
 *   bounded by ~10 s of audio. A listener whose position fell off the queue's tail is cut the same way.
 * - ICY metadata (src/delivery/progressive/icy.ts): per listener one byte counter until the next block and the
 *   version of the title it got last; a chunk is written in `subarray` views around the blocks.
 *   Titles come from `nowPlaying(streamId)`, asked at every new chunk.
 * - The mount reads its queue while it has listeners, and for LINGER_MS after the last one
 *   leaves; it ends every listener (the response ends) when the layer ends.
 */
import type { Layer } from '../../live/media/layer.js';
import { ICY_EMPTY_BLOCK, ICY_METAINT, icyTitleBlock } from './icy.js';
import { BURST_MAX_MS, BURST_MIN_MS, EncodedQueue, SLOW_MS, type ChunkQueue, type Queued } from './queue.js';

export { SLOW_MS, BURST_MAX_MS, BURST_MIN_MS, RETAIN_MS } from './queue.js';
/** How long a mount without listeners stays subscribed (ms). */
export const LINGER_MS = 30_000;

/** Where a listener's bytes go (the progressive HTTP response; src/base/http/routes/progressive.ts). */
export interface ListenSink {
  /** Hands bytes over (kept in full); false when they could not all be sent now (backpressure: the owner calls `MountListener.writable` once drained). */
  write(chunk: Uint8Array): boolean;
  /** Runs `fn`, its writes sent together (one syscall). */
  cork(fn: () => void): void;
  /** Ends the response after what was written. */
  end(): void;
  /** Closes the connection now. */
  close(): void;
}

/** Why a mount let a listener go. */
export type LeaveReason = 'ended' | 'slow' | 'closed';

const BLOCKED = 1;
const PENDING = 2;
const DROPPED = 4;
/** The lowest bit of `MountListener.flags` an owner (a subclass) may use for its own flags. */
export const OWNER_FLAG = 8;

/**
 * One listener as a mount holds it: its position and ICY state. The listener's owner extends it
 * with what it keeps of the connection, so that a listener is one object with its methods on the
 * prototype (a listener lives for hours: every object and closure per listener is memory per
 * listener, docs/benchmarks.md "Where a listener's memory goes"). `Mount.add` takes it; the owner
 * calls `remove` when its client went away and `writable` when the connection drained.
 */
export abstract class MountListener {
  /** Sequence number of the next chunk to write. */
  next = 0;
  /**
   * Audio time (whole ms, a small integer V8 keeps in the object) up to which the HTTP layer is
   * known to have sent everything on.
   */
  ackedMs = 0;
  /** ICY: bytes until the next metadata block; -1 without ICY. */
  icyLeft = -1;
  /** ICY: the title version this listener got last. */
  titleVersion = 0;
  /**
   * The mount's flags (BLOCKED, PENDING, DROPPED) and, from bit OWNER_FLAG up, the owner's: one
   * small integer in the object instead of a field per flag (8 bytes each).
   */
  protected flags = PENDING;
  /** The mount it was added to (null before `Mount.add`). */
  mount: Mount | null = null;

  /** The last write met backpressure: wait for `writable`. */
  get blocked(): boolean {
    return (this.flags & BLOCKED) !== 0;
  }
  set blocked(v: boolean) {
    this.flags = v ? this.flags | BLOCKED : this.flags & ~BLOCKED;
  }

  /** Waiting for a mirrored queue's backlog (not started yet). */
  get pending(): boolean {
    return (this.flags & PENDING) !== 0;
  }
  set pending(v: boolean) {
    this.flags = v ? this.flags | PENDING : this.flags & ~PENDING;
  }

  /** The mount let go of it (or it was removed). */
  get dropped(): boolean {
    return (this.flags & DROPPED) !== 0;
  }
  set dropped(v: boolean) {
    this.flags = v ? this.flags | DROPPED : this.flags & ~DROPPED;
  }

  /** Where its bytes go. */
  abstract readonly sink: ListenSink;
  /** Interleave ICY metadata (`Icy-MetaData: 1`). */
  abstract readonly icy: boolean;
  /** The mount let this listener go (its sink was ended or closed); called once, not after `remove`. */
  abstract left(reason: LeaveReason): void;

  /** The listener took audio (to keep its session's last-seen time); nothing by default. */
  seen(): void {}

  /** The client went away. */
  remove(): void {
    this.mount?.removed(this);
  }

  /** The connection drained after backpressure. */
  writable(): void {
    if (this.dropped || !this.mount) return;
    this.blocked = false;
    this.mount.resume(this);
  }
}

/** What a mount needs: a layer (its queue is encoded here) or a queue (shared, or a worker's mirror). */
export interface MountOptions {
  streamId: string;
  /** The layer whose queue this mount encodes and owns. */
  layer?: Layer;
  /** A queue someone else owns (`release` is called when the mount lets go of it). */
  queue?: ChunkQueue;
  /** The current ICY title (`<artist> - <title>`), or null for none. Default: the queue's. */
  nowPlaying?: (streamId: string) => string | null;
  /** A part/segment could not be read back (logged by the caller, throttled). */
  onError?: (e: Error) => void;
  /** The mount is gone (ended, or idle past LINGER_MS): forget it (and release a given queue). */
  onDispose?: () => void;
}

export class Mount {
  private readonly listeners = new Set<MountListener>();
  /** Listeners added before a mirrored queue had its backlog: started once it has. */
  private pending: MountListener[] = [];
  private readonly queue: ChunkQueue;
  private readonly owned: EncodedQueue | null;
  private stopReading: (() => void) | null = null;
  private linger: NodeJS.Timeout | null = null;
  private title: string | null = null;
  private titleVersion = 0;
  private titleBlock: Buffer = ICY_EMPTY_BLOCK;
  private disposed = false;
  readonly burstTargetMs: number;
  /** The stream's id (an own copy: no slice of a request's URL is kept alive by it). */
  readonly streamId: string;
  /** The batch `send` writes (one at a time; its cork callback reads it): listener, header, results. */
  private batch: { l: MountListener | null; header: Uint8Array | null; first: boolean | null; ok: boolean } = { l: null, header: null, first: null, ok: true };
  private readonly corked = () => this.writeBatch();

  /** @throws Error without `layer` or `queue` */
  constructor(private readonly o: MountOptions) {
    this.streamId = Buffer.from(o.streamId, 'utf8').toString('utf8');
    if (o.queue) {
      this.queue = o.queue;
      this.owned = null;
    } else if (o.layer) {
      this.owned = new EncodedQueue(o.layer, () => this.o.nowPlaying?.(this.streamId) ?? null, false, o.onError);
      this.queue = this.owned;
    } else throw new Error('a mount needs a layer or a queue');
    // A burst must outlast the wait for the next part/segment: 2 s plus one unit, at most 4 s.
    this.burstTargetMs = Math.min(BURST_MAX_MS, BURST_MIN_MS + this.queue.unitMs);
    this.stopReading = this.queue.read({ chunks: () => this.media(), end: () => this.end() });
  }

  /** Listeners now. */
  get size(): number {
    return this.listeners.size + this.pending.length;
  }

  /** Its listeners now (started or waiting for a mirrored queue's backlog), as a new array. */
  clients(): MountListener[] {
    return [...this.pending, ...this.listeners];
  }

  /** Whether the mount still serves (not ended, not disposed). */
  get open(): boolean {
    return !this.disposed;
  }

  /** Bytes and audio held in the queue. */
  get held(): { chunks: number; bytes: number; ms: number } {
    return this.queue.held;
  }

  /**
   * Adds a listener: its header and burst are written at once (call it where writes are corked,
   * e.g. synchronously in the request handler) — or, on a mirrored queue still waiting for its
   * backlog, as soon as that arrives. Returns `l`. @throws Error on a disposed mount, or for a
   * listener added before
   */
  add<L extends MountListener>(l: L): L {
    if (this.disposed) throw new Error('mount is closed');
    if (l.mount) throw new Error('listener already added to a mount');
    if (this.linger) {
      clearTimeout(this.linger);
      this.linger = null;
    }
    l.mount = this;
    l.icyLeft = l.icy ? ICY_METAINT : -1;
    // Started when the backlog arrives.
    if (!this.queue.ready) this.pending.push(l);
    else this.start(l);
    return l;
  }

  /** Stops serving (server shutdown): every listener's connection is closed, the queue let go. */
  close(): void {
    for (const l of this.pending.splice(0)) {
      l.dropped = true;
      this.closeClient(l, 'closed');
    }
    for (const l of [...this.listeners]) this.cut(l, 'closed');
    this.dispose();
  }

  private start(l: MountListener): void {
    const q = this.queue;
    const start = q.burstStart(this.burstTargetMs);
    const first = q.chunk(start);
    l.pending = false;
    l.next = start;
    l.ackedMs = Math.floor(first ? first.startMs : q.edgeMs);
    this.listeners.add(l);
    this.refreshTitle();
    this.send(l, first ? first.header : q.header);
  }

  /** A listener's client went away (`MountListener.remove`). */
  removed(l: MountListener): void {
    if (l.pending) this.unpend(l);
    else this.drop(l);
  }

  /** A listener's connection drained (`MountListener.writable`). */
  resume(l: MountListener): void {
    this.send(l, null);
  }

  private unpend(l: MountListener): void {
    if (l.dropped) return;
    l.dropped = true;
    this.pending = this.pending.filter((x) => x !== l);
    this.idle();
  }

  /** New chunks (or a mirrored queue's backlog): pending listeners start, the others get what is new. */
  private media(): void {
    if (this.disposed) return;
    if (this.pending.length > 0) {
      for (const l of this.pending.splice(0)) this.start(l);
    }
    this.refreshTitle();
    const q = this.queue;
    // Deleting the listener at hand while iterating a Set is defined (it is not visited again).
    for (const l of this.listeners) {
      if (l.dropped) continue;
      if (q.edgeMs - l.ackedMs > SLOW_MS || l.next < q.firstSeq) {
        this.cut(l, 'slow');
        continue;
      }
      this.send(l, null);
    }
  }

  /** Asks for the current title; a change gets a new block and version. */
  private refreshTitle(): void {
    let t: string | null;
    try {
      t = this.o.nowPlaying ? this.o.nowPlaying(this.streamId) : this.queue.title();
    } catch {
      return;
    }
    if (t === this.title) return;
    this.title = t;
    this.titleVersion++;
    this.titleBlock = icyTitleBlock(t ?? '');
  }

  /**
   * Writes `header` (if any) and every chunk from the listener's position up to the live edge, in
   * one cork; stops after a chunk whose write met backpressure (the HTTP layer keeps it). The
   * first write of the batch tells whether the earlier batches were sent: then `ackedMs` moves.
   */
  private send(l: MountListener, header: Uint8Array | null): void {
    if (l.dropped || l.blocked) return;
    const q = this.queue;
    if (l.next >= q.nextSeq && !header?.length) return;
    const batchMs = q.chunk(l.next)?.startMs ?? q.edgeMs;
    const b = this.batch;
    b.l = l;
    b.header = header;
    b.first = null;
    b.ok = true;
    try {
      l.sink.cork(this.corked);
    } catch {
      // The connection is gone (its abort is on the way).
      return;
    } finally {
      b.l = null;
      b.header = null;
    }
    if (b.first === true) {
      l.ackedMs = Math.floor(batchMs);
      l.seen();
    }
    if (!b.ok) l.blocked = true;
  }

  /** The body of `send`, inside the sink's cork (no closure per call: the batch is the mount's). */
  private writeBatch(): void {
    const b = this.batch;
    const l = b.l;
    if (!l) return;
    const q = this.queue;
    if (b.header?.length) this.out(l, b.header);
    while (b.ok && l.next < q.nextSeq) {
      const c: Queued | undefined = q.chunk(l.next);
      if (!c) break;
      l.next++;
      this.out(l, c.data);
    }
  }

  /** One write of the batch: the first one's answer tells whether earlier batches were sent. */
  private w(l: MountListener, data: Uint8Array): void {
    const r = l.sink.write(data);
    const b = this.batch;
    b.first ??= r;
    if (!r) b.ok = false;
  }

  /** Writes `data` for one listener, interleaving ICY metadata blocks by `subarray` views. */
  private out(l: MountListener, data: Uint8Array): void {
    if (l.icyLeft < 0) return this.w(l, data);
    let d = data;
    while (d.length > 0) {
      const n = Math.min(l.icyLeft, d.length);
      this.w(l, n === d.length ? d : d.subarray(0, n));
      l.icyLeft -= n;
      d = d.subarray(n);
      if (l.icyLeft === 0) {
        if (l.titleVersion !== this.titleVersion) {
          l.titleVersion = this.titleVersion;
          this.w(l, this.titleBlock);
        } else this.w(l, ICY_EMPTY_BLOCK);
        l.icyLeft = ICY_METAINT;
      }
    }
  }

  /** Disconnects a listener now (slow, or the mount closes). */
  private cut(l: MountListener, reason: LeaveReason): void {
    if (l.dropped) return;
    l.dropped = true;
    this.listeners.delete(l);
    this.closeClient(l, reason);
    this.idle();
  }

  private closeClient(c: MountListener, reason: LeaveReason): void {
    try {
      c.sink.close();
    } catch {
      // already gone
    }
    this.left(c, reason);
  }

  /** Tells the client's owner; its fault must not stop the loop over the other listeners. */
  private left(c: MountListener, reason: LeaveReason): void {
    try {
      c.left(reason);
    } catch (e) {
      this.o.onError?.(e as Error);
    }
  }

  /** The client went away. */
  private drop(l: MountListener): void {
    if (l.dropped) return;
    l.dropped = true;
    this.listeners.delete(l);
    this.idle();
  }

  /** The layer ended: every listener gets what is queued, then the end of its response. */
  private end(): void {
    for (const l of this.pending.splice(0)) {
      l.dropped = true;
      try {
        l.sink.end();
      } catch {
        // already gone
      }
      this.left(l, 'ended');
    }
    for (const l of [...this.listeners]) {
      this.send(l, null);
      l.dropped = true;
      this.listeners.delete(l);
      try {
        l.sink.end();
      } catch {
        // already gone
      }
      this.left(l, 'ended');
    }
    this.dispose();
  }

  /** Without listeners: lets go of the queue after LINGER_MS. */
  private idle(): void {
    if (this.size > 0 || this.disposed || this.linger) return;
    this.linger = setTimeout(() => {
      this.linger = null;
      if (this.size === 0) this.dispose();
    }, LINGER_MS);
    this.linger.unref();
  }

  private dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.linger) clearTimeout(this.linger);
    this.linger = null;
    this.stopReading?.();
    this.stopReading = null;
    this.owned?.dispose();
    this.o.onDispose?.();
  }
}
