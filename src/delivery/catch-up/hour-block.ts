/**
 * One layer-hour of the catch-up archive (docs/behaviour.md "Catch-up radio", "Storage"): the
 * kept segments of one layer whose program date-time falls in one UTC hour, stored as two
 * append-only files in the layer's directory:
 * - `<YYYYMMDDHH>.seg`: the segments' bytes, one after the other;
 * - `<YYYYMMDDHH>.idx`: the sidecar, fixed-size little-endian records of RECORD_BYTES, one per
 *   segment (written after its bytes) and one per broadcast id the hour names (written before its
 *   first segment):
 *
 *   | offset | segment record (kind 1)                      | broadcast record (kind 2)       |
 *   |-------:|----------------------------------------------|---------------------------------|
 *   | 0      | u8 kind                                      | u8 kind                         |
 *   | 1      | u8 flags: 1 discontinuity, 2 MPEG-TS         | u8 0                            |
 *   | 2      | u16 broadcast slot (0xffff: none)            | u16 slot                        |
 *   | 4      | u32 duration (ms, EXTINF)                    | 40 bytes: the id, ASCII, 0-padded |
 *   | 8      | f64 media sequence number                    |                                 |
 *   | 16     | f64 program date-time (ms since the epoch)   |                                 |
 *   | 24     | u32 offset in `.seg`                         |                                 |
 *   | 28     | u32 length (bytes)                           |                                 |
 *   | 32     | u32 discontinuity sequence (RFC 8216 §4.3.3.3) |                               |
 *   | 36     | 8 bytes: fMP4 init section id (16 hex digits; 0 for MPEG-TS) |                 |
 *   | 44     | u32 FNV-1a of bytes 0–43                     | u32 FNV-1a of bytes 0–43        |
 *
 * A record is valid only whole, with its checksum, and (a segment's) with its bytes inside the
 * `.seg` file: what a crash cut short is ignored when the hour is read back (`readHour`). In
 * memory an hour is its segment records as they are on disk (`HourBlock`: RECORD_BYTES a segment,
 * searched by binary search) and its broadcast ids.
 */
import type { CatchUpSegmentRow } from '../../base/db/catch-up-repo.js';

/** Bytes of one sidecar record. */
export const RECORD_BYTES = 48;
const KIND_SEGMENT = 1;
const KIND_BROADCAST = 2;
const FLAG_DISCONTINUITY = 1;
const FLAG_TS = 2;
export const NO_BROADCAST = 0xffff;
/** Longest broadcast id a record holds (ids are `brd_` + 24 characters). */
const MAX_NAME = 40;
/** Broadcast ids one hour names at most (a slot is a u16; 0xffff means none). */
const MAX_NAMES = 0xfffe;

/** The hour key (`YYYYMMDDHH`, UTC) of an instant (ms since the epoch). */
export function hourKeyOf(ms: number): string {
  const hour = Math.floor(ms / 3_600_000);
  if (hour !== lastHour.hour) {
    const iso = new Date(hour * 3_600_000).toISOString();
    lastHour = { hour, key: iso.slice(0, 4) + iso.slice(5, 7) + iso.slice(8, 10) + iso.slice(11, 13) };
  }
  return lastHour.key;
}
/** The last hour `hourKeyOf` named (every segment of the same hour asks for the same key). */
let lastHour = { hour: NaN, key: '' };

/** The sidecar and data file names of hour `key`. */
export const hourFiles = (key: string) => ({ seg: `${key}.seg`, idx: `${key}.idx` });
/** Names of sidecar files (`YYYYMMDDHH.idx`). */
export const SIDECAR = /^(\d{10})\.idx$/;

/** A DataView of the bytes of `b`. */
const viewOf = (b: Buffer): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

