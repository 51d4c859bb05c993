/**
 * The catch-up archive (docs/behaviour.md "Catch-up radio"): while a stream's `catchUp.hours` > 0,
 * every finished segment of every layer of its hubs is written to
 * `<dataDir>/catch-up/<streamId>/<layer>/<sequence>.<m4s|ts>` (fMP4 init sections beside them as
 * `init-<id>.mp4`, named by their content like the live ones) and indexed by time in SQLite
 * (`CatchUpRepo`). The names are the live segments' names: a media sequence number names one
 * segment of a layer for ever, also across restarts (docs/streams.md "One timeline"), so an archive
 * object is the very object a live player or an edge may already hold.
 *
 * Writes go through one queue, off the audio path (`fs.promises`), indexed once the file is
 * complete: a crash leaves at most an unindexed file, never an index row without its file.
 * Segments leave by the sweep (older than the window; catch-up turned off; stream deleted) and,
 * when the volume's free space nears `SKYLARK_MIN_FREE_DISK_BYTES` (docs/behaviour.md §13), oldest
 * first — never a segment of the live window — with one `stream.error` `catch_up_trimmed` per
 * stream and run.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, statfsSync, unlinkSync } from 'node:fs';
import { mkdir, writeFile, access } from 'node:fs/promises';
import path from 'node:path';
import type { CatchUpRepo, CatchUpSegmentRow } from '../../base/db/catch-up-repo.js';
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import type { Segment } from '../../live/media/layer-media.js';
import type { Logger } from '../../base/logger.js';

/** What the archive is built from. Times in ms, sizes in bytes. */
export interface CatchUpArchiveDeps {
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
}

/** Longest a written segment waits to be indexed (ms): the rows of that time go in one transaction. */
const INDEX_EVERY_MS = 1000;
/** How often the sweep runs (ms). */
export const SWEEP_EVERY_MS = 30_000;
/** Rows a sweep or a trim handles per statement. */
const BATCH = 500;
/** Segments of a layer never trimmed for space: the live window and its margin (the newest this many seconds). */
const LIVE_GUARD_MS = 5 * 60_000;
/** Segment writes queued at most (about a minute of 100 layers' 2 s segments): more are dropped and logged. */
const MAX_QUEUE = 3000;

/** What a stream id or layer name may be to name a directory (no `.`, no `/`). */
const SAFE_NAME = /^[A-Za-z0-9_]{1,64}$/;

/** A stream's layer being archived. */
interface Watched {
  streamId: string;
  layer: Layer;
  hub: StreamHub;
  /** The newest sequence number handed to the queue. */
  last: number;
}

/** One write: the segment's file, its init section's (if not written yet) and its index row. */
interface Job {
  dir: string;
  file: string;
  data: Uint8Array;
  init: { file: string; data: Uint8Array } | null;
  row: CatchUpSegmentRow;
}

/** Keeps the catch-up window of the streams with catch-up on (see the module comment). */
export class CatchUpArchive {
  private readonly queue: Job[] = [];
  private writing = false;
  private readonly sweepTimer: NodeJS.Timeout;
  /** Rows of segments already on disk, indexed together at most INDEX_EVERY_MS later (one transaction). */
  private unindexed: CatchUpSegmentRow[] = [];
  private indexTimer: NodeJS.Timeout | null = null;
  /** Streams whose `catch_up_trimmed` was reported this run. */
  private readonly trimmedReported = new Set<string>();
  /** Broadcast of each hub, once known. */
  private readonly broadcasts = new WeakMap<StreamHub, string>();
  /** Layer directories made and init sections written (a mkdir and an existence check per segment cost more than its write). */
  private readonly made = new Set<string>();
  private readonly free: (dir: string) => number;
  private freeAt = 0;
  private freeCached = Infinity;
  private closed = false;

  constructor(private readonly d: CatchUpArchiveDeps) {
    mkdirSync(d.dir, { recursive: true });
    this.free = d.freeBytes ?? freeBytesOf;
    this.sweepTimer = setInterval(() => this.sweep(), SWEEP_EVERY_MS);
    this.sweepTimer.unref();
  }

