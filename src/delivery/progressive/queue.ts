/**
 * The chunk queue of one layer's progressive listening output (Icecast's `refbuf` queue): immutable
 * chunks of ~0.5 s, each starting on a frame (ADTS, MP3) or page (Ogg) boundary, numbered in order,
 * the newest RETAIN_MS of audio kept. Mounts (src/delivery/progressive/mount.ts) hold listeners' positions in it.
 *
 * - `EncodedQueue` (the main thread): each part (LL-HLS layers) or segment (classic layers) the
 *   layer makes is read back and written in the listening format once (src/delivery/progressive/encoder.ts);
 *   a queue made for the first listener starts from the layer's retained parts/segments, so that
 *   listener gets its burst. With `share`, each chunk's bytes are put into a SharedArrayBuffer at
 *   that one copy: every thread's listeners then write the same memory (src/delivery/progressive/shared.ts).
 * - `MirrorQueue` (a worker thread): the same chunks, as the main thread posts them.
 */
import type { Layer } from '../../live/media/layer.js';
import type { LayerMedia } from '../../live/media/layer-media.js';
import { CHUNK_MS, ListenEncoder, type ListenChunk } from './encoder.js';

/** A listener more than this much audio behind (unsent, ms) is disconnected (docs/behaviour.md §10). */
export const SLOW_MS = 10_000;
/** The longest burst (ms of audio). */
export const BURST_MAX_MS = 4000;
/** The shortest burst (ms of audio), once the layer has that much. */
export const BURST_MIN_MS = 2000;
/** Audio kept in the queue (ms): the slow limit, the longest burst and a margin. */
export const RETAIN_MS = SLOW_MS + BURST_MAX_MS + 2000;

const EMPTY = new Uint8Array(0);

/** A chunk as a listener is handed it. */
export interface Chunk {
  /** The bytes (never modified; shared by every listener). */
  data: Uint8Array;
  /** Audio duration (ms). */
  ms: number;
  /** What a listener starting at this chunk gets first (Ogg: OpusHead + OpusTags pages; else empty). */
  header: Uint8Array;
  /** A listener may start here. */
  startable: boolean;
}

/** A chunk in the queue. */
export interface Queued extends Chunk {
  seq: number;
  /** Audio time at the chunk's start (ms since the queue began). */
  startMs: number;
}

/** Who reads a queue: told after each batch of new chunks, and at the end. */
export interface QueueReader {
  /** `added`: the chunks just appended (in order). */
  chunks(added: readonly Queued[]): void;
  end(): void;
}

/** The queue itself: numbering, retention, readers. */
export class ChunkQueue {
  private readonly queue: Queued[] = [];
  /** Sequence number of the next chunk. */
  nextSeq = 0;
  /** Audio time of the live edge (ms). */
  edgeMs = 0;
  /** What a listener starting at the live edge (no chunk yet) gets first. */
  header: Uint8Array = EMPTY;
  ended = false;
  /** The queue has its first chunks (a mirror: the main thread's backlog arrived). */
  ready = true;
  private readers: QueueReader[] = [];

  /**
   * @param unitMs audio per part (LL-HLS) or segment (classic) of the layer (ms): a burst must
   *   outlast the wait for the next one
   * @param title the ICY title now (`<artist> - <title>`), or null
   */
  constructor(
    readonly unitMs: number,
    public title: () => string | null,
  ) {}

  /** The chunk `seq`, if still queued. */
  chunk(seq: number): Queued | undefined {
    const first = this.queue[0];
    return first ? this.queue[seq - first.seq] : undefined;
  }

  /** Sequence number of the oldest queued chunk (`nextSeq` when empty). */
  get firstSeq(): number {
    return this.queue[0]?.seq ?? this.nextSeq;
  }

  /** Every queued chunk, oldest first. */
  all(): readonly Queued[] {
    return this.queue;
  }

