/**
 * Catch-up addresses over a 7-day index (docs/behaviour.md §17): real layer-hour files holding a
 * week of 2 s segments of two layers (604,800 records, each segment 64 bytes of stand-in audio),
 * read back at start as the archive does (the time and the index's memory are rows too), and the
 * catch-up route handlers themselves
 * (src/delivery/catch-up/routes.ts, called as the HTTP server calls them, without the socket):
 * - `archive/<t>-3600` and `from/<t>` layer playlists at random instants of the week (CPU per
 *   answer: the index search and the render);
 * - a `rewind` reload of a 24 h window with `_HLS_skip=YES`: its bytes and CPU beside a live
 *   6-segment media playlist of the same layer (rendered by src/delivery/hls/playlists.ts from a
 *   real layer), when nothing changed (the kept render) and when a segment was added since (a new
 *   render, what the first listener after each new segment pays).
 * `npx tsx bench/catch-up.bench.ts` prints the rows.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { openDatabase } from '../src/base/db/database.js';
import { CatchUpRepo, type CatchUpSegmentRow } from '../src/base/db/catch-up-repo.js';
import type { HttpServer, RawReply, RawRequestInfo } from '../src/base/http/server.js';
import { registerCatchUpRoutes } from '../src/delivery/catch-up/routes.js';
import { CatchUpArchive } from '../src/delivery/catch-up/archive.js';
import { LayerFiles } from '../src/delivery/catch-up/hour-store.js';
import { createLogger } from '../src/base/logger.js';
import { FlvReader } from '../src/live/media/flv.js';
import { Layer } from '../src/live/media/layer.js';
import { Segmenter } from '../src/native/segmenter.js';
import { mediaTemplate } from '../src/delivery/hls/playlists.js';
import type { BenchRow } from './lib/report.js';

const GROUP = 'Catch-up (7-day index, 2 layers of 2 s segments)';
const DAY = 86_400_000;
const SEG = 2000;

type Handler = (params: string[], query: string, requestId: string, info: RawRequestInfo) => RawReply;

/** The byte length of a live 6-segment media playlist of a real AAC layer (classic HLS, fMP4). */
function livePlaylistBytes(): number {
  const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../test/fixtures/aac/sine48k_stereo_128k.flv')));
  const l = new Layer({ name: 'a128', kbps: 128, container: 'fmp4', targetDurationMs: SEG, partTargetMs: 0, windowSegments: 6, passthrough: true, createSegmenter: () => new Segmenter({ container: 'fmp4', targetDurationMs: SEG, partTargetMs: 0, expectCodec: 'aac' }) });
  const span = tags.at(-1)!.timestampMs + 21;
  for (let k = 0; k < 3; k++) for (const t of tags.filter((x) => k === 0 || x.body[1] === 1)) l.push(k * span + t.timestampMs, t.body);
  return mediaTemplate(l).plain.byteLength;
}

/** CPU time (ms) per call of `fn` over `n` calls (process.cpuUsage: user + system). */
function cpuPer(n: number, fn: (i: number) => void): number {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) fn(i);
  const d = process.cpuUsage(before);
  return (d.user + d.system) / 1000 / n;
}

/**
 * CPU (ms) to keep one 32 KB segment of 100 layers, 2,000 segments a way, alternating in rounds:
 * appended to its layer-hour as the archive does (`LayerFiles.writeSync`: two writes on open
 * files), and from the thread pool (`LayerFiles.write`, after a write waited on the disk), beside the earlier
 * layout (a new file per segment, written and closed, and a SQLite row, 50 rows a transaction).
 */
