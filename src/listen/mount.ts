/**
 * A mount (Icecast's word): the progressive listening output of one layer of one stream, shared by
 * every listener of it (PRODUCT.md §10 "Listening"; the model of Icecast's `source.c`/`refbuf.c`).
 *
 * - One queue of immutable chunks (src/media/listen-encoder.ts): each part (LL-HLS layers) or
 *   segment (classic layers) the layer makes is read back and written in the listening format
 *   once, into one Buffer, cut into ~0.5 s chunks that start on frame/page boundaries. Chunks
 *   carry absolute sequence numbers, byte offsets and audio times; every listener holds only its
 *   position (the next chunk's sequence number) and writes the shared chunks themselves — there is
 *   no per-listener copy of the audio.
 * - A new listener gets the format's header (Ogg: OpusHead/OpusTags pages), then a burst starting
 *   on a chunk boundary 2–4 s back from the live edge, then real time. A mount created for the
 *   first listener builds its queue from the layer's retained parts/segments, so that listener
 *   gets its burst too.
 * - Slow listeners: a listener whose unsent audio exceeds SLOW_MS (10 s) is disconnected and
 *   reported (`left('slow')`); nobody else notices. "Unsent" counts from the start of the last
 *   batch of writes that found the HTTP layer's buffer empty (the first write of a batch returns
 *   false while bytes of earlier batches wait), so what the HTTP layer buffers for a listener is
 *   bounded by ~10 s of audio. A listener whose position fell off the queue's tail is cut the same way.
 * - ICY metadata (src/listen/icy.ts): per listener one byte counter until the next block and the
 *   version of the title it got last; a chunk is written in `subarray` views around the blocks.
 *   Titles come from `nowPlaying(streamId)`, asked at every new chunk.
 * - The mount subscribes to its layer while it has listeners, and for LINGER_MS after the last
 *   one leaves; it ends every listener (the response ends) when the layer ends.
 */
import type { Layer, LayerMedia } from '../media/layer.js';
import { CHUNK_MS, ListenEncoder, type ListenChunk } from '../media/listen-encoder.js';
import { ICY_EMPTY_BLOCK, ICY_METAINT, icyTitleBlock } from './icy.js';

/** A listener more than this much audio behind (unsent, ms) is disconnected (PRODUCT.md §10). */
export const SLOW_MS = 10_000;
/** The longest burst (ms of audio). */
export const BURST_MAX_MS = 4000;
/** The shortest burst (ms of audio), once the layer has that much. */
export const BURST_MIN_MS = 2000;
/** Audio kept in the queue (ms): the slow limit, the longest burst and a margin. */
export const RETAIN_MS = SLOW_MS + BURST_MAX_MS + 2000;
/** How long a mount without listeners stays subscribed (ms). */
export const LINGER_MS = 30_000;

/** Where a listener's bytes go (the progressive HTTP response; src/http/routes/progressive.ts). */
export interface ListenSink {
  /** Hands bytes over (kept in full); false when they could not all be sent now (backpressure). */
  write(chunk: Uint8Array): boolean;
  /** Runs `fn`, its writes sent together (one syscall). */
  cork(fn: () => void): void;
  /** `cb` runs when the connection can take more after backpressure. */
  onWritable(cb: () => void): void;
  /** Ends the response after what was written. */
  end(): void;
  /** Closes the connection now. */
  close(): void;
}

/** Why a mount let a listener go. */
export type LeaveReason = 'ended' | 'slow' | 'closed';

/** One listener as the mount sees it. */
export interface MountClient {
  sink: ListenSink;
  /** Interleave ICY metadata (`Icy-MetaData: 1`). */
  icy: boolean;
  /** The mount let this listener go (its sink was ended or closed); called once, not after `remove`. */
  left(reason: LeaveReason): void;
  /** The listener took audio (to keep its session's last-seen time). */
  seen?(): void;
}

/** What a mount needs besides its layer. */
export interface MountOptions {
  streamId: string;
  layer: Layer;
  /** The current ICY title (`<artist> - <title>`), or null for none. */
  nowPlaying: (streamId: string) => string | null;
  /** A part/segment could not be read back (logged by the caller, throttled). */
  onError?: (e: Error) => void;
  /** The mount is gone (ended, or idle past LINGER_MS): forget it. */
  onDispose?: () => void;
}

interface Queued extends ListenChunk {
  seq: number;
  /** Absolute byte offset of the chunk in the mount's stream. */
  offset: number;
  /** Audio time at the chunk's start (ms since the mount began). */
  startMs: number;
}

