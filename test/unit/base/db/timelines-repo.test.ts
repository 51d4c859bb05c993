/** Reserved HLS timeline marks over a real SQLite file (migration 016, docs/streams.md "One timeline"). */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { TimelinesRepo } from '../../../../src/base/db/timelines-repo.js';

/** Inserts an account and stream `id` (the marks belong to an existing stream). */
function insertStream(db: Database, id: string): void {
  db.prepare("INSERT OR IGNORE INTO accounts (id, name, plan, default_region, created_at) VALUES ('acc_t', 'T', 'paid', 'euw1', 0)").run();
  db.prepare(`INSERT INTO streams (id, account_id, title, status, quality, codec, region, stream_key_hash, stream_key_enc, reconnect_window, created_at)
    VALUES (?, 'acc_t', 'T', 'idle', 'medium', 'aac', 'euw1', x'00', x'00', 30, 0)`).run(id);
}

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});
function open(): Database {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-timelines-'));
  dirs.push(dir);
  return openDatabase(dir);
}

describe('TimelinesRepo', () => {
  it('only ever raises a layer mark, per stream and layer', () => {
    const db = open();
    insertStream(db, 'stm_a');
    const repo = new TimelinesRepo(db);
    expect(repo.load('stm_a')).toEqual([]);
    expect(repo.reserve('stm_a', 'a128', 1000, 64, 1)).toBe(true);
    expect(repo.reserve('stm_a', 'a64', 1000, 64, 1)).toBe(true);
    expect(repo.reserve('stm_a', 'a128', 2000, 64, 2)).toBe(true);
    // A late write of a lower mark (a retry overtaken by a newer one) lowers nothing.
    repo.reserve('stm_a', 'a128', 1500, 10, 3);
    expect(repo.load('stm_a')).toEqual([
      { layer: 'a128', sequence: 2000, discontinuity: 64 },
      { layer: 'a64', sequence: 1000, discontinuity: 64 },
    ]);
    db.close();
  });

  it('writes nothing for a stream that does not exist, and forgets a deleted stream', () => {
    const db = open();
    const repo = new TimelinesRepo(db);
    expect(repo.reserve('stm_gone', 'a128', 1000, 64, 1)).toBe(false);
    expect(repo.load('stm_gone')).toEqual([]);
    insertStream(db, 'stm_b');
    repo.reserve('stm_b', 'a128', 1000, 64, 1);
    db.prepare('DELETE FROM streams WHERE id = ?').run('stm_b');
    expect(db.prepare('SELECT COUNT(*) FROM hls_timelines').pluck().get()).toBe(0);
    db.close();
  });
});