async function keepCost(dir: string, repo: CatchUpRepo, id: string): Promise<{ append: number; pool: number; file: number }> {
  const data = Buffer.alloc(32_700, 7);
  const n = 100;
  const hourFiles = Array.from({ length: n }, (_, i) => new LayerFiles(path.join(dir, 'keep-new', `a${i}`), id, `a${i}`));
  for (const f of hourFiles) mkdirSync(f.dir, { recursive: true });
  for (let i = 0; i < n; i++) mkdirSync(path.join(dir, 'keep-old', `a${i}`), { recursive: true });
  const t0 = Date.now();
  let seq = 0;
  let append = 0;
  let pool = 0;
  let file = 0;
  for (let round = 0; round < 4; round++) {
    let c = process.cpuUsage();
    for (let k = 0; k < 500; k++) {
      const f = hourFiles[k % n]!;
      const e = { sequence: seq++, startMs: t0 + seq * 20, durationMs: SEG, offset: 0, length: data.byteLength, discontinuity: false, discontinuitySequence: 0, initId: '0123456789abcdef', ts: false };
      f.appendSync(e, [data], 'brd_bench', 0);
    }
    let d = process.cpuUsage(c);
    append += (d.user + d.system) / 1000;
    c = process.cpuUsage();
    for (let k = 0; k < 500; k++) {
      const f = hourFiles[k % n]!;
      const e = { sequence: seq++, startMs: t0 + seq * 20, durationMs: SEG, offset: 0, length: data.byteLength, discontinuity: false, discontinuitySequence: 0, initId: '0123456789abcdef', ts: false };
      await f.appendLater(e, [data], 'brd_bench', 0);
    }
    d = process.cpuUsage(c);
    pool += (d.user + d.system) / 1000;
    c = process.cpuUsage();
    const batch: CatchUpSegmentRow[] = [];
    for (let k = 0; k < 500; k++) {
      const layer = `a${k % n}`;
      const s = seq++;
      await writeFile(path.join(dir, 'keep-old', layer, `${s}.m4s`), data);
      batch.push({ stream_id: id, layer, sequence: s, start_ms: t0 + s * 20, duration_ms: SEG, discontinuity: 0, discontinuity_sequence: 0, init_id: '0123456789abcdef', ext: 'm4s', broadcast_id: 'brd_bench', bytes: data.byteLength });
      if (batch.length === 50) repo.db.transaction(() => void batch.splice(0).forEach((r) => repo.insert(r)))();
    }
    d = process.cpuUsage(c);
    file += (d.user + d.system) / 1000;
  }
  for (const f of hourFiles) f.closeWriter();
  repo.db.prepare('DELETE FROM catch_up_segments').run();
  rmSync(path.join(dir, 'keep-new'), { recursive: true, force: true });
  rmSync(path.join(dir, 'keep-old'), { recursive: true, force: true });
  return { append: append / 2000, pool: pool / 2000, file: file / 2000 };
}

