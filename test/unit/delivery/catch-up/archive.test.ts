/**
 * The catch-up archive (docs/behaviour.md §17) over a real layer fed by the native segmenter (the
 * AAC fixture), a real SQLite file and real files: every finished segment is written and indexed
 * while the stream's catch-up is on (and nothing while it is off); the sweep deletes what is older
 * than the window and everything of a stream whose catch-up was turned off; near the free-space
 * floor the oldest kept segments go first — never those of the last minutes — with one
 * `catch_up_trimmed` per stream. The volume's free space is the one stand-in (a test cannot fill
 * a shared disk safely).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { StreamsRepo } from '../../../../src/base/db/streams-repo.js';
import { AccountsRepo } from '../../../../src/base/db/accounts-repo.js';
import { CatchUpRepo } from '../../../../src/base/db/catch-up-repo.js';
import { AccountsService } from '../../../../src/control/services/accounts.js';
import { StreamsService } from '../../../../src/control/services/streams.js';
import type { PublicUrls } from '../../../../src/base/config.js';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Layer } from '../../../../src/live/media/layer.js';
import type { StreamHub } from '../../../../src/live/media/hub.js';
import { Segmenter } from '../../../../src/native/segmenter.js';
import { CatchUpArchive } from '../../../../src/delivery/catch-up/archive.js';
import { createLogger } from '../../../../src/base/logger.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));

let dir: string;
let db: Database;
let repo: CatchUpRepo;
let streamId: string;
let free: number;
let clock: number;
let errors: Array<{ streamId: string; code: string }>;
let archive: CatchUpArchive;

beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-catch-up-'));
  db = openDatabase(dir);
  const accounts = new AccountsRepo(db);
  const acct = (await new AccountsService(accounts).create({ name: 'T', plan: 'paid', region: 'eu-west-1' })).account.id;
  const urls = { baseUrl: 'http://x/v2', authUrl: 'http://x', cdnUrl: 'http://cdn', ingestUrl: 'ingest:1935' } as PublicUrls;
  const svc = new StreamsService({ streams: new StreamsRepo(db), accounts, nodeSecret: randomBytes(32), urls: () => urls, live: { listenerCount: () => 0, endNow: () => {}, disconnectPublisher: () => {}, nowPlaying: () => {} } });
  streamId = svc.create(acct, { title: 'A', catchUp: { hours: 1 } }).value.id;
  repo = new CatchUpRepo(db);
  free = Number.MAX_SAFE_INTEGER;
  clock = Date.now();
  errors = [];
  archive = new CatchUpArchive({
    repo,
    dir: path.join(dir, 'catch-up'),
    broadcastOf: () => 'brd_test',
    minFreeDiskBytes: 1_000_000,
    error: (id, e) => errors.push({ streamId: id, code: e.code }),
    log: createLogger('error'),
    now: () => clock,
    freeBytes: () => free,
  });
});
afterEach(() => {
  archive.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A layer of the stream, watched by the archive, fed the fixture (~10 s: four or five 2 s
 * segments); `sequence`: where its timeline continues (a later broadcast's numbers are above).
 */
function feed(sequence = 0): Layer {
  const layer = new Layer({
    name: 'a128',
    kbps: 128,
    container: 'fmp4',
    targetDurationMs: 2000,
    partTargetMs: 0,
    windowSegments: 6,
    passthrough: true,
    ...(sequence > 0 ? { continues: { sequence, discontinuity: 0 } } : {}),
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs: 0, expectCodec: 'aac' }),
  });
  archive.watch({ streamId, layers: [layer] } as unknown as StreamHub);
  for (const t of tags) layer.push(t.timestampMs, t.body);
  layer.flush();
  return layer;
}

const settled = async () => {
  while (archive.pending > 0) await new Promise((r) => setTimeout(r, 5));
};
const layerDir = () => path.join(dir, 'catch-up', streamId, 'a128');