  /** Archives every layer of `hub` from now on (while its stream's catch-up is on). */
  watch(hub: StreamHub): void {
    for (const layer of hub.layers) {
      const w: Watched = { streamId: hub.streamId, layer, hub, last: layer.nextSequence - 1 };
      layer.onChange(() => this.changed(w));
    }
  }

  /** A layer changed: its finished segments not yet queued are queued, when catch-up is on. */
  private changed(w: Watched): void {
    const segs = w.layer.segments;
    const newest = segs[segs.length - 1];
    if (this.closed || !newest || newest.sequence <= w.last) return;
    const fresh = segs.filter((s) => s.sequence > w.last);
    w.last = newest.sequence;
    if (this.d.repo.hours(w.streamId) <= 0) return;
    for (const s of fresh) this.enqueue(w, s);
  }

  private enqueue(w: Watched, s: Segment): void {
    if (this.queue.length >= MAX_QUEUE) {
      this.d.log.warn('catch-up write queue full: segment not kept', { streamId: w.streamId, layer: w.layer.name, sequence: s.sequence });
      return;
    }
    const ext = w.layer.o.container === 'fmp4' ? 'm4s' : 'ts';
    const dir = path.join(this.d.dir, w.streamId, w.layer.name);
    const data = s.data;
    // The layer's init section is the segment's while their versions agree (it changes only on a new codec configuration).
    const init = ext === 'm4s' && s.initId && w.layer.init && w.layer.initId === s.initId ? { file: `init-${s.initId}.mp4`, data: w.layer.init } : null;
    this.queue.push({
      dir,
      file: `${s.sequence}.${ext}`,
      data,
      init,
      row: {
        stream_id: w.streamId,
        layer: w.layer.name,
        sequence: s.sequence,
        start_ms: Math.round(s.programDateMs),
        duration_ms: Math.round(s.durationMs),
        discontinuity: s.discontinuity ? 1 : 0,
        discontinuity_sequence: s.discontinuitySequence,
        init_id: s.initId,
        ext,
        broadcast_id: this.broadcastOf(w),
        bytes: data.byteLength,
      },
    });
    if (!this.writing) void this.drain();
  }

  private broadcastOf(w: Watched): string | null {
    let id = this.broadcasts.get(w.hub);
    if (id === undefined) {
      const open = this.d.broadcastOf(w.streamId);
      if (open === null) return null;
      this.broadcasts.set(w.hub, (id = open));
    }
    return id;
  }

