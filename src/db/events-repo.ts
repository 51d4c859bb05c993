/** The durable event log (outbox): rows written in the transaction of the change that causes them. */
import type { Database } from './database.js';

export interface EventRow {
  id: string;
  account_id: string;
  type: string;
  created: number; // Unix seconds
  livemode: number; // 0 | 1
  data: string; // JSON {object, ...}
}

/** Prepared statements over `events`. */
export class EventsRepo {
  private readonly insertStmt;
  private readonly byAccount;

  constructor(readonly db: Database) {
    this.insertStmt = db.prepare('INSERT INTO events (id, account_id, type, created, livemode, data) VALUES (@id, @account_id, @type, @created, @livemode, @data)');
    this.byAccount = db.prepare('SELECT * FROM events WHERE account_id = ? ORDER BY seq DESC LIMIT ?');
  }

  insert(row: EventRow): void {
    this.insertStmt.run(row);
  }
  /** The newest `limit` events of an account, newest first. */
  recent(accountId: string, limit: number): EventRow[] {
    return this.byAccount.all(accountId, limit) as EventRow[];
  }
}