  /** Where a new listener starts: the latest startable chunk with ≥ `targetMs` − CHUNK_MS of audio after it. */
  burstStart(targetMs: number): number {
    let acc = 0;
    let start = this.nextSeq;
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const q = this.queue[i]!;
      acc += q.ms;
      if (!q.startable) continue;
      start = q.seq;
      if (acc >= targetMs - CHUNK_MS) break;
    }
    return start;
  }

  /** Bytes and audio held. */
  get held(): { chunks: number; bytes: number; ms: number } {
    let bytes = 0;
    for (const q of this.queue) bytes += q.data.length;
    return { chunks: this.queue.length, bytes, ms: this.queue.length ? this.edgeMs - this.queue[0]!.startMs : 0 };
  }

  /** Adds a reader; returns the function that removes it. A reader of an ended queue hears `end` at once. */
  read(r: QueueReader): () => void {
    if (this.ended) {
      r.end();
      return () => {};
    }
    this.readers = [...this.readers, r];
    return () => {
      this.readers = this.readers.filter((x) => x !== r);
    };
  }

  /** Readers now. */
  get readerCount(): number {
    return this.readers.length;
  }

  /** Appends `chunks` (numbering them), trims the tail, tells the readers. */
  protected append(chunks: readonly Chunk[]): void {
    if (this.ended || chunks.length === 0) return;
    const added: Queued[] = [];
    for (const c of chunks) {
      const q: Queued = { data: c.data, ms: c.ms, header: c.header, startable: c.startable, seq: this.nextSeq++, startMs: this.edgeMs };
      this.queue.push(q);
      added.push(q);
      this.edgeMs += c.ms;
    }
    while (this.queue.length > 1 && this.edgeMs - (this.queue[0]!.startMs + this.queue[0]!.ms) > RETAIN_MS) this.queue.shift();
    this.announce(added);
  }

  /** Tells the readers about `added` (possibly none: a mirror whose backlog was empty is ready now). */
  protected announce(added: readonly Queued[]): void {
    for (const r of this.readers) {
      try {
        r.chunks(added);
      } catch {
        // A reader's fault stays its own.
      }
    }
  }

  /** The layer ended: readers hear `end` (once). */
  protected finish(): void {
    if (this.ended) return;
    this.ended = true;
    const rs = this.readers;
    this.readers = [];
    for (const r of rs) {
      try {
        r.end();
      } catch {
        // A reader's fault stays its own.
      }
    }
    this.queue.length = 0;
  }
}

/** Copies `b` into a SharedArrayBuffer. */
function shared(b: Uint8Array): Uint8Array {
  if (b.byteLength === 0 || b.buffer instanceof SharedArrayBuffer) return b;
  const out = new Uint8Array(new SharedArrayBuffer(b.byteLength));
  out.set(b);
  return out;
}

/** A queue encoded from a main-thread layer's parts/segments. */
export class EncodedQueue extends ChunkQueue {
  private readonly encoder: ListenEncoder;
  private unsubscribe: (() => void) | null;
  /** The shared copy of each (Ogg) header buffer. */
  private readonly headers = new WeakMap<Uint8Array, Uint8Array>();

  /**
   * @param share put chunk bytes into SharedArrayBuffers (worker threads read them)
   * @param onError a part/segment could not be read back (it is skipped)
   */
  constructor(
    private readonly layer: Layer,
    title: () => string | null,
    private readonly share = false,
    private readonly onError?: (e: Error) => void,
  ) {
    super(layer.lowLatency ? layer.o.partTargetMs : layer.o.targetDurationMs, title);
    this.encoder = new ListenEncoder(layer.o.container);
    this.encode(layer.recentMedia(BURST_MAX_MS + CHUNK_MS).filter((m) => m.initVersion === layer.initVersion));
    this.unsubscribe = layer.onMedia({ media: (m) => this.encode([m]), end: () => this.finish() });
  }

  /** Stops reading the layer (no reader is left). */
  dispose(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.finish();
  }

  private encode(ms: LayerMedia[]): void {
    const out: Chunk[] = [];
    for (const m of ms) {
      let chunks: ListenChunk[];
      try {
        chunks = this.encoder.encode(m, this.layer.init, m.initVersion);
      } catch (e) {
        this.onError?.(e as Error);
        continue;
      }
      for (const c of chunks) out.push(this.share ? { data: shared(c.data), ms: c.ms, header: this.sharedHeader(c.header), startable: c.startable } : c);
    }
    this.header = this.share ? this.sharedHeader(this.encoder.header) : this.encoder.header;
    this.append(out);
  }

  private sharedHeader(h: Uint8Array): Uint8Array {
    if (h.byteLength === 0) return EMPTY;
    let s = this.headers.get(h);
    if (!s) this.headers.set(h, (s = shared(h)));
    return s;
  }

  protected override finish(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    super.finish();
  }
}

/** A worker thread's copy of a main-thread queue, fed by the main thread's messages. */
export class MirrorQueue extends ChunkQueue {
  private titleNow: string | null = null;

  constructor(unitMs: number) {
    super(unitMs, () => null);
    this.title = () => this.titleNow;
    this.ready = false;
  }

  /** Chunks the main thread posted (the first post is its backlog: the queue is then ready). */
  take(chunks: readonly Chunk[], header: Uint8Array, title: string | null): void {
    this.header = header;
    this.titleNow = title;
    this.ready = true;
    if (chunks.length > 0) this.append(chunks);
    else this.announce([]);
  }

  /** The layer ended (or the main thread let the queue go). */
  close(): void {
    this.ready = true;
    this.finish();
  }
}