interface Listener {
  c: MountClient;
  /** Sequence number of the next chunk to write. */
  next: number;
  /** Audio time up to which the HTTP layer is known to have sent everything on. */
  ackedMs: number;
  /** The last write met backpressure: wait for `onWritable`. */
  blocked: boolean;
  /** ICY: bytes until the next metadata block; -1 without ICY. */
  icyLeft: number;
  /** ICY: the title version this listener got last. */
  titleVersion: number;
  gone: boolean;
}

/** A listener's handle: `remove()` when its client went away. */
export interface MountHandle {
  remove(): void;
}

export class Mount {
  private readonly queue: Queued[] = [];
  /** Sequence number of the next chunk. */
  private nextSeq = 0;
  private nextOffset = 0;
  /** Audio time of the live edge (ms). */
  private edgeMs = 0;
  private readonly listeners = new Set<Listener>();
  private readonly encoder: ListenEncoder;
  private unsubscribe: (() => void) | null = null;
  private linger: NodeJS.Timeout | null = null;
  private title: string | null = null;
  private titleVersion = 0;
  private titleBlock: Buffer = ICY_EMPTY_BLOCK;
  private disposed = false;
  readonly burstTargetMs: number;

  constructor(private readonly o: MountOptions) {
    const layer = o.layer;
    this.encoder = new ListenEncoder(layer.o.container);
    const unitMs = layer.lowLatency ? layer.o.partTargetMs : layer.o.targetDurationMs;
    // A burst must outlast the wait for the next part/segment: 2 s plus one unit, at most 4 s.
    this.burstTargetMs = Math.min(BURST_MAX_MS, BURST_MIN_MS + unitMs);
    for (const m of layer.recentMedia(BURST_MAX_MS + CHUNK_MS)) if (m.initVersion === layer.initVersion) this.append(m);
    this.unsubscribe = layer.onMedia({ media: (m) => this.media(m), end: () => this.end() });
  }

  /** Listeners now. */
  get size(): number {
    return this.listeners.size;
  }

  /** Whether the mount still serves (not ended, not disposed). */
  get open(): boolean {
    return !this.disposed;
  }

  /** Bytes and audio held in the queue. */
  get held(): { chunks: number; bytes: number; ms: number } {
    let bytes = 0;
    for (const q of this.queue) bytes += q.data.length;
    return { chunks: this.queue.length, bytes, ms: this.queue.length ? this.edgeMs - this.queue[0]!.startMs : 0 };
  }

  /**
   * Adds a listener: its header and burst are written at once (call it where writes are corked,
   * e.g. synchronously in the request handler). @throws Error on a disposed mount
   */
  add(c: MountClient): MountHandle {
    if (this.disposed) throw new Error('mount is closed');
    if (this.linger) {
      clearTimeout(this.linger);
      this.linger = null;
    }
    const start = this.burstStart();
    const first = this.chunk(start);
    const l: Listener = { c, next: start, ackedMs: first ? first.startMs : this.edgeMs, blocked: false, icyLeft: c.icy ? ICY_METAINT : -1, titleVersion: 0, gone: false };
    this.listeners.add(l);
    c.sink.onWritable(() => {
      if (l.gone) return;
      l.blocked = false;
      this.send(l, null);
    });
    this.refreshTitle();
    this.send(l, first ? first.header : this.encoder.header);
    return { remove: () => this.drop(l) };
  }

  /** Stops serving (server shutdown): every listener's connection is closed, the layer let go. */
  close(): void {
    for (const l of [...this.listeners]) this.cut(l, 'closed');
    this.dispose();
  }

