/**
 * Durability (docs/decisions.md "Durability"): every connection `openDatabase` makes runs WAL with
 * `synchronous = FULL`, so each commit — an outbox event, a publication — is fsynced to the WAL
 * before the write returns. Checked through the pragma and through the system calls a real process
 * makes (strace: one WAL fsync per committed event insert).
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../../src/base/db/database.js';
import { repoRoot } from '../../helpers/server.js';

const hasStrace = spawnSync('strace', ['-V']).status === 0;

describe('database durability', () => {
  it('opens with journal_mode WAL and synchronous FULL (2)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-dur-'));
    try {
      const db = openDatabase(dir);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(2);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasStrace)('fsyncs the WAL on every committed event insert', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-dur-'));
    try {
      const script = path.join(dir, 'insert.mjs');
      const COMMITS = 100;
      writeFileSync(
        script,
        `const { openDatabase } = await import(${JSON.stringify(path.join(repoRoot, 'src/base/db/database.ts'))});
const db = openDatabase(process.argv[2]);
const ins = db.prepare("INSERT INTO events (id, account_id, type, created, livemode, data) VALUES (?, 'acct_x', 'webhook.test', 1, 1, '{}')");
for (let i = 0; i < ${COMMITS}; i++) ins.run('evt_' + i);
`,
      );
      const trace = path.join(dir, 'trace');
      execFileSync('strace', ['-f', '-y', '-e', 'trace=fsync,fdatasync', '-o', trace, process.execPath, '--import', 'tsx', script, path.join(dir, 'data')], { cwd: repoRoot, stdio: 'ignore' });
      const walSyncs = readFileSync(trace, 'utf8').split('\n').filter((l) => /sync\(\d+<[^>]*skylark\.db-wal>\)/.test(l)).length;
      // Migrations commit a few times too; with synchronous = NORMAL there would be none at all.
      expect(walSyncs).toBeGreaterThanOrEqual(COMMITS);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
