/**
 * Cursor pagination over a table whose `seq` column orders rows by creation (docs/behaviour.md §7, §9):
 * newest first; `after=X` gives rows older than X, `before=X` rows newer than X (still newest first).
 */
import type { Database } from './database.js';

/** A page request. `after` and `before` are object ids; at most one is set. */
export interface PageQuery {
  limit: number;
  after?: string | undefined;
  before?: string | undefined;
}

/** A page: rows newest first, whether more lie further in the direction of travel. */
export interface Page<R> {
  rows: R[];
  hasMore: boolean;
}

/** Thrown when a cursor id is not an object of this list. */
export class UnknownCursorError extends Error {
  constructor(readonly param: 'after' | 'before', readonly id: string) {
    super(`No such object for cursor '${param}': '${id}'.`);
  }
}

/**
 * Builds a paginator for `table` restricted by `where` (SQL over named parameters, e.g.
 * `account_id = @accountId AND (@status IS NULL OR status = @status)`). Statements are prepared once.
 */
export function paginator<R>(db: Database, table: string, where: string) {
  const seqOf = db.prepare(`SELECT seq FROM ${table} WHERE id = ? AND account_id = ?`).pluck();
  const first = db.prepare(`SELECT * FROM ${table} WHERE ${where} ORDER BY seq DESC LIMIT @n`);
  const older = db.prepare(`SELECT * FROM ${table} WHERE ${where} AND seq < @cursor ORDER BY seq DESC LIMIT @n`);
  const newer = db.prepare(`SELECT * FROM ${table} WHERE ${where} AND seq > @cursor ORDER BY seq ASC LIMIT @n`);
  return (params: Record<string, unknown> & { accountId: string }, q: PageQuery): Page<R> => {
    const n = q.limit + 1;
    let rows: R[];
    if (q.after !== undefined || q.before !== undefined) {
      const param = q.after !== undefined ? 'after' : 'before';
      const id = (q.after ?? q.before)!;
      const cursor = seqOf.get(id, params.accountId) as number | undefined;
      if (cursor === undefined) throw new UnknownCursorError(param, id);
      if (param === 'after') rows = older.all({ ...params, cursor, n }) as R[];
      else rows = (newer.all({ ...params, cursor, n }) as R[]).slice(0, n);
      const hasMore = rows.length > q.limit;
      if (param === 'before') {
        // Nearest newer rows first in the query; keep the q.limit closest, then show newest first.
        rows = rows.slice(0, q.limit).reverse();
      } else rows = rows.slice(0, q.limit);
      return { rows, hasMore };
    }
    rows = first.all({ ...params, n }) as R[];
    return { rows: rows.slice(0, q.limit), hasMore: rows.length > q.limit };
  };
}
