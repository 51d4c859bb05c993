/**
 * The only home of better-sqlite3. Opens `<dataDir>/skylark.db` in WAL mode and applies the
 * versioned migrations. Every CLI command and `serve` may open the same file at once (WAL +
 * busy_timeout).
 */
import Sqlite from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { MIGRATIONS, type Migration } from './migrations.js';

export type Database = Sqlite.Database;
export type Statement<P extends unknown[] = unknown[], R = unknown> = Sqlite.Statement<P, R>;

/**
 * Opens (creating if needed) the database under `dataDir` and migrates it to the newest version.
 * @throws Error when the file is from a newer Skylark (unknown migration version) or unreadable.
 */
export function openDatabase(dataDir: string, migrations: Migration[] = MIGRATIONS): Database {
  mkdirSync(dataDir, { recursive: true });
  const db = new Sqlite(path.join(dataDir, 'skylark.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db, migrations);
  return db;
}

/** Applies every migration newer than the stored version, each in its own transaction. */
export function migrate(db: Database, migrations: Migration[]): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const current = (db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v;
  const newest = migrations.reduce((m, x) => Math.max(m, x.version), 0);
  if (current > newest) throw new Error(`database schema version ${current} is newer than this Skylark (${newest})`);
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.version, m.name, Date.now());
    }).immediate();
  }
}
