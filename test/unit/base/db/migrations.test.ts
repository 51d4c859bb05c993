import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase, migrate } from '../../../../src/base/db/database.js';
import { MIGRATIONS } from '../../../../src/base/db/migrations.js';

describe('migrations', () => {
  it('apply once, in order, survive reopening, and refuse a newer schema', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-mig-'));
    try {
      const db = openDatabase(dir);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all();
      expect(versions).toEqual(MIGRATIONS.map((m) => m.version).sort((a, b) => a - b));
      expect(versions[0]).toBe(1);
      db.close();
      const again = openDatabase(dir); // no error: nothing re-applied
      expect(again.prepare('SELECT COUNT(*) FROM schema_migrations').pluck().get()).toBe(MIGRATIONS.length);
      again.prepare('INSERT INTO schema_migrations VALUES (999, ?, ?)').run('future', Date.now());
      expect(() => migrate(again, MIGRATIONS)).toThrow(/newer than this Skylark/);
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
