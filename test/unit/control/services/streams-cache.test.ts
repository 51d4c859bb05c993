/**
 * The read cache of StreamsService.get (docs/api-platform.md "Speed"): what it serves is always what
 * SQLite holds by the next event-loop turn, whoever wrote it (this service, the ingest side through
 * the repo, another process through another connection), and at once for the service's own writes.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { StreamsRepo } from '../../../../src/base/db/streams-repo.js';
import { AccountsRepo } from '../../../../src/base/db/accounts-repo.js';
import { AccountsService } from '../../../../src/control/services/accounts.js';
import { StreamsService } from '../../../../src/control/services/streams.js';
import type { PublicUrls } from '../../../../src/base/config.js';

const nextTurn = () => new Promise((r) => setImmediate(r));

let dir: string;
let db: Database;
let repo: StreamsRepo;
let svc: StreamsService;
let acct: string;
let listeners = 0;
let sqlReads = 0;

beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-streams-cache-'));
  db = openDatabase(dir);
  repo = new StreamsRepo(db);
  const accounts = new AccountsRepo(db);
  acct = (await new AccountsService(accounts).create({ name: 'T', plan: 'paid', region: 'eu-west-1' })).account.id;
  const urls = { baseUrl: 'http://x/v2', authUrl: 'http://x', cdnUrl: 'http://cdn', ingestUrl: 'ingest:1935' } as PublicUrls;
  listeners = 0;
  sqlReads = 0;
  const nodeSecret = randomBytes(32);
  svc = new StreamsService({
    streams: repo,
    accounts,
    nodeSecret,
    urls: () => urls,
    live: { listenerCount: () => listeners, endNow: () => {}, disconnectPublisher: () => {}, nowPlaying: () => {} },
  });
  // Count the SQLite reads of stream rows.
  const get = repo.get.bind(repo);
  repo.get = (id, a) => {
    sqlReads++;
    return get(id, a);
  };
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('StreamsService.get read cache', () => {
  it('serves repeated reads without SQLite and re-renders when the listener count moves', async () => {
    const created = svc.create(acct, { title: 'A' }).value;
    await nextTurn();
    const a = svc.get(acct, created.id, true);
    expect(a.streamKey).toBe(created.streamKey);
    const reads = sqlReads;
    const b = svc.get(acct, created.id, true);
    expect(b).toBe(a); // the same frozen object
    expect(Object.isFrozen(b)).toBe(true);
    expect(svc.get(acct, created.id, false).streamKey).toBeUndefined();
    expect(sqlReads).toBe(reads);
    listeners = 3;
    expect(svc.get(acct, created.id, true).listenerCount).toBe(3);
    expect(svc.get(acct, created.id, false).listenerCount).toBe(3);
  });

  it('its own writes show at once: update, reset_stream_key, delete', async () => {
    const s = svc.create(acct, { title: 'A' }).value;
    svc.get(acct, s.id, true);
    svc.update(acct, s.id, { title: 'B' }, true);
    expect(svc.get(acct, s.id, true).title).toBe('B');
    const reset = svc.resetStreamKey(acct, s.id);
    expect(reset.streamKey).not.toBe(s.streamKey);
    expect(svc.get(acct, s.id, true).streamKey).toBe(reset.streamKey);
    svc.delete(acct, s.id);
    expect(() => svc.get(acct, s.id, true)).toThrow(/No such stream/i);
  });

  it('another account gets 404 for a cached stream', () => {
    const s = svc.create(acct, { title: 'A' }).value;
    svc.get(acct, s.id, false);
    expect(() => svc.get('acct_other', s.id, false)).toThrow(/No such stream/i);
  });

  it('writes by the ingest side (the repo) and by another connection show by the next turn', async () => {
    const s = svc.create(acct, { title: 'A' }).value;
    await nextTurn();
    expect(svc.get(acct, s.id, false).status).toBe('idle');
    repo.markLive(s.id, Date.now());
    await nextTurn();
    expect(svc.get(acct, s.id, false).status).toBe('live');
    // Another process (the CLI): a second connection to the same file.
    const other = openDatabase(dir);
    try {
      other.prepare("UPDATE streams SET title = 'from elsewhere' WHERE id = ?").run(s.id);
    } finally {
      other.close();
    }
    await nextTurn();
    expect(svc.get(acct, s.id, false).title).toBe('from elsewhere');
  });
});
