/** The durable event log (outbox): rows written in the transaction of the change that causes them. */
import type { Database } from './database.js';
import { paginator, type Page, type PageQuery } from './paginate.js';

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

// ── Listing and lookup for GET /events and GET /events/{id} ──

/** Lists and finds events of one account (prepared once per database). */
export class EventsQuery {
  private readonly page;
  private readonly byId;

  constructor(readonly db: Database) {
    this.page = paginator<EventRow>(db, 'events', 'account_id = @accountId AND (@type IS NULL OR type = @type)');
    this.byId = db.prepare('SELECT * FROM events WHERE id = ? AND account_id = ?');
  }

  /** A page of the account's events, newest first, optionally of one `type`. @throws UnknownCursorError */
  list(accountId: string, type: string | undefined, q: PageQuery): Page<EventRow> {
    return this.page({ accountId, type: type ?? null }, q);
  }

  /** The event `id` of `accountId`, or undefined. */
  get(id: string, accountId: string): EventRow | undefined {
    return this.byId.get(id, accountId) as EventRow | undefined;
  }
}
