/**
 * The catch-up archive (docs/behaviour.md §17) over a real layer fed by the native segmenter (the
 * AAC fixture), a real SQLite file and real files: every finished segment is appended to its
 * layer-hour (`<YYYYMMDDHH>.seg` and its sidecar `.idx`) and indexed while the stream's catch-up
 * is on (and nothing while it is off); a restarted archive reads the hours back (ignoring a record
 * a crash cut short) and converts the earlier layout (a file and a SQLite row per segment); the
 * sweep deletes the hours older than the window and everything of a stream whose catch-up was
 * turned off; near the free-space floor the oldest hours go first — never one of the last minutes —
 * with one `catch_up_trimmed` per stream. The volume's free space and the wall clock (the
 * segments' program date-times) are the stand-ins (a test cannot fill a shared disk safely, nor
 * wait an hour).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
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
import { segmentPieces } from '../../../../src/live/media/layer-media.js';
import type { StreamHub } from '../../../../src/live/media/hub.js';
import { Segmenter } from '../../../../src/native/segmenter.js';
import { CatchUpArchive, WRITE_AFTER_MS } from '../../../../src/delivery/catch-up/archive.js';
import { createLogger } from '../../../../src/base/logger.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));

let dir: string;
let db: Database;
let repo: CatchUpRepo;
let streamId: string;
/** The volume's size (bytes): its free space is what the catch-up directory leaves of it. */
let capacity: number;
let clock: number;
let errors: Array<{ streamId: string; code: string }>;
let warnings: string[] = [];
let archive: CatchUpArchive;

beforeEach(async () => {
  warnings = [];
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-catch-up-'));
  db = openDatabase(dir);
  const accounts = new AccountsRepo(db);
  const acct = (await new AccountsService(accounts).create({ name: 'T', plan: 'paid', region: 'eu-west-1' })).account.id;
  const urls = { baseUrl: 'http://x/v2', authUrl: 'http://x', cdnUrl: 'http://cdn', ingestUrl: 'ingest:1935' } as PublicUrls;
  const svc = new StreamsService({ streams: new StreamsRepo(db), accounts, nodeSecret: randomBytes(32), urls: () => urls, live: { listenerCount: () => 0, endNow: () => {}, disconnectPublisher: () => {}, nowPlaying: () => {} } });
  streamId = svc.create(acct, { title: 'A', catchUp: { hours: 1 } }).value.id;
  repo = new CatchUpRepo(db);
  capacity = Number.MAX_SAFE_INTEGER;
  clock = Date.now();
  errors = [];
  archive = open();
});

/**
 * An archive over the test's directory (a restart: a new one over the same files); `slowDisk`:
 * every timed append seems to take 10 ms (true), or the ms of the list in turn.
 */