/** FNV-1a (32 bit) of `b[0, n)`. */
function fnv(b: Buffer, at: number, n: number): number {
  let h = 0x811c9dc5;
  for (let i = at; i < at + n; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return h >>> 0;
}

/** What a segment record holds (times in ms, sizes in bytes). */
export interface SegmentEntry {
  sequence: number;
  startMs: number;
  durationMs: number;
  offset: number;
  length: number;
  discontinuity: boolean;
  discontinuitySequence: number;
  /** 16 hex digits, or '' (MPEG-TS). */
  initId: string;
  ts: boolean;
}

/**
 * Writes the record of a segment of broadcast slot `slot` at byte `at` of the bytes `v` views
 * (RECORD_BYTES, every one of them set: an init section id that is not 16 hex digits is written up
 * to its first bad pair, then zeros, as `Buffer.write(…, 'hex')` would).
 */
export function writeSegmentRecord(v: DataView, at: number, e: SegmentEntry, slot: number): void {
  v.setUint8(at, KIND_SEGMENT);
  v.setUint8(at + 1, (e.discontinuity ? FLAG_DISCONTINUITY : 0) | (e.ts ? FLAG_TS : 0));
  v.setUint16(at + 2, slot, true);
  v.setUint32(at + 4, e.durationMs, true);
  v.setFloat64(at + 8, e.sequence, true);
  v.setFloat64(at + 16, e.startMs, true);
  v.setUint32(at + 24, e.offset, true);
  v.setUint32(at + 28, e.length, true);
  v.setUint32(at + 32, e.discontinuitySequence, true);
  const id = e.initId;
  let ok = true;
  for (let i = 0; i < 8; i++) {
    const hi: number = ok ? nibble(id.charCodeAt(2 * i)) : -1;
    const lo: number = ok ? nibble(id.charCodeAt(2 * i + 1)) : -1;
    ok = hi >= 0 && lo >= 0;
    v.setUint8(at + 36 + i, ok ? hi * 16 + lo : 0);
  }
  v.setUint32(at + 44, fnvView(v, at, 44), true);
}

/** The value of hex digit `c` (a char code; NaN past the end), or -1. */
function nibble(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/** FNV-1a (32 bit) of bytes `[at, at + n)` of `v`. */
function fnvView(v: DataView, at: number, n: number): number {
  let h = 0x811c9dc5;
  for (let i = at; i < at + n; i++) h = Math.imul(h ^ v.getUint8(i), 0x01000193);
  return h >>> 0;
}

/** The record that gives broadcast id `id` slot `slot` in its hour. */
export function broadcastRecord(id: string, slot: number): Buffer {
  const b = Buffer.alloc(RECORD_BYTES);
  b[0] = KIND_BROADCAST;
  b.writeUInt16LE(slot, 2);
  b.write(id, 4, MAX_NAME, 'latin1');
  b.writeUInt32LE(fnv(b, 0, 44), 44);
  return b;
}

/**
 * A layer-hour in memory: its segment records (RECORD_BYTES each, in media sequence order) and
 * its broadcast ids by slot. `records` counts every record of the sidecar (the next one's place);
 * `dataEnd` is where the next segment's bytes go in `.seg`.
 */
export class HourBlock {
  n = 0;
  private recs: Buffer;
  /** A view of `recs` (its records' fields are read and written through it). */
  private v: DataView;
  readonly names: string[] = [];
  /** Bytes of the hour's segments. */
  bytes = 0;
  dataEnd = 0;
  records = 0;
  /** Deleted (a write in flight must not add to it). */
  gone = false;

  constructor(readonly key: string, capacity = 256) {
    this.recs = Buffer.allocUnsafe(capacity * RECORD_BYTES);
    this.v = viewOf(this.recs);
  }

  seq(i: number): number {
    return this.v.getFloat64(i * RECORD_BYTES + 8, true);
  }
  start(i: number): number {
    return this.v.getFloat64(i * RECORD_BYTES + 16, true);
  }
  duration(i: number): number {
    return this.v.getUint32(i * RECORD_BYTES + 4, true);
  }
  offset(i: number): number {
    return this.v.getUint32(i * RECORD_BYTES + 24, true);
  }
  length(i: number): number {
    return this.v.getUint32(i * RECORD_BYTES + 28, true);
  }
  get firstStart(): number {
    return this.start(0);
  }
  get lastStart(): number {
    return this.start(this.n - 1);
  }

  /**
   * The slot of broadcast `id` in this hour (NO_BROADCAST: none, or no slot left); a slot equal to
   * `names.length` is a new one, whose record (`broadcastRecord`) is written before the segment's.
   */
  slotOf(id: string | null): number {
    if (id === null || id.length > MAX_NAME) return NO_BROADCAST;
    const at = this.names.indexOf(id);
    if (at >= 0) return at;
    return this.names.length >= MAX_NAMES ? NO_BROADCAST : this.names.length;
  }

  /** Adds a broadcast id (its record is on disk). */
  name(id: string): void {
    this.names.push(id);
  }

  /** Adds the segment record at byte `at` of `rec` (its bytes and its record are on disk). */
  push(rec: Buffer, at = 0): void {
    rec.copy(this.recs, this.reserve(), at, at + RECORD_BYTES);
    this.pushReserved();
  }

  /**
   * Room for one more segment record: the byte of `store` where the next one goes (written there
   * before it is on disk, listed only by `pushReserved` once it is; growing the store keeps it).
   */
  reserve(): number {
    if ((this.n + 1) * RECORD_BYTES > this.recs.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.recs.length * 2, RECORD_BYTES));
      this.recs.copy(grown, 0, 0, this.n * RECORD_BYTES);
      this.recs = grown;
      this.v = viewOf(grown);
    }
    return this.n * RECORD_BYTES;
  }

  /** The records in memory, the next one's place (`reserve`) included: written into, never kept. */
  get store(): Buffer {
    return this.recs;
  }

  /** A view of `store` (for `writeSegmentRecord`). */
  get view(): DataView {
    return this.v;
  }

  /** Lists the record written at `reserve()` (its bytes and its record are on disk). */
  pushReserved(): void {
    const at = this.n * RECORD_BYTES;
    this.n++;
    const length = this.v.getUint32(at + 28, true);
    this.bytes += length;
    this.dataEnd = Math.max(this.dataEnd, this.v.getUint32(at + 24, true) + length);
  }

  /** Gives back the unused capacity (a finished hour never grows). */
  shrink(): void {
    if (this.recs.length > this.n * RECORD_BYTES) {
      this.recs = Buffer.from(this.recs.subarray(0, this.n * RECORD_BYTES));
      this.v = viewOf(this.recs);
    }
  }

  /** Memory the records take (bytes). */
  get memory(): number {
    return this.recs.length;
  }

  /** The init section id of segment `i` ('' for MPEG-TS). */
  initOf(i: number): string {
    const o = i * RECORD_BYTES;
    return (this.recs[o + 1]! & FLAG_TS) !== 0 ? '' : this.recs.toString('hex', o + 36, o + 44);
  }

  /** The broadcast id of segment `i`, or null. */
  broadcastOf(i: number): string | null {
    return this.names[this.recs.readUInt16LE(i * RECORD_BYTES + 2)] ?? null;
  }

  /** Segment `i` as a row of the catch-up playlists. */
  row(i: number, streamId: string, layer: string): CatchUpSegmentRow {
    const o = i * RECORD_BYTES;
    const r = this.recs;
    const flags = r[o + 1]!;
    const ts = (flags & FLAG_TS) !== 0;
    return {
      stream_id: streamId,
      layer,
      sequence: r.readDoubleLE(o + 8),
      start_ms: r.readDoubleLE(o + 16),
      duration_ms: r.readUInt32LE(o + 4),
      discontinuity: flags & FLAG_DISCONTINUITY,
      discontinuity_sequence: r.readUInt32LE(o + 32),
      init_id: ts ? '' : r.toString('hex', o + 36, o + 44),
      ext: ts ? 'ts' : 'm4s',
      broadcast_id: this.names[r.readUInt16LE(o + 2)] ?? null,
      bytes: r.readUInt32LE(o + 28),
    };
  }
}