  /** Where a new listener starts: the latest startable chunk with ≥ target − CHUNK_MS of audio after it. */
  private burstStart(): number {
    let acc = 0;
    let start = this.nextSeq;
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const q = this.queue[i]!;
      acc += q.ms;
      if (!q.startable) continue;
      start = q.seq;
      if (acc >= this.burstTargetMs - CHUNK_MS) break;
    }
    return start;
  }

  private chunk(seq: number): Queued | undefined {
    const first = this.queue[0];
    return first ? this.queue[seq - first.seq] : undefined;
  }

  /** A new part/segment of the layer: appended, sent to every listener that can take it. */
  private media(m: LayerMedia): void {
    if (this.disposed) return;
    if (!this.append(m)) return;
    this.refreshTitle();
    for (const l of [...this.listeners]) {
      if (l.gone) continue;
      if (this.edgeMs - l.ackedMs > SLOW_MS || l.next < (this.queue[0]?.seq ?? this.nextSeq)) {
        this.cut(l, 'slow');
        continue;
      }
      this.send(l, null);
    }
  }

  /** Encodes `m` onto the queue and trims its tail. False when nothing was added. */
  private append(m: LayerMedia): boolean {
    let chunks: ListenChunk[];
    try {
      chunks = this.encoder.encode(m, this.o.layer.init, m.initVersion);
    } catch (e) {
      this.o.onError?.(e as Error);
      return false;
    }
    for (const c of chunks) {
      this.queue.push({ ...c, seq: this.nextSeq++, offset: this.nextOffset, startMs: this.edgeMs });
      this.nextOffset += c.data.length;
      this.edgeMs += c.ms;
    }
    while (this.queue.length > 1 && this.edgeMs - (this.queue[0]!.startMs + this.queue[0]!.ms) > RETAIN_MS) this.queue.shift();
    return chunks.length > 0;
  }

  /** Asks for the current title; a change gets a new block and version. */
  private refreshTitle(): void {
    let t: string | null;
    try {
      t = this.o.nowPlaying(this.o.streamId);
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
  private send(l: Listener, header: Buffer | null): void {
    if (l.gone || l.blocked) return;
    if (l.next >= this.nextSeq && !header?.length) return;
    const batchMs = this.chunk(l.next)?.startMs ?? this.edgeMs;
    let first: boolean | null = null;
    let ok = true;
    const w = (b: Uint8Array) => {
      const r = l.c.sink.write(b);
      first ??= r;
      if (!r) ok = false;
    };
    try {
      l.c.sink.cork(() => {
        if (header?.length) this.out(l, header, w);
        while (ok && l.next < this.nextSeq) {
          const q = this.chunk(l.next);
          if (!q) break;
          l.next++;
          this.out(l, q.data, w);
        }
      });
    } catch {
      // The connection is gone (its abort is on the way).
      return;
    }
    if (first === true) {
      l.ackedMs = batchMs;
      l.c.seen?.();
    }
    if (!ok) l.blocked = true;
  }

  /** Writes `data` for one listener, interleaving ICY metadata blocks by `subarray` views. */
  private out(l: Listener, data: Buffer, w: (b: Uint8Array) => void): void {
    if (l.icyLeft < 0) return w(data);
    let d = data;
    while (d.length > 0) {
      const n = Math.min(l.icyLeft, d.length);
      w(n === d.length ? d : d.subarray(0, n));
      l.icyLeft -= n;
      d = d.subarray(n);
      if (l.icyLeft === 0) {
        if (l.titleVersion !== this.titleVersion) {
          l.titleVersion = this.titleVersion;
          w(this.titleBlock);
        } else w(ICY_EMPTY_BLOCK);
        l.icyLeft = ICY_METAINT;
      }
    }
  }

  /** Disconnects a listener now (slow, or the mount closes). */
  private cut(l: Listener, reason: LeaveReason): void {
    if (l.gone) return;
    l.gone = true;
    this.listeners.delete(l);
    try {
      l.c.sink.close();
    } catch {
      // already gone
    }
    this.left(l, reason);
    this.idle();
  }

  /** Tells the client's owner; its fault must not stop the loop over the other listeners. */
  private left(l: Listener, reason: LeaveReason): void {
    try {
      l.c.left(reason);
    } catch (e) {
      this.o.onError?.(e as Error);
    }
  }

  /** The client went away. */
  private drop(l: Listener): void {
    if (l.gone) return;
    l.gone = true;
    this.listeners.delete(l);
    this.idle();
  }

  /** The layer ended: every listener gets what is queued, then the end of its response. */
  private end(): void {
    for (const l of [...this.listeners]) {
      this.send(l, null);
      l.gone = true;
      this.listeners.delete(l);
      try {
        l.c.sink.end();
      } catch {
        // already gone
      }
      this.left(l, 'ended');
    }
    this.dispose();
  }

  /** Without listeners: lets go of the layer after LINGER_MS. */
  private idle(): void {
    if (this.listeners.size > 0 || this.disposed || this.linger) return;
    this.linger = setTimeout(() => {
      this.linger = null;
      if (this.listeners.size === 0) this.dispose();
    }, LINGER_MS);
    this.linger.unref();
  }

  private dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.linger) clearTimeout(this.linger);
    this.linger = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.queue.length = 0;
    this.o.onDispose?.();
  }
}
