/**
 * The catch-up archive (docs/behaviour.md "Catch-up radio"): while a stream's `catchUp.hours` > 0,
 * every finished segment of every layer of its hubs is appended to its layer-hour under
 * `<dataDir>/catch-up/<streamId>/<layer>/` — its bytes to `<YYYYMMDDHH>.seg`, then a fixed-size
 * record (media sequence number, program date-time, duration, offset, length, discontinuity,
 * init section, broadcast) to the sidecar `<YYYYMMDDHH>.idx` (`hour-block.ts`) — and the fMP4
 * init sections beside them as `init-<id>.mp4`, named by their content like the live ones. Each
 * layer's records are also held in memory (`LayerIndex`: 48 bytes a segment), read back from the
 * sidecars at start, so a restarted node serves the archive at once; the segment names are the
 * live ones (a media sequence number names one segment of a layer for ever, docs/streams.md "One
 * timeline"), so an archive object is the very object a live player or an edge may already hold.
 *
 * Writes go through one queue, written together WRITE_AFTER_MS after the first segment waiting
 * (at once when a layer ends or the archive closes): a segment's bytes, then its record, on the
 * hour's open files — two writes to the page cache, made on the event loop (a few µs each: a hop
 * through the thread pool would cost more than the writes), or from the thread pool for a minute
 * after SLOW_RUN appends in a row each waited on the disk (SLOW_WRITE_MS), so a disk that falls
 * behind never holds the event loop for long. One slow append alone is not the disk: on a busy
 * machine the event loop's thread is sometimes descheduled in the middle of one. A segment is
 * listed once both are written, and a record whose bytes are not all on disk is ignored at start.
 * Whole layer-hours leave, oldest first: by the sweep (every segment of
 * the hour older than the window; catch-up turned off; stream deleted) and, when the volume's free
 * space nears `SKYLARK_MIN_FREE_DISK_BYTES` (docs/behaviour.md §13), across streams — never an
 * hour holding a segment of the live window — with one `stream.error` `catch_up_trimmed` per
 * stream and run. A data directory of the earlier layout (a file per segment, indexed in SQLite)
 * is converted at start (`legacy.ts`).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CatchUpRepo } from '../../base/db/catch-up-repo.js';
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import { segmentPieces, type Segment } from '../../live/media/layer-media.js';
import type { Logger } from '../../base/logger.js';
import type { SegmentEntry } from './hour-block.js';
import { LayerFiles, piecesBytes } from './hour-store.js';
import type { LayerIndex } from './layer-index.js';
import { convertLegacy } from './legacy.js';

/** What the archive is built from. Times in ms, sizes in bytes. */
export interface CatchUpArchiveDeps {
  /** Each stream's `catch_up_hours` (and the earlier layout's index, converted at start). */
  repo: CatchUpRepo;
  /** `<dataDir>/catch-up`. */
  dir: string;
  /** The stream's running broadcast id, or null. */
  broadcastOf(streamId: string): string | null;
  /** The free-space floor (`SKYLARK_MIN_FREE_DISK_BYTES`). */
  minFreeDiskBytes: number;
  /** Reports `stream.error` (here: `catch_up_trimmed`). */
  error(streamId: string, e: { code: string; message: string; [detail: string]: unknown }): void;
  log: Logger;
  now: () => number;
  /** Free bytes of the volume of `dir` (tests give a stand-in); default `statfs`. */
  freeBytes?: (dir: string) => number;
  /** A monotonic clock (ms) timing each append (tests give a stand-in); default: the writes timed where they are made (`appendSegment`). */
  elapsed?: () => number;
  /** How long (ms) finished segments wait to be written together (default WRITE_AFTER_MS; tests give less). */
  writeAfterMs?: number;
}

/** How often the sweep runs (ms). */
export const SWEEP_EVERY_MS = 30_000;
/** Segments of a layer never trimmed for space: the live window and its margin (an hour holding one of the newest this many ms stays). */
const LIVE_GUARD_MS = 5 * 60_000;
/**
 * Finished segments are written together this long (ms) after the first of them was queued: one
 * burst of appends every half second instead of one every 20 ms (100 streams' 2 s segments). The
 * kernel's side of a write made among other work finds nothing in the CPU's caches; in a burst
 * the next ones do (docs/bench/catch-up.md "Written together"). A segment is listed once written,
 * so the archive's newest segment is at most this late; the live window holds it meanwhile, and
 * `close` writes what waits.
 */