/**
 * Reads a sidecar back into a block: every whole record with a good checksum, a segment only
 * with its bytes inside `.seg` (`segSize`) and above the sequence numbers before it (`after`),
 * up to the first that is not (the tail a crash cut short, and anything after it, is ignored).
 * Returns the block and the sidecar bytes that are valid (the rest is to be cut off).
 */
export function readHour(key: string, idx: Buffer, segSize: number, after: number): { block: HourBlock; validBytes: number } {
  const whole = Math.floor(idx.length / RECORD_BYTES);
  const block = new HourBlock(key, Math.max(1, whole));
  let last = after;
  let i = 0;
  for (; i < whole; i++) {
    const o = i * RECORD_BYTES;
    if (fnv(idx, o, 44) !== idx.readUInt32LE(o + 44)) break;
    const kind = idx[o]!;
    if (kind === KIND_BROADCAST) {
      if (idx.readUInt16LE(o + 2) !== block.names.length) break;
      const end = idx.indexOf(0, o + 4);
      block.name(idx.toString('latin1', o + 4, end < 0 || end > o + 4 + MAX_NAME ? o + 4 + MAX_NAME : end));
      continue;
    }
    if (kind !== KIND_SEGMENT) break;
    const rec = idx.subarray(o, o + RECORD_BYTES);
    if (rec.readUInt32LE(24) + rec.readUInt32LE(28) > segSize) break;
    const seq = rec.readDoubleLE(8);
    if (seq <= last) continue; // a repeat (a conversion cut short and run again): the first one stands
    last = seq;
    block.push(rec);
  }
  block.records = i;
  block.shrink();
  return { block, validBytes: i * RECORD_BYTES };
}