function open(slowDisk: boolean | number[] = false, writeAfterMs = 5): CatchUpArchive {
  const takes = slowDisk === true ? [10] : slowDisk || [];
  let t = 0;
  let calls = 0;
  // Called before and after each timed append: the second call returns the append's "duration" later.
  const elapsed = () => (calls++ % 2 === 0 ? t : (t += takes[(calls / 2 - 1) % takes.length]!));
  return new CatchUpArchive({
    repo,
    dir: path.join(dir, 'catch-up'),
    broadcastOf: () => 'brd_test',
    minFreeDiskBytes: 1_000_000,
    error: (id, e) => errors.push({ streamId: id, code: e.code }),
    log: createLogger('error'),
    now: () => clock,
    freeBytes: () => capacity - used(),
    writeAfterMs,
    ...(slowDisk ? { elapsed, log: { ...createLogger('error'), warn: (msg: string) => void warnings.push(msg) } } : {}),
  });
}
afterEach(() => {
  vi.useRealTimers();
  archive.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A layer of the stream, watched by the archive, fed the fixture (~10 s: four or five 2 s
 * segments); `sequence`: where its timeline continues (a later broadcast's numbers are above).
 */
function feed(sequence = 0, partTargetMs = 0): Layer {
  const layer = new Layer({
    name: 'a128',
    kbps: 128,
    container: 'fmp4',
    targetDurationMs: 2000,
    partTargetMs,
    windowSegments: 6,
    passthrough: true,
    ...(sequence > 0 ? { continues: { sequence, discontinuity: 0 } } : {}),
    // With parts, as the ladder builds it: the segmenter hands out no segment bytes (a segment is its parts').
    createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs, expectCodec: 'aac', ...(partTargetMs > 0 ? { segmentBytes: false } : {}) }),
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
const HOUR = 3_600_000;
/** Bytes of every file under the catch-up directory. */
function used(d = path.join(dir, 'catch-up')): number {
  let n = 0;
  for (const e of readdirSync(d, { withFileTypes: true })) n += e.isDirectory() ? used(path.join(d, e.name)) : statSync(path.join(d, e.name)).size;
  return n;
}
/** The wall clock (what the layer dates its segments by) and the archive's clock set to `ms`. */
const at = (ms: number) => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(ms);
  clock = ms;
};
/** Every kept segment of the layer, in order. */
const kept = () => archive.layer(streamId, 'a128')?.from(0) ?? [];
const files = () => readdirSync(layerDir()).sort();
/** The layer-hour file names of instant `ms` (`YYYYMMDDHH`). */
const hourOf = (ms: number) => new Date(ms).toISOString().slice(0, 13).replace(/[-T]/g, '');
/** A restart: the archive closed and opened again over the same files. */
const restart = () => {
  archive.close();
  archive = open();
};


describe('the catch-up archive', () => {
  it('appends every finished segment of a stream with catch-up on to its layer-hour, with its init section', async () => {
    const layer = feed();
    await settled();
    const rows = kept();
    expect(rows.length).toBe(layer.segments.length);
    expect(rows.length).toBeGreaterThanOrEqual(4);
    for (const [i, r] of rows.entries()) {
      const s = layer.segments[i]!;
      expect(r).toMatchObject({ sequence: s.sequence, start_ms: Math.round(s.programDateMs), duration_ms: Math.round(s.durationMs), broadcast_id: 'brd_test', ext: 'm4s', init_id: layer.initId });
      expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
    }
    expect(archive.object(streamId, 'a128', `${rows.at(-1)!.sequence + 1}.m4s`, rows.at(-1)!.sequence + 1)).toBeUndefined();
    expect(Buffer.from(archive.object(streamId, 'a128', `init-${layer.initId}.mp4`, null)!).equals(Buffer.from(layer.init!))).toBe(true);
    // One data file and one sidecar per hour (a record of the broadcast id, then one per segment), no file per segment.
    const hours = [...new Set(rows.map((r) => hourOf(r.start_ms)))];
    expect(files()).toEqual([...hours.flatMap((h) => [`${h}.idx`, `${h}.seg`]), `init-${layer.initId}.mp4`].sort());
    const segBytes = hours.reduce((n, h) => n + statSync(path.join(layerDir(), `${h}.seg`)).size, 0);
    expect(archive.bytes(streamId)).toBe(segBytes);
    expect(segBytes).toBe(layer.segments.reduce((n, s) => n + s.data.byteLength, 0));
    expect(hours.reduce((n, h) => n + statSync(path.join(layerDir(), `${h}.idx`)).size, 0)).toBe(48 * (rows.length + hours.length));
    expect(archive.hasBroadcast('brd_test')).toBe(true);
  });

  it('writes the segments that finished meanwhile together, WRITE_AFTER_MS after the first; at once when the layer ends or the archive closes', async () => {
    archive.close();
    archive = open(false, WRITE_AFTER_MS);
    const t0 = performance.now();
    let layer = feed();
    expect(archive.pending).toBe(layer.segments.length);
    expect(kept()).toEqual([]);
    await settled();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(WRITE_AFTER_MS - 5);
    expect(kept().map((r) => r.sequence)).toEqual(layer.segments.map((s) => s.sequence));
    expect(archive.bytes(streamId)).toBe(layer.segments.reduce((n, s) => n + s.data.byteLength, 0));
    // The layer's end (the broadcast's last segment) is written at once.
    const first = layer.nextSequence;
    layer = feed(first);
    expect(kept().at(-1)!.sequence).toBeLessThan(first);
    layer.end();
    expect(archive.pending).toBe(0);
    expect(kept().at(-1)!.sequence).toBe(layer.segments.at(-1)!.sequence);
    // What waits when the archive closes (a stop) is written before its files close: a restart has it.
    const more = feed(layer.nextSequence);
    expect(archive.pending).toBeGreaterThan(0);
    restart();
    expect(kept().at(-1)!.sequence).toBe(more.segments.at(-1)!.sequence);
  });

  it('keeps a layer with parts from its parts, without joining a segment into a copy', async () => {
    const layer = feed(0, 500);
    await settled();
    const rows = kept();
    expect(rows.map((r) => r.sequence)).toEqual(layer.segments.map((s) => s.sequence));
    for (const s of layer.segments) {
      // Still held as its parts (a live player never asked for the segment as one buffer).
      const pieces = segmentPieces(s);
      expect(pieces.length).toBeGreaterThan(1);
      const kept = Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!);
      expect(kept.equals(Buffer.concat(pieces))).toBe(true);
      expect(kept.equals(Buffer.from(s.data))).toBe(true);
    }
  });

  it('keeps a layer with parts from the thread pool too (a slow disk), whole', async () => {
    archive.close();
    archive = open(true);
    const layer = feed(0, 500);
    await settled();
    expect(kept().map((r) => r.sequence)).toEqual(layer.segments.map((s) => s.sequence));
    for (const s of layer.segments) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
  });

  it('keeps nothing while catch-up is off', async () => {
    repo.setHours(streamId, 0);
    feed();
    await settled();
    expect(archive.bytes(streamId)).toBe(0);
    expect(existsSync(layerDir())).toBe(false);
  });

  it('serves the archive at once after a restart, and appends after what was kept', async () => {
    const t0 = Date.parse('2026-11-29T06:20:00Z');
    at(t0);
    const first = feed();
    await settled();
    const before = kept();
    restart();
    expect(kept()).toEqual(before);
    for (const s of first.segments) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
    at(t0 + 60_000);
    const second = feed(100);
    await settled();
    restart();
    expect(kept().map((r) => r.sequence)).toEqual([...first.segments, ...second.segments].map((s) => s.sequence));
    for (const s of second.segments) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
  });

  it('ignores at start a record a crash cut short (and its segment), and appends over it', async () => {
    at(Date.parse('2026-11-29T06:20:00Z'));
    const layer = feed();
    await settled();
    const h = hourOf(clock);
    const segs = layer.segments;
    const last = segs.at(-1)!;
    archive.close();
    // kill -9 in mid-append: the newest record half written…
    const idx = path.join(layerDir(), `${h}.idx`);
    truncateSync(idx, statSync(idx).size - 20);
    archive = open();
    expect(kept().map((r) => r.sequence)).toEqual(segs.slice(0, -1).map((s) => s.sequence));
    expect(archive.object(streamId, 'a128', `${last.sequence}.m4s`, last.sequence)).toBeUndefined();
    expect(statSync(idx).size % 48).toBe(0);
    // …or whole while the segment's bytes are not all on disk: the record is ignored too.
    archive.close();
    const seg = path.join(layerDir(), `${h}.seg`);
    truncateSync(seg, statSync(seg).size - segs.at(-2)!.data.byteLength / 2 - last.data.byteLength);
    archive = open();
    expect(kept().map((r) => r.sequence)).toEqual(segs.slice(0, -2).map((s) => s.sequence));
    // The next segments go where the lost ones were, and read back whole after another restart.
    at(clock + 30_000);
    const next = feed(100);
    await settled();
    restart();
    expect(kept().map((r) => r.sequence)).toEqual([...segs.slice(0, -2), ...next.segments].map((s) => s.sequence));
    for (const s of [...segs.slice(0, -2), ...next.segments]) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
  });

  it('converts a data directory of the earlier layout (a file and a SQLite row per segment) at start', async () => {
    const t0 = Date.parse('2026-11-29T06:59:56Z');
    at(t0);
    const layer = feed();
    await settled();
    archive.close();
    // The same segments as the earlier version kept them: `<sequence>.m4s` beside the init section, a row each.
    rmSync(layerDir(), { recursive: true });
    mkdirSync(layerDir(), { recursive: true });
    writeFileSync(path.join(layerDir(), `init-${layer.initId}.mp4`), layer.init!);
    for (const s of layer.segments) {
      writeFileSync(path.join(layerDir(), `${s.sequence}.m4s`), s.data);
      repo.insert({ stream_id: streamId, layer: 'a128', sequence: s.sequence, start_ms: Math.round(s.programDateMs), duration_ms: Math.round(s.durationMs), discontinuity: s.discontinuity ? 1 : 0, discontinuity_sequence: s.discontinuitySequence, init_id: s.initId, ext: 'm4s', broadcast_id: 'brd_old', bytes: s.data.byteLength });
    }
    archive = open();
    const rows = kept();
    expect(rows.map((r) => [r.sequence, r.start_ms, r.broadcast_id])).toEqual(layer.segments.map((s) => [s.sequence, Math.round(s.programDateMs), 'brd_old']));
    for (const s of layer.segments) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
    expect(archive.hasBroadcast('brd_old')).toBe(true);
    // Across the hour boundary: two layer-hours; the old files and rows are gone.
    expect(files().filter((f) => f.endsWith('.m4s'))).toEqual([]);
    expect(files().filter((f) => f.endsWith('.seg'))).toEqual([`${hourOf(t0)}.seg`, `${hourOf(t0 + HOUR)}.seg`]);
    expect(repo.legacyStreams()).toEqual([]);
    restart();
    expect(kept()).toEqual(rows);
  });

  it('after an append that waited on the disk, appends from the thread pool (and keeps every segment)', async () => {
    archive.close();
    archive = open(true);
    const layer = feed();
    await settled();
    expect(kept().map((r) => r.sequence)).toEqual(layer.segments.map((s) => s.sequence));
    for (const s of layer.segments) expect(Buffer.from(archive.object(streamId, 'a128', `${s.sequence}.m4s`, s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
    // The first three appends took "10 ms" each: the rest went through the thread pool, untimed (one warning).
    expect(layer.segments.length).toBeGreaterThan(4);
    expect(warnings).toEqual(['catch-up: a segment write waited on the disk; writing from the thread pool for a minute']);
  });

  it('one slow append alone (a descheduled thread, not the disk) keeps appending at once', async () => {
    archive.close();
    archive = open([10, 0, 10, 10, 0]);
    const layer = feed();
    await settled();
    expect(layer.segments.length).toBeGreaterThan(4);
    expect(kept().map((r) => r.sequence)).toEqual(layer.segments.map((s) => s.sequence));
    expect(warnings).toEqual([]);
  });

  it('sweeps the hours older than the window, whole, and everything once catch-up is off', async () => {
    const t0 = Date.parse('2026-11-29T06:20:00Z');
    at(t0);
    feed();
    await settled();
    at(t0 + HOUR);
    feed(100);
    await settled();
    const n = kept().length;
    const older = kept().filter((r) => hourOf(r.start_ms) === hourOf(t0)).length;
    // 07:20 + 1 h: the 06:xx hour is older than the window, the 07:xx one is not.
    clock = t0 + 2 * HOUR;
    expect(archive.sweep()).toBe(older);
    expect(kept().length).toBe(n - older);
    expect(files().filter((f) => f.endsWith('.seg'))).toEqual([`${hourOf(t0 + HOUR)}.seg`]);
    repo.setHours(streamId, 0);
    expect(archive.sweep()).toBe(n - older);
    expect(archive.bytes(streamId)).toBe(0);
    expect(archive.hasBroadcast('brd_test')).toBe(false);
    expect(existsSync(path.join(dir, 'catch-up', streamId))).toBe(false);
  });

  it('near the free-space floor deletes the oldest hours first, never one of the newest minutes, and says so once', async () => {
    const t0 = Date.parse('2026-11-29T06:20:00Z');
    at(t0);
    feed();
    await settled();
    const old = kept();
    // An hour later, the disk nears its floor: room for one more segment, and the next broadcast's push the old hour out.
    at(t0 + HOUR);
    capacity = 1_000_000 + used() + 40_000;
    const next = feed(100);
    await settled();
    expect(kept().map((r) => r.sequence)).toEqual(next.segments.map((s) => s.sequence));
    for (const r of old) expect(archive.object(streamId, 'a128', `${r.sequence}.m4s`, r.sequence)).toBeUndefined();
    expect(files().filter((f) => f.endsWith('.seg') || f.endsWith('.idx'))).toEqual([`${hourOf(t0 + HOUR)}.idx`, `${hourOf(t0 + HOUR)}.seg`]);
    expect(errors).toEqual([{ streamId, code: 'catch_up_trimmed' }]);
    // The newest minutes are never trimmed: with nothing older left, a segment that does not fit is not kept.
    at(t0 + HOUR + 60_000);
    capacity = 1_000_000 + used();
    const bytes = archive.bytes(streamId);
    feed(200);
    await settled();
    expect(archive.bytes(streamId)).toBe(bytes);
    expect(errors.length).toBe(1);
  });
});