export const WRITE_AFTER_MS = 500;
/** Segment writes queued at most (about a minute of 100 layers' 2 s segments): more are dropped and logged. */
const MAX_QUEUE = 3000;
/** A layer's hour files are closed when nothing was appended for this long (ms). */
const IDLE_CLOSE_MS = 60_000;
/** Layers whose hour files are open at most (two descriptors each): beyond, the least recently written are closed. */
const MAX_OPEN_LAYERS = 1000;
/** Synchronous appends longer than this (ms)… */
const SLOW_WRITE_MS = 5;
/** …this many in a row mean the disk is behind… */
const SLOW_RUN = 3;
/** …and appends go through the thread pool (off the event loop) for this long (ms). */
const SLOW_FOR_MS = 60_000;

/** What a stream id or layer name may be to name a directory (no `.`, no `/`). */
const SAFE_NAME = /^[A-Za-z0-9_]{1,64}$/;
const SEGMENT_FILE = /^\d{1,15}\.(?:m4s|ts)$/;
const INIT_FILE = /^init-[0-9a-f]{16}\.mp4$/;

/** A stream's layer being archived. */
interface Watched {
  streamId: string;
  layer: Layer;
  hub: StreamHub;
  /** The newest sequence number handed to the queue. */
  last: number;
  /** Whether the stream id and layer name may name directories (SAFE_NAME): nothing of the layer is kept otherwise. */
  safe: boolean;
}

/** One write: a segment of a layer (and its init section, if not on disk yet). */
interface Job {
  streamId: string;
  layer: string;
  entry: SegmentEntry;
  /** The segment's bytes as the layer holds them (`segmentPieces`: its parts', not joined into a copy). */
  data: readonly Uint8Array[];
  broadcast: string | null;
  init: { file: string; data: Uint8Array } | null;
}

/** Keeps the catch-up window of the streams with catch-up on (see the module comment). */
export class CatchUpArchive {
  private readonly queue: Job[] = [];
  private writing = false;
  /** The timer of the next burst of writes, while segments wait for it. */
  private writeTimer: NodeJS.Timeout | null = null;
  private readonly writeAfterMs: number;
  private readonly sweepTimer: NodeJS.Timeout;
  /** Every layer kept, by stream id then layer name. */
  private readonly streams = new Map<string, Map<string, LayerFiles>>();
  /** Layers written to, least recently first (their hour files may be open). */
  private readonly recent = new Set<LayerFiles>();
  /** Layer-hours naming each broadcast id. */
  private readonly broadcastHours = new Map<string, number>();
  /** Streams whose `catch_up_trimmed` was reported this run. */
  private readonly trimmedReported = new Set<string>();
  /** Broadcast of each hub, once known. */
  private readonly broadcasts = new WeakMap<StreamHub, string>();
  private readonly free: (dir: string) => number;
  private readonly elapsed: (() => number) | undefined;
  private freeAt = 0;
  private freeCached = Infinity;
  /** Until when appends go through the thread pool (ms; see SLOW_WRITE_MS). */
  private slowUntil = 0;
  /** Synchronous appends in a row that took over SLOW_WRITE_MS. */
  private slowRun = 0;
  private closed = false;

  /** Reads the kept layers back (converting the earlier layout first). @throws Error when `dir` cannot be created */
  constructor(private readonly d: CatchUpArchiveDeps) {
    mkdirSync(d.dir, { recursive: true });
    this.free = d.freeBytes ?? freeBytesOf;
    this.elapsed = d.elapsed;
    this.writeAfterMs = d.writeAfterMs ?? WRITE_AFTER_MS;
    this.load();
    convertLegacy(d.repo, d.dir, (streamId, layer) => this.files(streamId, layer), d.log);
    this.sweepTimer = setInterval(() => this.sweep(), SWEEP_EVERY_MS);
    this.sweepTimer.unref();
  }

  /** Reads every kept layer's hours back from the sidecars. */
  private load(): void {
    for (const streamId of readdirSync(this.d.dir)) {
      if (!SAFE_NAME.test(streamId)) continue;
      let layers: string[];
      try {
        layers = readdirSync(path.join(this.d.dir, streamId));
      } catch {
        continue;
      }
      for (const layer of layers) if (SAFE_NAME.test(layer)) this.files(streamId, layer).load();
    }
  }

