/**
 * Versioned schema migrations: `src/base/db/migrations/NNN-name.sql`, applied in order of NNN at start,
 * each in its own transaction. Never edit a shipped migration: add a new file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

// src/base/db or dist/base/db → the .sql files stay in src/base/db/migrations (they are not compiled).
const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'base', 'db', 'migrations');

/** Reads every migration file of `folder`. @throws Error on a misnamed file or a duplicate version */
export function loadMigrations(folder = dir): Migration[] {
  const out: Migration[] = [];
  for (const file of readdirSync(folder).sort()) {
    if (!file.endsWith('.sql')) continue;
    const m = /^(\d{3})-([a-z0-9-]+)\.sql$/.exec(file);
    if (!m) throw new Error(`migration file name must be NNN-name.sql: ${file}`);
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) throw new Error(`duplicate migration version ${version}`);
    out.push({ version, name: m[2]!, sql: readFileSync(path.join(folder, file), 'utf8') });
  }
  return out;
}

/** The migrations shipped with this build. */
export const MIGRATIONS: Migration[] = loadMigrations();