  /** Writes the queue in order; each file complete before its row is indexed. */
  private async drain(): Promise<void> {
    this.writing = true;
    try {
      for (let job = this.queue.shift(); job; job = this.queue.shift()) {
        try {
          await this.write(job);
        } catch (e) {
          this.d.log.error('catch-up segment not kept', { streamId: job.row.stream_id, layer: job.row.layer, sequence: job.row.sequence, err: (e as Error).message });
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async write(job: Job): Promise<void> {
    if (!this.roomFor(job.data.byteLength)) {
      this.d.log.warn('catch-up segment not kept: no disk space', { streamId: job.row.stream_id, layer: job.row.layer, sequence: job.row.sequence });
      return;
    }
    if (!this.made.has(job.dir)) {
      await mkdir(job.dir, { recursive: true });
      this.made.add(job.dir);
    }
    if (job.init) {
      const initPath = path.join(job.dir, job.init.file);
      if (!this.made.has(initPath)) {
        if (!(await exists(initPath))) await writeFile(initPath, job.init.data);
        this.made.add(initPath);
      }
    }
    await writeFile(path.join(job.dir, job.file), job.data);
    this.unindexed.push(job.row);
    if (this.closed) this.indexWritten();
    else this.indexTimer ??= setTimeout(() => this.indexWritten(), INDEX_EVERY_MS).unref();
  }

  /**
   * Indexes the segments written since the last call, in one transaction: a commit per segment
   * would write the table's and its three indexes' pages to the WAL (and again at the checkpoint)
   * for every 2 s of every layer — more bytes than the audio itself with 100 streams.
   */
  private indexWritten(): void {
    if (this.indexTimer) clearTimeout(this.indexTimer);
    this.indexTimer = null;
    const rows = this.unindexed;
    if (rows.length === 0) return;
    this.unindexed = [];
    try {
      this.d.repo.insertMany(rows);
    } catch (e) {
      this.d.log.error('catch-up segments not indexed', { segments: rows.length, err: (e as Error).message });
    }
  }

  /**
   * Whether `bytes` more fit above the free-space floor; if not, the oldest catch-up segments of
   * every stream (never the newest LIVE_GUARD_MS) are deleted until they do.
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
    this.indexWritten(); // what is on disk is what may go: the trim reads the index
    while (need > 0) {
      const rows = this.d.repo.oldest(now - LIVE_GUARD_MS, BATCH);
      if (rows.length === 0) break;
      for (const r of rows) {
        this.remove(r);
        need -= r.bytes;
        this.freeCached += r.bytes;
        this.reportTrim(r.stream_id);
        if (need <= 0) break;
      }
    }
    this.freeAt = 0; // measure again next time
    return need <= 0;
  }

  private reportTrim(streamId: string): void {
    if (this.trimmedReported.has(streamId)) return;
    this.trimmedReported.add(streamId);
    this.d.error(streamId, { code: 'catch_up_trimmed', message: 'Free disk space neared the floor: the oldest catch-up segments were deleted.' });
  }

  /** Deletes one kept segment (its index row, then its file). */
  private remove(r: CatchUpSegmentRow): void {
    this.d.repo.delete(r.stream_id, r.layer, r.sequence);
    try {
      unlinkSync(path.join(this.d.dir, r.stream_id, r.layer, `${r.sequence}.${r.ext}`));
    } catch {
      // Already gone.
    }
  }

  /**
   * Deletes what is older than each stream's window, and everything of streams whose catch-up is
   * off or that were deleted. Runs every SWEEP_EVERY_MS; returns the segments deleted.
   */
  sweep(): number {
    let n = 0;
    try {
      const now = this.d.now();
      const on = this.d.repo.enabled();
      for (const { id, hours } of on) {
        for (const layer of this.d.repo.layers(id)) {
          for (let rows = this.d.repo.olderThan(id, layer, now - hours * 3_600_000, BATCH); rows.length > 0; rows = this.d.repo.olderThan(id, layer, now - hours * 3_600_000, BATCH)) {
            for (const r of rows) this.remove(r);
            n += rows.length;
          }
        }
      }
      for (const id of this.d.repo.orphans()) this.d.repo.forget(id);
      const keep = new Set(on.map((s) => s.id));
      for (const name of readdirSync(this.d.dir)) {
        if (keep.has(name)) continue;
        const dir = path.join(this.d.dir, name);
        rmSync(dir, { recursive: true, force: true });
        for (const p of this.made) if (p.startsWith(dir + path.sep)) this.made.delete(p);
      }
    } catch (e) {
      this.d.log.error('catch-up sweep failed', { err: (e as Error).message });
    }
    return n;
  }

  /**
   * The bytes of a kept object of the stream's layer (`<seq>.m4s|.ts`, `init-<id>.mp4`), or
   * undefined when it is not kept. Segment names are checked against the index (a file left by a
   * crash before its row was written is not served).
   */
  object(streamId: string, layer: string, file: string, sequence: number | null): Uint8Array | undefined {
    if (!SAFE_NAME.test(streamId) || !SAFE_NAME.test(layer)) return undefined;
    if (sequence !== null && !this.d.repo.get(streamId, layer, sequence)) return undefined;
    try {
      return readFileSync(path.join(this.d.dir, streamId, layer, file));
    } catch {
      return undefined;
    }
  }

  /** Segments waiting to be written or indexed (tests wait for 0). */
  get pending(): number {
    return this.queue.length + (this.writing ? 1 : 0) + this.unindexed.length;
  }

  /** Stops the sweep and indexes what is written; queued writes finish (and are indexed as they land). */
  close(): void {
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.indexWritten();
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

async function exists(p: string): Promise<boolean> {
  try {
    await access(p);
    return true;
  } catch {
    return false;
  }
}