  /** The files of a stream's layer (made on first use). */
  private files(streamId: string, layer: string): LayerFiles {
    let m = this.streams.get(streamId);
    if (!m) this.streams.set(streamId, (m = new Map()));
    let f = m.get(layer);
    if (!f) m.set(layer, (f = new LayerFiles(path.join(this.d.dir, streamId, layer), streamId, layer, (id, delta) => this.named(id, delta))));
    return f;
  }

  private named(id: string, delta: number): void {
    const n = (this.broadcastHours.get(id) ?? 0) + delta;
    if (n > 0) this.broadcastHours.set(id, n);
    else this.broadcastHours.delete(id);
  }

  /** Archives every layer of `hub` from now on (while its stream's catch-up is on). */
  watch(hub: StreamHub): void {
    for (const layer of hub.layers) {
      const w: Watched = { streamId: hub.streamId, layer, hub, last: layer.nextSequence - 1, safe: SAFE_NAME.test(hub.streamId) && SAFE_NAME.test(layer.name) };
      layer.onChange(() => this.changed(w));
    }
  }

  /** A layer changed: its finished segments not yet queued are queued, when catch-up is on. */
  private changed(w: Watched): void {
    if (this.closed || !w.safe) return;
    const segs = w.layer.segments;
    const newest = segs[segs.length - 1];
    if (newest && newest.sequence > w.last) {
      const last = w.last;
      w.last = newest.sequence;
      if (this.d.repo.hours(w.streamId) <= 0) return;
      let i = segs.length - 1; // the segments are in sequence order: the fresh ones are at the end
      while (i > 0 && segs[i - 1]!.sequence > last) i--;
      for (; i < segs.length; i++) this.enqueue(w, segs[i]!);
    }
    // A layer that ended has its broadcast's last segment: what waits is written now, so the broadcast's playlist is whole once it is over.
    if (w.layer.ended && this.writeTimer !== null) this.writeQueued();
  }

  private enqueue(w: Watched, s: Segment): void {
    if (this.queue.length >= MAX_QUEUE) {
      this.d.log.warn('catch-up write queue full: segment not kept', { streamId: w.streamId, layer: w.layer.name, sequence: s.sequence });
      return;
    }
    const ts = w.layer.o.container !== 'fmp4';
    // The layer's init section is the segment's while their versions agree (it changes only on a new codec configuration).
    const init = !ts && s.initId && w.layer.init && w.layer.initId === s.initId ? { file: `init-${s.initId}.mp4`, data: w.layer.init } : null;
    const data = segmentPieces(s);
    const job: Job = {
      streamId: w.streamId,
      layer: w.layer.name,
      data,
      init,
      broadcast: this.broadcastOf(w),
      entry: {
        sequence: s.sequence,
        startMs: Math.round(s.programDateMs),
        durationMs: Math.round(s.durationMs),
        offset: 0,
        length: piecesBytes(data),
        discontinuity: s.discontinuity,
        discontinuitySequence: s.discontinuitySequence,
        initId: ts ? '' : s.initId,
        ts,
      },
    };
    this.queue.push(job);
    if (!this.writing && this.writeTimer === null) {
      this.writeTimer = setTimeout(this.writeQueued, this.writeAfterMs);
      this.writeTimer.unref();
    }
  }

  /** The burst of writes (see WRITE_AFTER_MS), on its timer or sooner. */
  private readonly writeQueued = (): void => {
    if (this.writeTimer !== null) clearTimeout(this.writeTimer);
    this.writeTimer = null;
    if (!this.writing) this.drain();
  };

  private broadcastOf(w: Watched): string | null {
    let id = this.broadcasts.get(w.hub);
    if (id === undefined) {
      const open = this.d.broadcastOf(w.streamId);
      if (open === null) return null;
      this.broadcasts.set(w.hub, (id = open));
    }
    return id;
  }

