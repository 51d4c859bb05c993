/** Cursor pagination (docs/behaviour.md §9 "Lists") over a real SQLite table. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { paginator, UnknownCursorError, type PageQuery } from '../../../../src/base/db/paginate.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

interface Row {
  id: string;
  account_id: string;
  kind: string;
}

// Not test/helpers/server.ts: that pulls in main.ts and the native addon, which this unit test does not need.
const dir = mkdtempSync(path.join(tmpdir(), 'skylark-paginate-'));
let db: Database;
let page: (params: { accountId: string; kind: string | null }, q: PageQuery) => { rows: Row[]; hasMore: boolean };
const ids: string[] = []; // newest first, account a
const evens: string[] = []; // newest first, kind 'even'

beforeAll(() => {
  db = openDatabase(dir, []);
  db.exec('CREATE TABLE items (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, account_id TEXT NOT NULL, kind TEXT NOT NULL)');
  const ins = db.prepare('INSERT INTO items (id, account_id, kind) VALUES (?, ?, ?)');
  for (let i = 0; i < 11; i++) {
    ins.run(`it_${i}`, 'a', i % 2 ? 'odd' : 'even');
    ins.run(`other_${i}`, 'b', 'even'); // interleaved rows of another account
  }
  for (let i = 10; i >= 0; i--) {
    ids.push(`it_${i}`);
    if (i % 2 === 0) evens.push(`it_${i}`);
  }
  page = paginator<Row>(db, 'items', 'account_id = @accountId AND (@kind IS NULL OR kind = @kind)');
});
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const all = { accountId: 'a', kind: null };
const idsOf = (p: { rows: Row[] }) => p.rows.map((r) => r.id);

describe('paginator', () => {
  it('first page: newest first, hasMore', () => {
    expect(idsOf(page(all, { limit: 3 }))).toEqual(ids.slice(0, 3));
    expect(page(all, { limit: 3 }).hasMore).toBe(true);
    expect(page(all, { limit: 11 }).hasMore).toBe(false);
    expect(page(all, { limit: 100 }).rows).toHaveLength(11);
  });

  it('after: older rows; before: newer rows, newest first', () => {
    expect(idsOf(page(all, { limit: 3, after: ids[2] }))).toEqual(ids.slice(3, 6));
    expect(idsOf(page(all, { limit: 3, before: ids[6] }))).toEqual(ids.slice(3, 6));
    expect(page(all, { limit: 3, before: ids[6] }).hasMore).toBe(true);
    expect(page(all, { limit: 3, before: ids[3] }).hasMore).toBe(false);
    expect(idsOf(page(all, { limit: 5, before: ids[2] }))).toEqual(ids.slice(0, 2));
    expect(page(all, { limit: 5, after: ids[10] })).toEqual({ rows: [], hasMore: false });
  });

  it('filters combine with cursors (limit 1 chain)', () => {
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const p = page({ accountId: 'a', kind: 'even' }, { limit: 1, after });
      seen.push(...idsOf(p));
      if (!p.hasMore) break;
      after = p.rows[0]!.id;
    }
    expect(seen).toEqual(evens);
    const back: string[] = [];
    let before: string | undefined = evens[evens.length - 1];
    for (;;) {
      const p = page({ accountId: 'a', kind: 'even' }, { limit: 1, before });
      back.unshift(...idsOf(p));
      if (!p.hasMore) break;
      before = p.rows[0]!.id;
    }
    expect(back).toEqual(evens.slice(0, -1));
  });

  it('unknown cursors, and cursors of another account, throw UnknownCursorError naming the parameter', () => {
    expect(() => page(all, { limit: 1, after: 'nope' })).toThrow(UnknownCursorError);
    try {
      page(all, { limit: 1, before: 'other_3' });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(UnknownCursorError);
      expect((e as UnknownCursorError).param).toBe('before');
    }
  });
});
