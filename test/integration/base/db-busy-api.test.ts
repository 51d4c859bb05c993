/**
 * A SQLite error that reaches the API is answered for what it is, not as a 500 (src/base/http/reply.ts
 * `toApiError`): with the database's write lock held by another process longer than the server's
 * busy timeout, an API write answers 503 `database_busy` with `Retry-After: 1` (reads still
 * answer, and the same write succeeds once the lock is gone); with the database at its size limit
 * (a real `SQLITE_FULL`: `PRAGMA max_page_count`), a write answers 507 `insufficient_storage`.
 * In process (the OpenAPI document does not list these answers, so no checker is attached).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { startServer, type RunningServer } from '../../../src/main.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { api, repoRoot, tempDir } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';

/** Holds `BEGIN IMMEDIATE` on the database from another process until its stdin closes. Resolves once the lock is held. */
function holdWriteLock(dbFile: string): Promise<ChildProcess> {
  const script = `
    const Sqlite = require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'better-sqlite3'))});
    const db = new Sqlite(${JSON.stringify(dbFile)});
    db.pragma('busy_timeout = 10000');
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    process.stdin.resume();
    process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close(); process.exit(0); });
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (c) => reject(new Error(`lock holder exited with ${c}`)));
  });
}

const tmp = tempDir();
let srv: RunningServer;
let base: string;
let key: string;
beforeAll(async () => {
  srv = await startServer(loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' }), createLogger('error'));
  base = `http://127.0.0.1:${srv.httpPort}`;
  key = (await srv.accounts.create({ name: 'Busy', plan: 'paid', region: 'eu-west-1' })).secretKey;
});
afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

describe('SQLite faults reaching the API', () => {
  it('a write lock held by another process: 503 database_busy with Retry-After: 1; reads answer; the write succeeds once the lock is gone', async () => {
    const before = await api(base, key, 'POST', '/v2/streams', { title: 'Before' });
    expect(before.status).toBe(201);
    const lock = await holdWriteLock(path.join(tmp.dir, 'skylark.db'));
    let released = false;
    try {
      const r = await api(base, key, 'POST', '/v2/streams', { title: 'Under the lock' });
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).toBe('1');
      expect(r.json.error).toMatchObject({ type: 'api_error', code: 'database_busy' });
      expect(r.json.error.requestId).toMatch(/^req_/);
      // Reads are not blocked by another connection's write lock (WAL).
      const read = await api(base, key, 'GET', `/v2/streams/${before.json.id}`);
      expect(read.status).toBe(200);
      lock.stdin!.end();
      released = true;
      expect(await exited(lock)).toBe(0);
    } finally {
      if (!released) lock.kill('SIGKILL');
    }
    const after = await api(base, key, 'POST', '/v2/streams', { title: 'Under the lock' });
    expect(after.status).toBe(201);
    const list = await api(base, key, 'GET', '/v2/streams?limit=100');
    expect(list.json.data.map((s: { title: string }) => s.title).sort()).toEqual(['Before', 'Under the lock']);
  }, 30_000);

  it('a full database (SQLITE_FULL): 507 insufficient_storage, and reads still answer', async () => {
    const pages = srv.db.pragma('page_count', { simple: true }) as number;
    srv.db.pragma(`max_page_count = ${pages}`);
    let refused: Awaited<ReturnType<typeof api>> | undefined;
    try {
      // The pages there may still have room for a few rows; the database cannot grow by one more.
      for (let i = 0; i < 500 && !refused; i++) {
        const r = await api(base, key, 'POST', '/v2/streams', { title: `Filler ${i}`, metadata: { pad: 'x'.repeat(500) } });
        if (r.status !== 201) refused = r;
      }
    } finally {
      srv.db.pragma('max_page_count = 4294967294');
    }
    expect(refused?.status).toBe(507);
    expect(refused?.json.error).toMatchObject({ type: 'api_error', code: 'insufficient_storage' });
    expect((await api(base, key, 'GET', '/v2/streams?limit=1')).status).toBe(200);
    expect((await api(base, key, 'POST', '/v2/streams', { title: 'After' })).status).toBe(201);
  }, 60_000);
});
