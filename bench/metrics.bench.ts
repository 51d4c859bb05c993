/**
 * What watching the node costs (docs/metrics.md).
 *
 * 1. LL-HLS part and playlist GETs per server CPU-second with metrics on (a scraper reading
 *    `GET /metrics` every 1 s, as Prometheus would) against off (no scraper), same server, same
 *    run. One `skylark serve` (dist/, one HTTP thread), a low-latency AAC stream published until
 *    3 segments are listed, then stopped (its last parts stay kept for the reconnect window). Each
 *    round runs `wrk -t1` for BENCH_METRICS_SECONDS (6) at BENCH_METRICS_CONNS (100) keep-alive
 *    connections against the newest part, then the media playlist, first without then with the
 *    scraper (the order alternates between rounds; BENCH_METRICS_ROUNDS, 3). Server CPU is user +
 *    system time from /proc over each run. Rows: the median of the rounds, on beside off.
 * 2. One scrape of a node with 1,000 streams: the metrics registry (prom-client's default metrics
 *    included) over a real listener registry holding BENCH_METRICS_LISTENERS (20,000) sessions
 *    spread over 1,000 streams and three protocols, 1,000 live hubs' ingest figures, an HTTP tally
 *    with every route class and a dozen statuses; the label cap at its default (100). CPU time of
 *    this process per scrape (`process.cpuUsage`, user + system), median and 95th percentile of
 *    BENCH_METRICS_SCRAPES (100) after 10 warm-up scrapes. The goal: under 20 ms.
 *
 * Alone: `npx tsx bench/metrics.bench.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { have, sleep, stop } from './lib/proc.js';
import { get } from './lib/http-check.js';
import { createAccount, envNum, measure, median, startSkylark, type Measured } from './http-segments.js';
import { livePart } from './ll-parts.bench.js';
import { openDatabase } from '../src/base/db/database.js';
import { EventsRepo } from '../src/base/db/events-repo.js';
import { ListenersRepo } from '../src/base/db/listeners-repo.js';
import { Outbox } from '../src/base/outbox.js';
import { createLogger } from '../src/base/logger.js';
import { ListenerRegistry, type ListenerProtocol } from '../src/delivery/listeners/registry.js';
import { NodeMetrics, type MetricsSources } from '../src/base/metrics/node-metrics.js';
import { HttpTally, ROUTE_CLASSES, sumTallies } from '../src/base/http/tally.js';

const GROUP_AB = 'LL-HLS GETs per server CPU-second, metrics on (GET /metrics every 1 s) vs off (wrk -t1, keep-alive, one HTTP thread)';
const GROUP_SCRAPE = 'GET /metrics: CPU of one scrape';
const log = (s: string) => process.stderr.write(`[metrics] ${s}\n`);

/** Reads `url` every second until stopped; counts the scrapes that answered 200. */
function scraper(url: string): { stop(): number } {
  let ok = 0;
  const timer = setInterval(() => {
    fetch(url, { signal: AbortSignal.timeout(5000) })
      .then(async (r) => {
        await r.text();
        if (r.status === 200) ok++;
      })
      .catch(() => {});
  }, 1000);
  return {
    stop() {
      clearInterval(timer);
      return ok;
    },
  };
}