  /**
   * Writes the queue in order: in one loop while the disk keeps up (no promise or microtask per
   * segment), and from where an append went to the thread pool once that one is written.
   */
  private drain(): void {
    this.writing = true;
    for (let job = this.queue.shift(); job; job = this.queue.shift()) {
      let pending: Promise<void> | undefined;
      try {
        pending = this.write(job);
      } catch (e) {
        this.notKept(job, e);
      }
      if (pending) {
        void this.after(job, pending);
        return;
      }
    }
    this.writing = false;
    if (this.closed) this.closeFiles();
  }

  /** Goes on draining once an append from the thread pool is written (or failed). */
  private async after(job: Job, pending: Promise<void>): Promise<void> {
    try {
      await pending;
    } catch (e) {
      this.notKept(job, e);
    }
    this.drain();
  }

  private notKept(job: Job, e: unknown): void {
    this.d.log.error('catch-up segment not kept', { streamId: job.streamId, layer: job.layer, sequence: job.entry.sequence, err: (e as Error).message });
  }

  private closeFiles(): void {
    for (const layers of this.streams.values()) for (const f of layers.values()) f.closeWriter();
  }

  /** Appends a job (its names are SAFE_NAME: `Watched.safe`): now (undefined when done), or from the thread pool while the disk is behind (the promise of it). @throws Error from the files */
  private write(job: Job): Promise<void> | undefined {
    if (!this.roomFor(job.entry.length)) {
      this.d.log.warn('catch-up segment not kept: no disk space', { streamId: job.streamId, layer: job.layer, sequence: job.entry.sequence });
      return;
    }
    const f = this.files(job.streamId, job.layer);
    if (job.entry.sequence <= f.index.lastSequence) return; // kept already (numbers only rise: docs/streams.md "One timeline")
    f.makeDir();
    if (job.init && !f.hasInit(job.init.file)) {
      writeFileSync(path.join(f.dir, job.init.file), job.init.data);
      f.initWritten(job.init.file);
    }
    this.recent.delete(f);
    this.recent.add(f);
    if (this.recent.size > MAX_OPEN_LAYERS) {
      const least = this.recent.values().next().value!;
      least.closeWriter();
      this.recent.delete(least);
    }
    const now = this.d.now();
    if (now < this.slowUntil) return f.appendLater(job.entry, job.data, job.broadcast, now);
    // A write to the page cache costs a few µs; one the kernel held back means the disk is behind.
    const t0 = this.elapsed?.() ?? 0;
    const took = f.appendSync(job.entry, job.data, job.broadcast, now);
    const ms = this.elapsed ? this.elapsed() - t0 : took;
    this.slowRun = ms > SLOW_WRITE_MS ? this.slowRun + 1 : 0;
    if (this.slowRun >= SLOW_RUN) {
      this.slowRun = 0;
      this.slowUntil = now + SLOW_FOR_MS;
      this.d.log.warn('catch-up: a segment write waited on the disk; writing from the thread pool for a minute', { ms: Math.round(ms) });
    }
    return undefined;
  }

  /**
   * Whether `bytes` more fit above the free-space floor; if not, the oldest layer-hours of every
   * stream (never one holding a segment of the newest LIVE_GUARD_MS) are deleted until they do.
   */
  private roomFor(bytes: number): boolean {
    const now = this.d.now();
    if (now - this.freeAt > 1000) {
      this.freeCached = this.free(this.d.dir);
      this.freeAt = now;
    }
    let need = this.d.minFreeDiskBytes + bytes - this.freeCached;
    if (need <= 0) {
      this.freeCached -= bytes;
      return true;
    }
    while (need > 0) {
      const oldest = this.oldestTrimmable(now - LIVE_GUARD_MS);
      if (!oldest) break;
      const b = oldest.dropOldest()!;
      need -= b.dataEnd + b.records * 48;
      this.freeCached += b.dataEnd;
      this.reportTrim(oldest.index.streamId);
    }
    this.freeAt = 0; // measure again next time
    return need <= 0;
  }

  /** The layer whose oldest hour started first of all, among those whose every segment started before `beforeMs`. */
  private oldestTrimmable(beforeMs: number): LayerFiles | undefined {
    let best: LayerFiles | undefined;
    for (const layers of this.streams.values()) {
      for (const f of layers.values()) {
        const b = f.index.blocks[0];
        if (b && b.lastStart < beforeMs && (!best || b.firstStart < best.index.blocks[0]!.firstStart)) best = f;
      }
    }
    return best;
  }