describe('the catch-up archive', () => {
  it('writes and indexes every finished segment of a stream with catch-up on, with its init section', async () => {
    const layer = feed();
    await settled();
    const rows = repo.span(streamId, 'a128', 0, Number.MAX_SAFE_INTEGER);
    expect(rows.length).toBe(layer.segments.length);
    expect(rows.length).toBeGreaterThanOrEqual(4);
    for (const [i, r] of rows.entries()) {
      const s = layer.segments[i]!;
      expect(r).toMatchObject({ sequence: s.sequence, start_ms: Math.round(s.programDateMs), duration_ms: Math.round(s.durationMs), broadcast_id: 'brd_test', ext: 'm4s' });
      expect(readFileSync(path.join(layerDir(), `${s.sequence}.m4s`)).equals(Buffer.from(s.data))).toBe(true);
    }
    expect(readFileSync(path.join(layerDir(), `init-${layer.initId}.mp4`)).equals(Buffer.from(layer.init!))).toBe(true);
    expect(repo.bytes(streamId)).toBe(rows.reduce((n, r) => n + statSync(path.join(layerDir(), `${r.sequence}.m4s`)).size, 0));
  });

  it('keeps nothing while catch-up is off', async () => {
    repo.setHours(streamId, 0);
    feed();
    await settled();
    expect(repo.bytes(streamId)).toBe(0);
    expect(existsSync(layerDir())).toBe(false);
  });

  it('sweeps what is older than the window, and everything once catch-up is off', async () => {
    feed();
    await settled();
    const n = repo.span(streamId, 'a128', 0, Number.MAX_SAFE_INTEGER).length;
    expect(archive.sweep()).toBe(0);
    clock += 3_600_000 + 60_000; // the window (1 h) has passed
    expect(archive.sweep()).toBe(n);
    expect(readdirSync(layerDir()).filter((f) => f.endsWith('.m4s'))).toEqual([]);
    clock = Date.now();
    feed(100);
    await settled();
    expect(repo.bytes(streamId)).toBeGreaterThan(0);
    repo.setHours(streamId, 0);
    archive.sweep();
    expect(repo.bytes(streamId)).toBe(0);
    expect(existsSync(path.join(dir, 'catch-up', streamId))).toBe(false);
  });

  it('near the free-space floor deletes the oldest kept segments first, never the newest minutes, and says so once', async () => {
    feed();
    await settled();
    const old = repo.span(streamId, 'a128', 0, Number.MAX_SAFE_INTEGER);
    // Ten minutes later, the disk is at its floor: the next broadcast's segments push the old ones out.
    clock += 10 * 60_000;
    free = 1_000_000;
    const next = feed(100);
    await settled();
    // Each new segment took the room of the oldest kept ones (by air time): every segment deleted
    // aired before every segment kept; their files went with them.
    const written = [...old.map((r) => ({ sequence: r.sequence, start: r.start_ms })), ...next.segments.map((x) => ({ sequence: x.sequence, start: Math.round(x.programDateMs) }))];
    const gone = written.filter((r) => repo.get(streamId, 'a128', r.sequence) === undefined);
    const kept = written.filter((r) => repo.get(streamId, 'a128', r.sequence) !== undefined);
    expect(gone.length).toBeGreaterThanOrEqual(3);
    expect(kept.length).toBeGreaterThan(0);
    expect(Math.max(...gone.map((r) => r.start))).toBeLessThanOrEqual(Math.min(...kept.map((r) => r.start)));
    for (const r of gone) expect(existsSync(path.join(layerDir(), `${r.sequence}.m4s`))).toBe(false);
    expect(errors).toEqual([{ streamId, code: 'catch_up_trimmed' }]);
    // The newest minutes are never trimmed: with nothing older left, a segment that does not fit is not kept.
    clock = Date.now();
    const bytes = repo.bytes(streamId);
    feed(200);
    await settled();
    expect(repo.bytes(streamId)).toBe(bytes);
    expect(errors.length).toBe(1);
  });
});
