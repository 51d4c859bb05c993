/**
 * The one write path of the services (docs/architecture.md "One write path"): a change runs in one
 * SQLite transaction, and the events it recorded in the outbox (src/base/outbox.ts) are announced
 * only after the commit — or forgotten when the transaction threw, so no subscriber ever hears of a
 * change that is not on disk (the transactional outbox). A unit run inside another — of the same
 * service or of another one on the same database connection — joins the outer transaction
 * (better-sqlite3 turns the inner `transaction()` into a savepoint) and announces nothing until the
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

/** Units open on each connection: shared by every `UnitOfWork` over it, so nesting across services is seen. */
const openUnits = new WeakMap<Database.Database, { n: number }>();

/** Runs changes as units of work: one transaction each, events announced after the commit. */
export class UnitOfWork {
  private readonly open: { n: number };

  constructor(
    private readonly db: Database.Database,
    private readonly outbox: PendingAnnouncements,
  ) {
    let open = openUnits.get(db);
    if (!open) openUnits.set(db, (open = { n: 0 }));
    this.open = open;
  }

  /**
   * Runs `change` in one transaction (`BEGIN IMMEDIATE` with `immediate`: the write lock is taken
   * first) and returns what it returned; announces the events it recorded after the commit.
   * @throws whatever `change` or the commit threw (e.g. `SQLITE_BUSY`, `SQLITE_FULL`); the
   * transaction is then rolled back and its events are dropped, never announced.
   */
  run<T>(change: () => T, opts: { immediate?: boolean } = {}): T {
    const mark = this.outbox.mark();
    const tx = this.db.transaction(change);
    this.open.n++;
    let result: T;
    try {
      result = opts.immediate ? tx.immediate() : tx();
    } catch (e) {
      this.open.n--;
      this.outbox.discard(mark);
      throw e;
    }
    this.open.n--;
    if (this.open.n === 0) this.outbox.flush();
    return result;
  }
}