  private reportTrim(streamId: string): void {
    if (this.trimmedReported.has(streamId)) return;
    this.trimmedReported.add(streamId);
    this.d.error(streamId, { code: 'catch_up_trimmed', message: 'Free disk space neared the floor: the oldest catch-up segments were deleted.' });
  }

  /**
   * Deletes the layer-hours older than each stream's window (every segment of the hour started
   * before it), and everything of streams whose catch-up is off or that were deleted; closes the
   * files of layers idle for IDLE_CLOSE_MS. Runs every SWEEP_EVERY_MS; returns the segments deleted.
   */
  sweep(): number {
    let n = 0;
    try {
      const now = this.d.now();
      const on = new Map(this.d.repo.enabled().map((s) => [s.id, s.hours]));
      for (const [id, layers] of this.streams) {
        const hours = on.get(id);
        if (hours !== undefined) {
          for (const f of layers.values()) {
            while (f.index.blocks[0] && f.index.blocks[0].lastStart < now - hours * 3_600_000) n += f.dropOldest()!.n;
            f.closeIdle(now - IDLE_CLOSE_MS);
          }
          continue;
        }
        for (const f of layers.values()) {
          n += f.index.size;
          f.drop();
          this.recent.delete(f);
        }
        this.streams.delete(id);
      }
      for (const name of readdirSync(this.d.dir)) if (!on.has(name)) rmSync(path.join(this.d.dir, name), { recursive: true, force: true });
    } catch (e) {
      this.d.log.error('catch-up sweep failed', { err: (e as Error).message });
    }
    return n;
  }

  /** The index of a stream's layer, or undefined when nothing of it is kept. */
  layer(streamId: string, layer: string): LayerIndex | undefined {
    const f = this.streams.get(streamId)?.get(layer);
    return f && f.index.blocks.length > 0 ? f.index : undefined;
  }

  /** The layers the stream has segments of. */
  layers(streamId: string): string[] {
    const out: string[] = [];
    for (const [name, f] of this.streams.get(streamId) ?? []) if (f.index.blocks.length > 0) out.push(name);
    return out;
  }

  /** Bytes of the stream's kept segments (`/stats` `catchUpBytes`). */
  bytes(streamId: string): number {
    let n = 0;
    for (const f of this.streams.get(streamId)?.values() ?? []) n += f.index.bytes;
    return n;
  }

  /** Whether any segment of broadcast `broadcastId` is kept. */
  hasBroadcast(broadcastId: string): boolean {
    return this.broadcastHours.has(broadcastId);
  }

  /**
   * The bytes of a kept object of the stream's layer (`<seq>.m4s|.ts`: read by its offset and
   * length from its layer-hour; `init-<id>.mp4`), or undefined when it is not kept.
   */
  object(streamId: string, layer: string, file: string, sequence: number | null): Uint8Array | undefined {
    if (!SAFE_NAME.test(streamId) || !SAFE_NAME.test(layer)) return undefined;
    const f = this.streams.get(streamId)?.get(layer);
    if (!f) return undefined;
    if (sequence === null) {
      if (!INIT_FILE.test(file)) return undefined;
      try {
        return readFileSync(path.join(f.dir, file));
      } catch {
        return undefined;
      }
    }
    if (!SEGMENT_FILE.test(file)) return undefined;
    const at = f.index.locate(sequence);
    if (!at || (at.block.row(at.i, streamId, layer).ext === 'ts') !== file.endsWith('.ts')) return undefined;
    return f.read(at.block.key, at.block.offset(at.i), at.block.length(at.i));
  }

  /** Memory the in-memory index holds (bytes of records). */
  get indexMemory(): number {
    let n = 0;
    for (const layers of this.streams.values()) for (const f of layers.values()) for (const b of f.index.blocks) n += b.memory;
    return n;
  }

  /** Segments waiting to be written (tests wait for 0). */
  get pending(): number {
    return this.queue.length + (this.writing ? 1 : 0);
  }

  /** Stops the sweep; the segments waiting are written now (or, from the thread pool, finish), then the hours' files are closed. */
  close(): void {
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.writeQueued();
  }
}

/** Free bytes of the volume of `dir` (`statfs`, blocks available to unprivileged users), or Infinity when unknown. */
function freeBytesOf(dir: string): number {
  try {
    const s = statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return Infinity;
  }
}