/** Part 1: the same server's LL-HLS GETs with and without a scraper (see the module comment). */
async function onOff(): Promise<BenchRow[]> {
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  const seconds = envNum('BENCH_METRICS_SECONDS', 6);
  const rounds = Math.max(1, Math.round(envNum('BENCH_METRICS_ROUNDS', 3)));
  const conns = Math.max(1, Math.round(envNum('BENCH_METRICS_CONNS', 100)));
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-metrics-'));
  let child: ChildProcess | null = null;
  try {
    const sky = await startSkylark(path.join(work, 'node'), { SKYLARK_ABR_LADDER: '0' });
    child = sky.child;
    const part = await livePart(sky.http, await createAccount(path.join(work, 'node'), sky.defaultSecretKey));
    const playlistUrl = new URL('index.m3u8', part.url).href;
    const playlist = await get(playlistUrl);
    if (playlist.status !== 200) throw new Error(`${playlistUrl} answered ${playlist.status}`);
    const targets = [
      { what: 'part', url: part.url, bytes: part.bytes },
      { what: 'playlist', url: playlistUrl, bytes: playlist.body },
    ];
    const got = new Map<string, Measured[]>();
    const scrapes: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const on of r % 2 === 0 ? [false, true] : [true, false]) {
        const s = on ? scraper(`${sky.http}/metrics`) : null;
        for (const t of targets) {
          const m = await measure(t.url, sky.child.pid!, t.bytes, { threads: 1, connections: conns, seconds });
          const key = `${t.what} ${on ? 'on' : 'off'}`;
          got.set(key, [...(got.get(key) ?? []), m]);
          log(`round ${r + 1}/${rounds} ${key}: ${Math.round(m.wrk.reqPerSec)} req/s, server CPU ${m.serverCpu.toFixed(0)} %, box ${m.boxCpu.toFixed(0)} %${m.invalid.length ? `, INVALID: ${m.invalid.join('; ')}` : ''}`);
        }
        if (s) scrapes.push(s.stop());
        await sleep(500);
      }
    }
    const perCpu = (m: Measured) => (m.serverCpu > 0 && m.invalid.length === 0 && m.wrk.non2xx3xx === 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN);
    const value = (key: string) => median((got.get(key) ?? []).map(perCpu));
    const runs = (key: string) => (got.get(key) ?? []).map((m) => Math.round(perCpu(m))).join(', ');
    const box = (key: string) => median((got.get(key) ?? []).map((m) => m.boxCpu)).toFixed(0);
    return targets.map((t) => ({
      group: GROUP_AB,
      name: `${conns} conns, ${t.what === 'part' ? 'part GET (native HTTP front)' : 'media playlist GET (HLS routes)'}: metrics on vs off`,
      value: value(`${t.what} on`),
      unit: 'req/CPU-s',
      peer: { name: 'metrics off', value: value(`${t.what} off`) },
      note: `${seconds} s × ${rounds}, median; runs on ${runs(`${t.what} on`)}; off ${runs(`${t.what} off`)}; scrapes answered per on-phase ${scrapes.join(', ')}; box busy ${box(`${t.what} on`)} / ${box(`${t.what} off`)} % of 200`,
    }));
  } finally {
    if (child) await stop(child, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}

/** Part 2: the CPU of one scrape of a node with 1,000 streams (see the module comment). */
async function scrapeCost(): Promise<BenchRow[]> {
  const streams = 1000;
  const listeners = Math.max(streams, Math.round(envNum('BENCH_METRICS_LISTENERS', 20_000)));
  const scrapes = Math.max(10, Math.round(envNum('BENCH_METRICS_SCRAPES', 100)));
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-scrape-'));
  const db = openDatabase(work);
  const registry = new ListenerRegistry({ db, repo: new ListenersRepo(db), outbox: new Outbox(new EventsRepo(db)), log: createLogger('error') });
  try {
    const protocols: ListenerProtocol[] = ['hls', 'icecast', 'webrtc'];
    for (let i = 0; i < listeners; i++) {
      const protocol = protocols[i % 3]!;
      registry.join({ streamId: `str_${String(i % streams).padStart(6, '0')}`, accountId: 'acct_1', key: protocol === 'icecast' ? '' : `k${i}`, protocol, country: null, userAgent: 'bench', timeoutMs: 0 });
    }
    const tally = new HttpTally();
    for (let c = 0; c < ROUTE_CLASSES.length; c++) for (const s of [200, 201, 204, 206, 304, 400, 401, 403, 404, 405, 429, 503]) tally.add(c, s);
    const sources: MetricsSources = {
      listeners: function* () {
        for (const l of registry.byProtocol()) yield { stream: l.streamId, protocol: l.protocol === 'icecast' ? 'listen' : l.protocol, count: l.count };
      },
      ingest: () => Array.from({ length: streams }, (_, i) => ({ stream: `str_${String(i).padStart(6, '0')}`, live: true, kbps: 128 + (i % 7) })),
      http: async () => {
        const s = sumTallies([tally.nonZero()]);
        return { requests: s.requests, bytes: { hls: 1e9, listen: 1e9, icecast: 1e8 } };
      },
      heldReloads: () => 1234,
      refusals: () => ({ listen_connections: 3, http_held_per_ip: 9, hls_sessions_per_ip: 12 }),
      webhookDeliveries: () => ({ delivered: 100, retrying: 3, undelivered: 1 }),
      webhookQueueDepth: () => 4,
      downloadsCounted: () => 5678,
      ffmpegProcesses: () => 40,
    };
    const metrics = new NodeMetrics({ sources, maxStreams: 100 });
    const cpu: number[] = [];
    let size = 0;
    for (let i = 0; i < scrapes + 10; i++) {
      const c0 = process.cpuUsage();
      size = (await metrics.scrape()).length;
      const c = process.cpuUsage(c0);
      if (i >= 10) cpu.push((c.user + c.system) / 1000);
    }
    cpu.sort((a, b) => a - b);
    const p95 = cpu[Math.min(cpu.length - 1, Math.floor(cpu.length * 0.95))]!;
    log(`scrape: median ${median(cpu).toFixed(2)} ms CPU, p95 ${p95.toFixed(2)} ms, ${size} bytes`);
    return [
      {
        group: GROUP_SCRAPE,
        name: `${streams} streams, ${listeners} listeners, label cap 100 (goal: under 20 ms)`,
        value: Math.round(median(cpu) * 100) / 100,
        unit: 'ms CPU',
        note: `median of ${scrapes}; p95 ${p95.toFixed(2)} ms; ${size} bytes of text; prom-client default metrics included`,
      },
    ];
  } finally {
    registry.close();
    db.close();
    rmSync(work, { recursive: true, force: true });
  }
}

export async function run(): Promise<BenchRow[]> {
  const rows = await scrapeCost();
  try {
    rows.push(...(await onOff()));
  } catch (e) {
    log(`on/off: ${e instanceof Error ? e.message : String(e)}`);
    throw e;
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  run().then(
    (rows) => {
      for (const r of rows) process.stdout.write(`${r.name}: ${r.value} ${r.unit}${r.peer ? ` (${r.peer.name}: ${r.peer.value})` : ''}${r.note ? ` — ${r.note}` : ''}\n`);
      process.exit(0);
    },
    (e) => {
      process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
      process.exit(1);
    },
  );
}