export async function run(): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-bench-catch-up-'));
  const db = openDatabase(dir);
  try {
    const now = Date.now();
    const id = 'stm_bench';
    db.prepare("INSERT INTO accounts (id, name, plan, default_region, created_at) VALUES ('acct_bench', 'Bench', 'paid', 'eu-west-1', ?)").run(now);
    db.prepare(`INSERT INTO streams (id, account_id, title, titles, status, quality, codec, region, stream_key_hash, stream_key_enc, metadata, reconnect_window, recording, playback, latency_mode, created_at)
      VALUES (?, 'acct_bench', 'Bench', '{}', 'idle', 'medium', 'aac', 'eu-west-1', x'00', x'00', '{}', 30, NULL, 'public', 'standard', ?)`).run(id, now);
    const repo = new CatchUpRepo(db);
    repo.setHours(id, 168);
    const start = now - 7 * DAY;
    const perLayer = Math.floor((7 * DAY) / SEG);
    const payload = Buffer.alloc(64, 1);
    const layers = new Map(['a128', 'a64'].map((l) => [l, new LayerFiles(path.join(dir, 'catch-up', id, l), id, l)]));
    const append = (layer: string, i: number) => {
      const e = { sequence: i, startMs: start + i * SEG, durationMs: SEG, offset: 0, length: payload.byteLength, discontinuity: i % 1800 === 0, discontinuitySequence: Math.floor(i / 1800), initId: '0123456789abcdef', ts: false };
      const f = layers.get(layer)!;
      f.appendSync(e, [payload], `brd_${Math.floor(i / 1800)}`, 0);
    };
    for (const f of layers.values()) mkdirSync(f.dir, { recursive: true });
    for (const layer of layers.keys()) for (let i = 0; i < perLayer; i++) append(layer, i);
    for (const f of layers.values()) f.closeWriter();
    let next = perLayer;
    let clock = start + perLayer * SEG;
    // A restart: the archive reads the week back from the sidecars.
    const loadStart = process.cpuUsage();
    const t0 = performance.now();
    const kept = new CatchUpArchive({ repo, dir: path.join(dir, 'catch-up'), broadcastOf: () => null, minFreeDiskBytes: 0, error: () => {}, log: createLogger('error'), now: () => clock });
    const loadWallMs = performance.now() - t0;
    const lu = process.cpuUsage(loadStart);
    const loadCpuMs = (lu.user + lu.system) / 1000;
    const memoryPerLayerWeek = kept.indexMemory / 2;
    kept.close();

    const routes = new Map<string, Handler>();
    const http = { raw: (method: string, pattern: string, h: Handler) => routes.set(`${method} ${pattern}`, h) } as unknown as HttpServer;
    registerCatchUpRoutes(http, {
      repo,
      archive: { object: () => undefined, layer: (_: string, l: string) => layers.get(l)?.index, layers: () => [...layers.keys()] } as unknown as CatchUpArchive,
      source: { get: () => undefined },
      openBroadcast: () => null,
      codecOf: () => 'aac',
      targetDurationMs: SEG,
      now: () => clock,
    });
    const info = { remoteAddress: () => '127.0.0.1', header: () => '' } as unknown as RawRequestInfo;
    const archive = routes.get('get /hls/:id/archive/:span/:file')!;
    const from = routes.get('get /hls/:id/from/:t/:file')!;
    const rewind = routes.get('get /hls/:id/rewind/:file')!;
    const call = (h: Handler, params: string[], query = ''): RawReply => {
      const r = h(params, query, 'req_bench', info);
      if (!r.status.toString().includes('200')) throw new Error(`bench request answered ${r.status.toString()}: ${Buffer.from(r.body as Uint8Array).toString()}`);
      return r;
    };
    const randomInstant = (i: number) => Math.floor((start + DAY + ((i * 7_919_000) % (5 * DAY))) / 1000);

    const rows: BenchRow[] = [];
    // 24 h rewind window: the stream's window is 168 h, so look at a 24 h stream for the reload.
    repo.setHours(id, 24);
    const full = call(rewind, [id, 'a128.m3u8']).body as Uint8Array;
    const delta = call(rewind, [id, 'a128.m3u8'], '_HLS_skip=YES').body as Uint8Array;
    const live = livePlaylistBytes();
    const cachedDelta = cpuPer(2000, () => call(rewind, [id, 'a128.m3u8'], '_HLS_skip=YES'));
    const newDelta = cpuPer(200, () => {
      append('a128', next++);
      clock += SEG;
      call(rewind, [id, 'a128.m3u8'], '_HLS_skip=YES');
    });
    const fullRender = cpuPer(10, () => {
      append('a128', next++);
      clock += SEG;
      call(rewind, [id, 'a128.m3u8']);
    });
    repo.setHours(id, 168);
    const archiveCpu = cpuPer(300, (i) => call(archive, [id, `${randomInstant(i)}-3600`, 'a128.m3u8']));
    const shortCpu = cpuPer(1000, (i) => call(archive, [id, `${randomInstant(i)}-300`, 'a128.m3u8']));
    const searchCpu = cpuPer(1000, (i) => layers.get('a128')!.index.span(randomInstant(i) * 1000, randomInstant(i) * 1000 + 3_600_000));
    const fromCpu = cpuPer(100, (i) => call(from, [id, String(Math.floor(clock / 1000) - 3600 - (i % 600)), 'a128.m3u8']));
    // A restart's first full render: no run of segment lines kept yet.
    const coldRegistry = new Map<string, Handler>();
    registerCatchUpRoutes({ raw: (method: string, pattern: string, h: Handler) => coldRegistry.set(`${method} ${pattern}`, h) } as unknown as HttpServer, {
      repo,
      archive: { object: () => undefined, layer: (_: string, l: string) => layers.get(l)?.index, layers: () => [...layers.keys()] } as unknown as CatchUpArchive,
      source: { get: () => undefined },
      openBroadcast: () => null,
      codecOf: () => 'aac',
      targetDurationMs: SEG,
      now: () => clock,
    });
    repo.setHours(id, 24);
    const coldFull = cpuPer(1, () => call(coldRegistry.get('get /hls/:id/rewind/:file')!, [id, 'a128.m3u8']));
    repo.setHours(id, 168);
    const keep = await keepCost(dir, repo, id);
    const bench = new Bench({ time: 1000, warmupTime: 200 });
    let k = 0;
    bench.add('archive lookup + render', () => void call(archive, [id, `${randomInstant(k++)}-3600`, 'a128.m3u8']));
    await bench.run();
    const wall = (bench.tasks[0]!.result as unknown as { latency?: { mean: number }; mean?: number });
    rows.push(
      { group: GROUP, name: 'rewind 24 h, delta reload (_HLS_skip=YES)', value: delta.byteLength, unit: 'B', peer: { name: 'live 6-segment playlist', value: live }, note: `full window ${Math.round(full.byteLength / 1024)} KiB` },
      { group: GROUP, name: 'rewind delta reload CPU, nothing new (kept render)', value: cachedDelta, unit: 'ms' },
      { group: GROUP, name: 'rewind delta reload CPU, a segment added since (new render)', value: newDelta, unit: 'ms' },
      { group: GROUP, name: 'rewind 24 h full playlist CPU, a segment added since (new render)', value: fullRender, unit: 'ms', note: "a player's first load; kept until the next segment" },
      { group: GROUP, name: 'archive/<t>-3600 layer playlist CPU (random t in 7 days)', value: archiveCpu, unit: 'ms', note: `wall mean ${(wall.latency?.mean ?? wall.mean ?? NaN).toFixed(3)} ms; 1800 segments listed` },
      { group: GROUP, name: 'archive/<t>-300 layer playlist CPU (random t in 7 days)', value: shortCpu, unit: 'ms', note: '150 segments listed' },
      { group: GROUP, name: 'index search alone, 1 h span (random t in 7 days)', value: searchCpu, unit: 'ms', note: '1800 rows read' },
      { group: GROUP, name: 'from/<t> layer playlist CPU (t ≈ 1 h ago)', value: fromCpu, unit: 'ms', note: '≈ 1800 segments listed' },
      { group: GROUP, name: 'rewind 24 h full playlist CPU, first render after a start (no run kept)', value: coldFull, unit: 'ms' },
      { group: GROUP, name: 'keep a 32 KB segment (append to its layer-hour): CPU', value: keep.append, unit: 'ms', peer: { name: 'a new file and a SQLite row per segment', value: keep.file }, note: `from the thread pool: ${keep.pool.toFixed(3)} ms` },
      { group: GROUP, name: 'start: the week of 2 layers read back from the sidecars (CPU)', value: loadCpuMs, unit: 'ms', note: `wall ${loadWallMs.toFixed(0)} ms; 604,800 records` },
      { group: GROUP, name: 'in-memory index per layer-week of 2 s segments', value: memoryPerLayerWeek / 1048576, unit: 'MiB', note: '302,400 records of 48 bytes' },
    );
    return rows;
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run()) console.log(`${r.group} | ${r.name}: ${r.value.toFixed(3)} ${r.unit}${r.peer ? ` (${r.peer.name}: ${r.peer.value})` : ''} ${r.note ?? ''}`);
}
