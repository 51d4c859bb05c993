/**
 * The node's disk reserve (docs/behaviour.md §13): a file of `bytes` real (not sparse) blocks in
 * the data dir, made at start while the volume has room (one left by an earlier run is kept), and deleted when SQLite reports a full
 * disk (`SQLITE_FULL`), so the write that says so — a `stream.error` `recording_stopped`, a
 * `stream.ended` — still commits. It is made again once the volume has `bytes` more than the
 * free-space floor (`SKYLARK_MIN_FREE_DISK_BYTES`), checked at most once every
 * `RESTORE_EVERY_MS` when asked (`maybeRestore`), so the reserve itself never pushes the volume
 * under the floor.
 */
import { closeSync, existsSync, openSync, rmSync, statSync, statfsSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from './logger.js';

/** The reserve's file name in the data dir. */
export const DISK_RESERVE_FILE = 'disk-reserve';
/** Size of the reserve (bytes): thousands of event rows and their WAL frames. */
export const DISK_RESERVE_BYTES = 16 * 1024 * 1024;
/** The reserve is looked at again at most this often (ms) while it is released. */
export const RESTORE_EVERY_MS = 5000;
const CHUNK = Buffer.alloc(1024 * 1024, 0x52); // not zeros: no filesystem may keep them sparse or compressed

/** Holds and releases the reserve file; see the file's comment. */
export class DiskReserve {
  private held = false;
  private lastTry = -Infinity;

  /**
   * @param file the reserve file (in the data dir, on the database's volume)
   * @param minFreeBytes the free-space floor (bytes) the reserve must leave
   */
  constructor(
    private readonly file: string,
    private readonly minFreeBytes: number,
    private readonly log: Logger,
    private readonly bytes = DISK_RESERVE_BYTES,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether the reserve file is in place. */
  get isHeld(): boolean {
    return this.held;
  }

  /** Makes the reserve when the volume has room for it above the floor; never throws. @returns whether it is held */
  ensure(): boolean {
    if (this.held) return true;
    this.lastTry = this.now();
    try {
      // A reserve left by an earlier run is taken over as it is.
      const existing = existsSync(this.file) ? statSync(this.file).size : 0;
      if (existing === this.bytes) return (this.held = true);
      const s = statfsSync(path.dirname(this.file));
      if (s.bavail * s.bsize + existing < this.minFreeBytes + this.bytes) return false;
      const fd = openSync(this.file, 'w', 0o600);
      try {
        for (let n = 0; n < this.bytes; n += CHUNK.length) writeSync(fd, CHUNK, 0, Math.min(CHUNK.length, this.bytes - n));
      } finally {
        closeSync(fd);
      }
      this.held = true;
      return true;
    } catch (e) {
      rmSync(this.file, { force: true });
      this.log.warn('the disk reserve could not be made', { file: this.file, err: (e as Error).message });
      return false;
    }
  }

  /** Deletes the reserve (SQLite found the disk full): its blocks are free for the node's own writes. @returns whether there was one */
  release(): boolean {
    if (!this.held) return false;
    this.held = false;
    this.lastTry = this.now();
    try {
      rmSync(this.file, { force: true });
    } catch (e) {
      this.log.error('the disk reserve could not be released', { file: this.file, err: (e as Error).message });
      return false;
    }
    this.log.warn('the data volume is full: the disk reserve was released for the node\'s own records', { file: this.file, bytes: this.bytes });
    return true;
  }

  /** Makes the reserve again if it is released and `RESTORE_EVERY_MS` passed since the last try. */
  maybeRestore(): void {
    if (this.held || this.now() - this.lastTry < RESTORE_EVERY_MS) return;
    if (this.ensure()) this.log.info('the disk reserve is made again', { file: this.file });
  }
}
