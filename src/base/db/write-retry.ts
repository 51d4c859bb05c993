/**
 * Writes that must happen even when SQLite cannot take them at once (docs/behaviour.md §13: "a failing
 * SQLite write — locked, full disk, I/O error — on the live path is logged, retried where it is
 * safe, and never ends the process or another stream"). A write is a function that runs one
 * transaction; it is safe to retry because a failed transaction left nothing behind. Writes under
 * one key (a stream) run in the order given: a later one waits behind an earlier one that failed.
 *
 * A write that fails because the disk is full (`SQLITE_FULL`) releases the node's disk reserve
 * (src/base/disk-reserve.ts) and is tried again at once, so the event that says what happened is
 * not lost to the full disk; the reserve is made again once the volume has room (docs/behaviour.md §13).
 *
 * While a write is tried from here, the connection's busy timeout is lowered to
 * RETRY_BUSY_TIMEOUT_MS, so that a lock held by another process stalls the event loop (every
 * stream, HTTP) for at most that long per attempt instead of the connection's default.
 */
import type { Database } from './database.js';
import type { Logger } from '../logger.js';
import type { Limits } from '../limits/limits.js';
import { RESTORE_EVERY_MS, type DiskReserve } from '../disk-reserve.js';

/** Busy timeout (ms) while a retried write is attempted. */
export const RETRY_BUSY_TIMEOUT_MS = 20;
/** First retry after this (ms); doubled up to MAX_RETRY_DELAY_MS. */
const FIRST_RETRY_MS = 100;
const MAX_RETRY_DELAY_MS = 5000;
/** Writes waiting per key at most (older ones are dropped with an error line beyond). */
const MAX_PENDING_PER_KEY = 256;
/** Keys with waiting writes at most. */
const MAX_KEYS = 10_000;

/** SQLite result codes of a write that may succeed later (better-sqlite3 `SqliteError.code`). */
export function isTransientDbError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') || code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR') || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_PROTOCOL';
}

interface Pending {
  what: string;
  write: () => void;
}

/** Runs writes now, or later in order when SQLite cannot take them now. */
export class WriteRetry {
  private readonly queues = new Map<string, Pending[]>();
  private timer: NodeJS.Timeout | null = null;
  private delay = FIRST_RETRY_MS;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly limits: Limits,
    private readonly defaultBusyTimeoutMs = 5000,
    private readonly reserve: Pick<DiskReserve, 'release' | 'maybeRestore' | 'isHeld'> | null = null,
  ) {}

  /** While the disk reserve is released: looks every RESTORE_EVERY_MS whether it can be made again. */
  private restoreTimer: NodeJS.Timeout | null = null;

  /**
   * Runs `write` (one transaction) now unless writes of `key` are waiting; on a transient SQLite
   * error (busy, locked, full, I/O) it is queued and retried. Any other error is logged and the
   * write dropped. Never throws. Returns true when it ran now.
   */
  run(key: string, what: string, write: () => void): boolean {
    const q = this.queues.get(key);
    if (q) {
      if (q.length >= MAX_PENDING_PER_KEY) {
        const dropped = q.shift()!;
        this.log.error('database write dropped: too many waiting', { key, what: dropped.what });
      }
      q.push({ what, write });
      return false;
    }
    if (this.attempt(key, what, write)) return true;
    if (this.queues.size >= MAX_KEYS) {
      this.log.error('database write dropped: too many streams waiting', { key, what });
      return false;
    }
    this.queues.set(key, [{ what, write }]);
    this.schedule();
    return false;
  }

  /** Writes waiting (for tests and diagnostics). */
  get pending(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /** Tries every waiting write once more now (server shutdown); what still fails is dropped with a log line. */
  drain(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.retry();
    for (const [key, q] of this.queues) for (const p of q) this.log.error('database write lost at shutdown', { key, what: p.what });
    this.queues.clear();
  }

  /** Stops retrying (the database is closing). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.restoreTimer) clearInterval(this.restoreTimer);
    this.restoreTimer = null;
  }

  /** One try; true when done (or failed for good and dropped). */
  private attempt(key: string, what: string, write: () => void): boolean {
    let lowered = false;
    try {
      this.db.pragma(`busy_timeout = ${RETRY_BUSY_TIMEOUT_MS}`);
      lowered = true;
      this.writeUsingReserve(write);
      return true;
    } catch (e) {
      if (isTransientDbError(e)) {
        const code = (e as { code: string }).code;
        this.limits.hit(code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') ? 'database_busy' : 'database_error', '', { key, what, code });
        return false;
      }
      this.log.error('database write failed; dropped', { key, what, err: (e as Error).message });
      return true;
    } finally {
      if (lowered) {
        try {
          this.db.pragma(`busy_timeout = ${this.defaultBusyTimeoutMs}`);
        } catch {
          // A closed or broken connection: the next attempt reports it.
        }
      }
    }
  }

  /** Runs `write`; on a full disk, releases the disk reserve and runs it once more. @throws what the write threw */
  private writeUsingReserve(write: () => void): void {
    try {
      write();
    } catch (e) {
      if ((e as { code?: unknown } | null)?.code !== 'SQLITE_FULL' || !this.reserve?.release()) throw e;
      this.watchReserve();
      write();
    }
  }

  private watchReserve(): void {
    const reserve = this.reserve;
    if (this.restoreTimer || !reserve) return;
    this.restoreTimer = setInterval(() => {
      reserve.maybeRestore();
      if (reserve.isHeld && this.restoreTimer) {
        clearInterval(this.restoreTimer);
        this.restoreTimer = null;
      }
    }, RESTORE_EVERY_MS);
    this.restoreTimer.unref();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.retry();
      if (this.queues.size > 0) {
        this.delay = Math.min(this.delay * 2, MAX_RETRY_DELAY_MS);
        this.schedule();
      } else this.delay = FIRST_RETRY_MS;
    }, this.delay);
    this.timer.unref();
  }

  private retry(): void {
    for (const [key, q] of this.queues) {
      while (q.length > 0) {
        const p = q[0]!;
        if (!this.attempt(key, p.what, p.write)) break;
        q.shift();
      }
      if (q.length === 0) this.queues.delete(key);
    }
  }
}
