/**
 * The only home of better-sqlite3. Opens `<dataDir>/skylark.db` in WAL mode with `synchronous =
 * FULL` (each commit fsyncs the WAL) and applies the versioned migrations. Every CLI command and `serve` may open the same file at once (WAL +
 * busy_timeout).
 */
import Sqlite from 'better-sqlite3';
import { mkdirSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { MIGRATIONS, type Migration } from './migrations.js';

export type Database = Sqlite.Database;
export type Statement<P extends unknown[] = unknown[], R = unknown> = Sqlite.Statement<P, R>;

/** How long a write waits for another connection's write lock (ms): CLI commands wait this long. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;
/**
 * The server's wait (ms): SQLite waits by blocking the thread, and the server's thread serves every
 * stream and request, so it waits briefly and its writes retry or answer 503 instead
 * (write-retry.ts beside this file, docs/behaviour.md §13).
 */
export const SERVER_BUSY_TIMEOUT_MS = 100;

/**
 * SQLite's page cache per connection (KiB): 128 pages of 4 KiB. better-sqlite3 builds with 16,000
 * (SQLite's own default is 2,000); see the comment in `openDatabase`.
 */
export const PAGE_CACHE_KIB = 512;

/** Options of `openDatabase`. */
export interface OpenOptions {
  /** Busy timeout of the connection (ms; default DEFAULT_BUSY_TIMEOUT_MS). */
  busyTimeoutMs?: number;
}

/**
 * Opens (creating if needed) the database under `dataDir` and migrates it to the newest version.
 * @throws Error when the file is from a newer Skylark (unknown migration version) or unreadable.
 */
export function openDatabase(dataDir: string, migrations: Migration[] = MIGRATIONS, opts: OpenOptions = {}): Database {
  mkdirSync(dataDir, { recursive: true });
  const db = new Sqlite(path.join(dataDir, 'skylark.db'));
  db.pragma('journal_mode = WAL');
  // FULL: every commit (outbox events, publications, webhook attempts) is on disk before the call
  // returns, so a power loss undoes nothing that was answered or announced (docs/decisions.md "Durability").
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS}`);
  // A small page cache, not better-sqlite3's 16,000 KiB: the node's writes are mostly appended
  // rows it does not read back (listener sessions, outbox events), and a large cache kept every
  // new page of them, ~0.8 KB per listener that joined, up to 16 MB of resident memory; the
  // kernel's page cache still holds the file, so a page read again costs a `pread`
  // (docs/decisions.md "SQLite page cache").
  db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
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

/** Wait (ms) after a write to the WAL is seen before looking for a commit (the writer finishes it). */
const COMMIT_SETTLE_MS = 20;
/** Second look (ms) after the last write of a burst: a commit whose WAL index was not yet updated at the first look. */
const COMMIT_RECHECK_MS = 1_000;

/**
 * Calls `onCommit` soon (≈ 20 ms) after another connection — another process, or another handle in
 * this one — commits to the database `db` is open on; commits made through `db` itself are not
 * reported (their writer knows). Nothing runs while nobody writes: the WAL file's directory is
 * watched (`fs.watch`: inotify, FSEvents), and each burst of writes to `<file>-wal` is followed by
 * a `PRAGMA data_version` check after COMMIT_SETTLE_MS and another COMMIT_RECHECK_MS after the last
 * write. Where the directory cannot be watched, `data_version` is checked every `fallbackPollMs`
 * (ms) instead. A file system that gives no change notifications for other hosts' writes (network
 * mounts) is not supported. An in-memory database has no other connections: nothing is watched.
 * Returns the function that stops watching.
 */
export function watchCommits(db: Database, onCommit: () => void, fallbackPollMs = 500): () => void {
  if (db.memory) return () => {};
  const version = db.prepare('PRAGMA data_version').pluck();
  let seen = version.get() as number;
  let stopped = false;
  let soon: NodeJS.Timeout | null = null;
  let later: NodeJS.Timeout | null = null;
  let poll: NodeJS.Timeout | null = null;
  let watcher: FSWatcher | null = null;
  const check = () => {
    if (stopped || !db.open) return;
    const v = version.get() as number;
    if (v === seen) return;
    seen = v;
    onCommit();
  };
  const written = () => {
    if (stopped) return;
    if (!soon) {
      soon = setTimeout(() => {
        soon = null;
        check();
      }, COMMIT_SETTLE_MS);
      soon.unref();
    }
    if (later) later.refresh();
    else {
      later = setTimeout(() => {
        later = null;
        check();
      }, COMMIT_RECHECK_MS);
      later.unref();
    }
  };
  const fallback = () => {
    watcher?.close();
    watcher = null;
    if (stopped || poll) return;
    poll = setInterval(check, fallbackPollMs);
    poll.unref();
  };
  const file = path.resolve(db.name);
  const wal = `${path.basename(file)}-wal`;
  try {
    watcher = watch(path.dirname(file), { persistent: false }, (_event, name) => {
      if (name === null || name === wal) written();
    });
    watcher.on('error', fallback);
  } catch {
    fallback();
  }
  return () => {
    stopped = true;
    watcher?.close();
    for (const t of [soon, later]) if (t) clearTimeout(t);
    if (poll) clearInterval(poll);
  };
}
