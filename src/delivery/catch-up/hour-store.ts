/**
 * The catch-up archive's files of one layer (docs/behaviour.md "Catch-up radio", "Storage"): the
 * layer-hours under `<dataDir>/catch-up/<stream>/<layer>/` (`hour-block.ts` has the format) and
 * the fMP4 init sections beside them (`init-<id>.mp4`). `LayerFiles` reads them back at start,
 * keeps the current hour's two files open for appending (a segment is one `write` of its bytes at
 * the known end of `.seg`, then one of its record at the known end of `.idx`), reads a segment's
 * bytes back by (offset, length), and deletes whole hours.
 */
import { closeSync, constants, existsSync, ftruncateSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, write, writev } from 'node:fs';
import path from 'node:path';
import { appendSegment } from '../../native/file-append.js';
import { broadcastRecord, HourBlock, hourFiles, hourKeyOf, readHour, RECORD_BYTES, SIDECAR, writeSegmentRecord, type SegmentEntry } from './hour-block.js';
import { LayerIndex } from './layer-index.js';

/** Opened for writing at known offsets (not O_APPEND: a torn tail is written over). */
const WRITE = constants.O_WRONLY | constants.O_CREAT;

/** Writes `data` at `position` of `fd` (all of it), off the event loop. */
function writeAt(fd: number, data: Uint8Array, position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (done: number): void => {
      write(fd, data, done, data.byteLength - done, position + done, (err, n) => {
        if (err) reject(err);
        else if (done + n < data.byteLength) step(done + n);
        else resolve();
      });
    };
    step(0);
  });
}

/** What is left of `pieces` after their first `n` bytes were written. */
function unwritten(pieces: readonly Uint8Array[], n: number): Uint8Array[] {
  let i = 0;
  while (i < pieces.length && n >= pieces[i]!.byteLength) n -= pieces[i++]!.byteLength;
  return i < pieces.length ? [pieces[i]!.subarray(n), ...pieces.slice(i + 1)] : [];
}

/** Writes `pieces` one after the other at `position` of `fd` (all of them), off the event loop. */
function writevAt(fd: number, pieces: readonly Uint8Array[], position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (left: Uint8Array[], at: number): void => {
      if (left.length === 0) return resolve();
      writev(fd, left, at, (err, n) => (err ? reject(err) : step(unwritten(left, n), at + n)));
    };
    step(pieces.slice(), position);
  });
}

/** The hour being appended to: its block and its two open files. */
interface Writer {
  block: HourBlock;
  seg: number;
  idx: number;
  usedAt: number;
}

/** One layer's files and index (see the module comment). */
export class LayerFiles {
  readonly index: LayerIndex;
  private writer: Writer | null = null;
  /** Init sections known to be on disk. */
  private readonly inits = new Set<string>();
  /** Deleted (catch-up off, stream gone): a write in flight must not add to it. */
  gone = false;
  private made = false;

  /** `named(id, ±1)`: an hour now names broadcast `id` (+1), or one that did is deleted (-1). */
  constructor(readonly dir: string, streamId: string, layer: string, private readonly named: (id: string, delta: number) => void = () => {}) {
    this.index = new LayerIndex(streamId, layer);
  }

