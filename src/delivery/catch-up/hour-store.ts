/**
 * The catch-up archive's files of one layer (docs/behaviour.md "Catch-up radio", "Storage"): the
 * layer-hours under `<dataDir>/catch-up/<stream>/<layer>/` (`hour-block.ts` has the format) and
 * the fMP4 init sections beside them (`init-<id>.mp4`). `LayerFiles` reads them back at start,
 * keeps the current hour's two files open for appending (a segment is one `write` of its bytes at
 * the known end of `.seg`, then one of its record at the known end of `.idx`), reads a segment's
 * bytes back by (offset, length), and deletes whole hours.
 */
import { closeSync, constants, existsSync, ftruncateSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, write, writeSync, writev, writevSync } from 'node:fs';
import path from 'node:path';
import { HourBlock, hourFiles, hourKeyOf, readHour, RECORD_BYTES, SIDECAR, writeSegmentRecord, type SegmentEntry } from './hour-block.js';
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

/** Writes `data` at `position` of `fd` (all of it), now. */
function writeAtSync(fd: number, data: Uint8Array, position: number): void {
  for (let done = 0; done < data.byteLength; ) done += writeSync(fd, data, done, data.byteLength - done, position + done);
}

/** What is left of `pieces` after their first `n` bytes were written. */
function unwritten(pieces: readonly Uint8Array[], n: number): Uint8Array[] {
  let i = 0;
  while (i < pieces.length && n >= pieces[i]!.byteLength) n -= pieces[i++]!.byteLength;
  return i < pieces.length ? [pieces[i]!.subarray(n), ...pieces.slice(i + 1)] : [];
}

/** Writes `pieces` one after the other at `position` of `fd` (all of them, one `pwritev` each time), now. */
function writevAtSync(fd: number, pieces: readonly Uint8Array[], position: number): void {
  for (let left = pieces.slice(); left.length > 0; ) {
    const n = writevSync(fd, left, position);
    position += n;
    left = unwritten(left, n);
  }
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

/** What one append writes: the segment's bytes, then its record (after a broadcast record, when the hour names a new one). */
export interface Append {
  block: HourBlock;
  /** The segment's bytes, in pieces written one after the other (`bytes` in all). */
  data: readonly Uint8Array[];
  bytes: number;
  offset: number;
  records: Buffer;
  /** The broadcast id the records name first, or null. */
  newName: string | null;
  seg: number;
  idx: number;
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
   * Where the next segment goes: the hour of its program date-time (never an hour before the
   * newest kept: a clock set back appends to the newest), its files opened on first use.
   * @throws Error when the files cannot be opened
   */
  prepare(hourKey: string, data: readonly Uint8Array[], bytes: number, record: (block: HourBlock, offset: number) => { records: Buffer; newName: string | null }, now: number): Append {
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
    const offset = w.block.dataEnd;
    if (offset + bytes > 0xffff_ffff) throw new Error('the layer-hour file is full (4 GiB)');
    const { records, newName } = record(w.block, offset);
    return { block: w.block, data, bytes, offset, records, newName, seg: w.seg, idx: w.idx };
  }

  /**
   * The append of segment `e` (its `offset` and `length` are set here) of broadcast `broadcast` to
   * the hour of its program date-time: a broadcast record first when the hour does not name it yet.
   * The records are a slice of Node's shared buffer pool: no buffer of their own per segment.
   * @throws Error when the files cannot be opened or the hour is full
   */
  segment(e: SegmentEntry, data: readonly Uint8Array[], broadcast: string | null, now: number): Append {
    const bytes = piecesBytes(data);
    return this.prepare(hourKeyOf(e.startMs), data, bytes, (block, offset) => {
      const { slot, record } = block.slotOf(broadcast);
      e.offset = offset;
      e.length = bytes;
      const records = Buffer.allocUnsafe(record ? 2 * RECORD_BYTES : RECORD_BYTES);
      if (record) record.copy(records, 0);
      writeSegmentRecord(records, records.length - RECORD_BYTES, e, slot);
      return { records, newName: record ? broadcast : null };
    }, now);
  }

  /** Writes an append's bytes and records (off the event loop), then indexes it. @throws Error from the writes */
  async write(a: Append): Promise<void> {
    await writevAt(a.seg, a.data, a.offset);
    await writeAt(a.idx, a.records, a.block.records * RECORD_BYTES);
    this.commit(a);
  }

  /** Writes an append's bytes and records now, then indexes it. @throws Error from the writes */
  writeSync(a: Append): void {
    if (a.data.length === 1) writeAtSync(a.seg, a.data[0]!, a.offset);
    else writevAtSync(a.seg, a.data, a.offset);
    writeAtSync(a.idx, a.records, a.block.records * RECORD_BYTES);
    this.commit(a);
  }

  private commit(a: Append): void {
    const b = a.block;
    if (b.gone || this.gone) return;
    if (a.newName !== null) {
      b.name(a.newName);
      this.named(a.newName, 1);
    }
    b.records += a.records.length / RECORD_BYTES;
    b.push(a.records, a.records.length - RECORD_BYTES);
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
