/**
 * The one write path of the services (docs/architecture.md "One write path"): a change runs in one
 * SQLite transaction, and the events it recorded in the outbox (src/base/outbox.ts) are announced
 * only after the commit — or forgotten when the transaction threw, so no subscriber ever hears of a
 * change that is not on disk (the transactional outbox). Nested calls join the outer transaction
 * (better-sqlite3 turns an inner `transaction()` into a savepoint) and announce nothing until the
 * outermost one committed; an inner unit that throws drops only its own events, with its savepoint.
 */
import type Database from 'better-sqlite3';

/** What a unit of work needs of the outbox (src/base/outbox.ts `Outbox`): its pending announcements. */
export interface PendingAnnouncements {
  /** Announces what waits (after the commit). */
  flush(): void;
  /** Drops what waits, or what came after `mark()` returned `from`. */
  discard(from?: number): void;
  /** How many announcements wait. */
  mark(): number;
}

/** Runs changes as units of work: one transaction each, events announced after the commit. */
export class UnitOfWork {
  private depth = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly outbox: PendingAnnouncements,
  ) {}

  /**
   * Runs `change` in one transaction and returns what it returned; announces the events it
   * recorded after the commit.
   * @throws whatever `change` or the commit threw (e.g. `SQLITE_BUSY`, `SQLITE_FULL`); the
   * transaction is then rolled back and its events are dropped, never announced.
   */
  run<T>(change: () => T): T {
    const mark = this.outbox.mark();
    this.depth++;
    let result: T;
    try {
      result = this.db.transaction(change)();
    } catch (e) {
      this.depth--;
      // What this unit recorded is gone with its transaction (or, nested, with its savepoint).
      this.outbox.discard(mark);
      throw e;
    }
    this.depth--;
    if (this.depth === 0) this.outbox.flush();
    return result;
  }
}
