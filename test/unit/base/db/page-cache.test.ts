// The database's page cache is 512 KiB, not better-sqlite3's 16,000 KiB:
// appended rows the node never reads back (listener sessions, outbox events) must not stay
// resident (docs/decisions.md "SQLite page cache").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase, PAGE_CACHE_KIB } from '../../../../src/base/db/database.js';

describe('the page cache', () => {
  it('is capped at 512 KiB per connection', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-cache-'));
    try {
      const db = openDatabase(dir);
      expect(PAGE_CACHE_KIB).toBe(512);
      expect(db.pragma('cache_size', { simple: true })).toBe(-512);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