  /**
   * Reads the layer's hours back (oldest first): records a crash cut short are ignored and cut
   * off the sidecar; an hour with no valid segment is deleted.
   */
  load(): void {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return;
    }
    for (const f of names.filter((n) => SIDECAR.test(n)).sort()) {
      const key = SIDECAR.exec(f)![1]!;
      const files = hourFiles(key);
      const idxPath = path.join(this.dir, files.idx);
      const segPath = path.join(this.dir, files.seg);
      const idx = readFileSync(idxPath);
      const segSize = existsSync(segPath) ? fstatSize(segPath) : 0;
      const { block, validBytes } = readHour(key, idx, segSize, this.index.lastSequence);
      if (block.n === 0) {
        rmSync(idxPath, { force: true });
        rmSync(segPath, { force: true });
        continue;
      }
      if (validBytes < idx.length) truncate(idxPath, validBytes);
      this.index.blocks.push(block);
      for (const n of block.names) this.named(n, 1);
    }
    for (const n of names) if (n.startsWith('init-')) this.inits.add(n);
    this.made = true;
  }

  /** Makes the layer's directory (once). @throws Error when it cannot be made */
  makeDir(): void {
    if (this.made) return;
    mkdirSync(this.dir, { recursive: true });
    this.made = true;
  }

  /** Whether init section file `name` is on disk. */
  hasInit(name: string): boolean {
    return this.inits.has(name);
  }
  /** Notes that init section file `name` is on disk. */
  initWritten(name: string): void {
    this.inits.add(name);
  }

  /**
   * The hour the next segment goes to: the hour of its program date-time (never an hour before the
   * newest kept: a clock set back appends to the newest), its files opened on first use.
   * @throws Error when the files cannot be opened
   */
  private writerFor(hourKey: string, now: number): Writer {
    const newest = this.index.blocks[this.index.blocks.length - 1];
    const key = newest && newest.key > hourKey ? newest.key : hourKey;
    let w = this.writer;
    if (!w || w.block.key !== key || w.block.gone) {
      this.closeWriter();
      const block = newest?.key === key ? newest : new HourBlock(key);
      const files = hourFiles(key);
      const seg = openSync(path.join(this.dir, files.seg), WRITE);
      let idx: number;
      try {
        idx = openSync(path.join(this.dir, files.idx), WRITE);
      } catch (e) {
        closeSync(seg);
        throw e;
      }
      w = this.writer = { block, seg, idx, usedAt: now };
    }
    w.usedAt = now;
    return w;
  }

  /**
   * Appends segment `e` (its `offset` and `length` are set here) of broadcast `broadcast` to the
   * hour of its program date-time, now: its bytes (`data`, in pieces written one after the other)
   * at the end of `.seg`, then its record — after a broadcast record when the hour does not name
   * it yet — at the end of `.idx`, in one native call (two `pwrite`s); then it is listed. The
   * record is made in its place in the hour's in-memory records: no buffer of its own. Returns the
   * time the two writes took (ms).
   * @throws Error when the files cannot be opened or written, or the hour is full (4 GiB)
   */
  appendSync(e: SegmentEntry, data: readonly Uint8Array[], broadcast: string | null, now: number): number {
    const w = this.writerFor(hourKeyOf(e.startMs), now);
    const b = w.block;
    const at = this.record(b, e, data);
    const slot = b.slotOf(broadcast);
    const head = slot === b.names.length ? broadcastRecord(broadcast!, slot) : null;
    writeSegmentRecord(b.view, at, e, slot);
    const ms = appendSegment(w.seg, data, e.offset, w.idx, head, b.store, at, RECORD_BYTES, b.records * RECORD_BYTES);
    this.commit(b, head ? broadcast : null);
    return ms;
  }

  /**
   * `appendSync` from libuv's thread pool (off the event loop: for a disk that fell behind); one
   * append at a time per archive (the next one waits for this one's promise).
   * @throws Error (rejects) as `appendSync`
   */
  async appendLater(e: SegmentEntry, data: readonly Uint8Array[], broadcast: string | null, now: number): Promise<void> {
    const w = this.writerFor(hourKeyOf(e.startMs), now);
    const b = w.block;
    const slot = b.slotOf(broadcast);
    const head = slot === b.names.length ? broadcastRecord(broadcast!, slot) : null;
    const at = this.record(b, e, data);
    writeSegmentRecord(b.view, at, e, slot);
    const record = Buffer.from(b.store.subarray(at, at + RECORD_BYTES)); // the store may grow meanwhile
    await writevAt(w.seg, data, e.offset);
    await writeAt(w.idx, head ? Buffer.concat([head, record]) : record, b.records * RECORD_BYTES);
    record.copy(b.store, b.reserve());
    this.commit(b, head ? broadcast : null);
  }

  /** Sets `e`'s place in hour `b` (offset and length of `data`); returns the byte of `b.store` its record goes to. @throws Error when the hour is full */
  private record(b: HourBlock, e: SegmentEntry, data: readonly Uint8Array[]): number {
    const bytes = piecesBytes(data);
    if (b.dataEnd + bytes > 0xffff_ffff) throw new Error('the layer-hour file is full (4 GiB)');
    e.offset = b.dataEnd;
    e.length = bytes;
    return b.reserve();
  }

  /** Lists the segment record written at `b.reserve()` (after the record naming `newName`, if not null). */
  private commit(b: HourBlock, newName: string | null): void {
    if (b.gone || this.gone) return;
    if (newName !== null) {
      b.name(newName);
      this.named(newName, 1);
    }
    b.records += newName !== null ? 2 : 1;
    b.pushReserved();
    const blocks = this.index.blocks;
    if (blocks[blocks.length - 1] !== b) {
      blocks[blocks.length - 1]?.shrink();
      blocks.push(b);
    }
  }

  /** Reads `length` bytes at `offset` of hour `key`'s `.seg`, or undefined. */
  read(key: string, offset: number, length: number): Uint8Array | undefined {
    let fd: number;
    try {
      fd = openSync(path.join(this.dir, hourFiles(key).seg), 'r');
    } catch {
      return undefined;
    }
    try {
      const out = Buffer.allocUnsafe(length);
      for (let done = 0; done < length; ) {
        const n = readSync(fd, out, done, length - done, offset + done);
        if (n === 0) return undefined;
        done += n;
      }
      return out;
    } catch {
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  /** Deletes the oldest hour (from the index first, then its files); returns it. */
  dropOldest(): HourBlock | undefined {
    const b = this.index.blocks.shift();
    if (!b) return undefined;
    b.gone = true;
    for (const n of b.names) this.named(n, -1);
    if (this.writer?.block === b) this.closeWriter();
    const files = hourFiles(b.key);
    rmSync(path.join(this.dir, files.idx), { force: true });
    rmSync(path.join(this.dir, files.seg), { force: true });
    return b;
  }

  /** Closes the current hour's files when unused since `before` (ms). */
  closeIdle(before: number): void {
    if (this.writer && this.writer.usedAt < before) this.closeWriter();
  }

  /** Forgets every hour (the directory is deleted by the caller); a write in flight adds nothing. */
  drop(): void {
    this.gone = true;
    this.closeWriter();
    for (const b of this.index.blocks) {
      b.gone = true;
      for (const n of b.names) this.named(n, -1);
    }
    this.index.blocks.length = 0;
  }

  /** Closes the current hour's files. */
  closeWriter(): void {
    const w = this.writer;
    if (!w) return;
    this.writer = null;
    closeSync(w.seg);
    closeSync(w.idx);
  }
}

/** Bytes of `pieces` together. */
export function piecesBytes(pieces: readonly Uint8Array[]): number {
  let n = 0;
  for (const p of pieces) n += p.byteLength;
  return n;
}

function fstatSize(p: string): number {
  const fd = openSync(p, 'r');
  try {
    return fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
}

function truncate(p: string, bytes: number): void {
  const fd = openSync(p, 'r+');
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}
