/**
 * HLS serving load run: Skylark (the CLI, `node bin/skylark.js serve`, as its own process) against
 * Debian nginx serving copies of the same bytes (bench/peers/nginx-static.conf.tmpl, 1 worker,
 * open_file_cache), with wrk -t1 at 100 and 1000 connections, in the same run. See
 * docs/benchmarks.md for what each number means.
 *
 * Setup: a real account (CLI `accounts create`) and stream (`POST /v2/streams`, reconnectWindow
 * 300), a real AAC publish with FFmpeg until the media playlist lists ≥ 3 segments, then the
 * publisher stops: the stream stays live inside its reconnect window, so the hub keeps its segments
 * and the playlist stops changing. The newest full-length segment and the media playlist are the
 * targets; their bytes are written to nginx's static dir. Every URL is checked (200, same bytes)
 * before and after every wrk run. The '+titles' rows do the same with a second stream whose title
 * was set through the API every 10 s while it was published (`POST /v2/streams/{id}/now_playing`),
 * so its objects carry what now-playing adds (EXT-X-DATERANGE, timed ID3): same run, same rounds.
 *
 * Settings (environment): BENCH_HTTP_SECONDS (10), BENCH_HTTP_ROUNDS (3; each row is the median),
 * BENCH_HTTP_CONNS ("100,1000"), BENCH_HTTP_WARMUP_SECONDS (2; 0 = none), BENCH_HTTP_THREADS (1),
 * BENCH_HTTP_TITLES (1: also the '+titles' rows; 0: without),
 * SKYLARK_BENCH_CPU_PROF (a directory: runs Skylark with `node --cpu-prof` into it),
 * SKYLARK_BENCH_NODE_FLAGS (more node flags for Skylark, e.g. `--perf-basic-prof` for `perf`),
 * BENCH_SKYLARK_THREADS (Skylark's SKYLARK_HTTP_THREADS, default 1; the players bench too),
 * BENCH_HTTP10_COMPARE (1: also a second Skylark with the HTTP/1.0 front off, `SKYLARK_HTTP10=0`,
 * measured in the same rounds on its own stream, so the rows show what the front's hooks cost
 * HTTP/1.1 requests; 0: without).
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { cpuMeter, freePort, have, runToEnd, sleep, spawnWithFds, stop } from './lib/proc.js';
import { runWrk, socketErrorCount, type WrkResult } from './lib/wrk.js';
import { checkServes, get, rawResponseSize } from './lib/http-check.js';

const root = path.resolve(import.meta.dirname, '..');
const GROUP = 'HLS serving: Skylark (CLI process) vs nginx static, wrk';
const log = (msg: string) => process.stderr.write(`[http-segments] ${msg}\n`);

/** `SKYLARK_HTTP_THREADS` of the Skylark the benches start (BENCH_SKYLARK_THREADS, default 1). */
export const SKYLARK_THREADS = process.env.BENCH_SKYLARK_THREADS || '1';
/** A non-negative number from the environment, or `dflt`. */
export const envNum = (name: string, dflt: number) => {
  const v = process.env[name];
  const n = v === undefined || v === '' ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n : dflt;
};

interface Target {
  /** 'segment' | 'playlist', with ' +titles' for the stream whose title changed every 10 s. */
  kind: string;
  bytes: Uint8Array;
  skylark: string;
  nginx: string | null;
}

export interface Measured {
  wrk: WrkResult;
  serverCpu: number;
  boxCpu: number;
  invalid: string[];
}

export async function run(): Promise<BenchRow[]> {
  const seconds = envNum('BENCH_HTTP_SECONDS', 10);
  const rounds = Math.max(1, Math.round(envNum('BENCH_HTTP_ROUNDS', 3)));
  const warmup = envNum('BENCH_HTTP_WARMUP_SECONDS', 2);
  const threads = Math.max(1, Math.round(envNum('BENCH_HTTP_THREADS', 1)));
  const titles = (process.env.BENCH_HTTP_TITLES ?? '1') !== '0';
  const compareHttp10 = (process.env.BENCH_HTTP10_COMPARE ?? '1') !== '0';
  const connsList = (process.env.BENCH_HTTP_CONNS || '100,1000').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);

  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  if (!have('ffmpeg')) throw new Error('ffmpeg is not on PATH: apt-get install -y ffmpeg');
  const nginxMissing = !have('nginx') && !existsSync('/usr/sbin/nginx');
  if (nginxMissing) log('nginx is not installed (apt-get install -y nginx): Skylark rows only, no peer');

  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-http-'));
  const children: ChildProcess[] = [];
  const notes: string[] = [];
  try {
    // ── Skylark ───────────────────────────────────────────────────────────────────────────────
    const sky = await startSkylark(path.join(work, 'data'));
    children.push(sky.child);
    log(`skylark pid ${sky.child.pid} at ${sky.http}, rtmp ${sky.rtmp}`);
    const secretKey = await createAccount(path.join(work, 'data'), sky.defaultSecretKey);
    // The same server with the HTTP/1.0 front off (no hooks on its HTTP library's socket calls).
    let off: { child: ChildProcess; http: string; secretKey: string } | null = null;
    if (compareHttp10) {
      const o = await startSkylark(path.join(work, 'data-off'), { SKYLARK_HTTP10: '0' });
      children.push(o.child);
      off = { child: o.child, http: o.http, secretKey: await createAccount(path.join(work, 'data-off'), o.defaultSecretKey) };
      log(`skylark (HTTP/1.0 front off) pid ${o.child.pid} at ${o.http}`);
    }

    // ── nginx static (files are written per round) ───────────────────────────────────────────
    let nginx: { pid: number; base: string; dir: string } | null = null;
    if (!nginxMissing) {
      try {
        const dir = path.join(work, 'nginx');
        const n = await startNginx(dir);
        children.push(n.child);
        nginx = { pid: n.child.pid!, base: n.base, dir };
        log(`nginx pid ${n.child.pid} at ${n.base}`);
      } catch (e) {
        notes.push(`nginx failed to start: ${(e as Error).message}`);
        log(`nginx failed to start: ${(e as Error).message}`);
      }
    }

    // ── rounds: each has a fresh stream (so it stays well inside its 300 s reconnect window) ──
    const results = new Map<string, { skylark: Measured[]; nginx: Measured[]; off: Measured[] }>();
    const sizes: Record<string, string> = {};
    for (let r = 0; r < rounds; r++) {
      // Two streams per round: a plain one, and one whose title changed every 10 s while it was
      // published (metadata must not cost the listener path): its playlist carries
      // EXT-X-DATERANGE and PROGRAM-DATE-TIME tags, its segments the timed ID3.
      const targets = [...(await prepareRound(sky.http, secretKey, nginx, r)), ...(titles ? await prepareRound(sky.http, secretKey, nginx, r, { titlesEveryMs: 10_000 }) : [])];
      // The front-off server's own plain stream: its segment and playlist, by kind.
      const offTargets = new Map<string, Target>();
      if (off) for (const t of await prepareRound(off.http, off.secretKey, null, r)) offTargets.set(t.kind, t);
      if (r === 0) {
        // Response sizes on the wire, as wrk reads them.
        for (const t of targets) {
          const s = await rawResponseSize(t.skylark);
          let line = `skylark ${s.headerBytes} B headers + ${s.bodyBytes} B body`;
          if (t.nginx) {
            const n = await rawResponseSize(t.nginx);
            line += `; nginx ${n.headerBytes} + ${n.bodyBytes}`;
          }
          sizes[t.kind] = line;
        }
        if (warmup > 0) {
          for (const t of targets) {
            for (const url of [t.skylark, t.nginx]) if (url) await runWrk(url, { threads, connections: 100, seconds: warmup }).catch(() => {});
          }
        }
      }
      // Servers alternate which goes first each round.
      for (const conns of connsList) {
        for (const t of targets) {
          const slot = results.get(`${t.kind}|${conns}`) ?? { skylark: [], nginx: [], off: [] };
          results.set(`${t.kind}|${conns}`, slot);
          const order: Array<'skylark' | 'nginx' | 'off'> = r % 2 === 0 ? ['skylark', 'off', 'nginx'] : ['nginx', 'off', 'skylark'];
          for (const who of order) {
            const offTarget = who === 'off' ? offTargets.get(t.kind) : undefined;
            const url = who === 'skylark' ? t.skylark : who === 'nginx' ? t.nginx : (offTarget?.skylark ?? null);
            const pid = who === 'skylark' ? sky.child.pid! : who === 'nginx' ? nginx?.pid : off?.child.pid;
            if (!url || !pid) continue;
            const m = await measure(url, pid, offTarget?.bytes ?? t.bytes, { threads, connections: conns, seconds });
            slot[who].push(m);
            log(
              `round ${r + 1}/${rounds} ${t.kind} c=${conns} ${who}: ${Math.round(m.wrk.reqPerSec)} req/s, ${m.wrk.gbitPerSec.toFixed(2)} Gbit/s, ` +
                `p50 ${m.wrk.p50Ms} ms p99 ${m.wrk.p99Ms} ms, server CPU ${m.serverCpu.toFixed(0)} %, wrk CPU ${m.wrk.wrkCpuPercent?.toFixed(0) ?? '?'} %, ` +
                `box ${m.boxCpu.toFixed(0)} % of 200` +
                (m.wrk.non2xx3xx ? `, NON-2xx/3xx ${m.wrk.non2xx3xx}` : '') +
                (socketErrorCount(m.wrk) ? `, socket errors ${JSON.stringify(m.wrk.socketErrors)}` : '') +
                (m.invalid.length ? `, INVALID: ${m.invalid.join('; ')}` : ''),
            );
            await sleep(1000);
          }
        }
      }
    }

    return toRows(results, connsList, rounds, seconds, threads, sizes, notes);
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * A fresh stream for one round: created through the API, published with FFmpeg until the media
 * playlist lists ≥ 3 segments, publisher stopped (the stream stays live for its 300 s reconnect
 * window, so the playlist stops changing and the segments stay). The newest full segment and the
 * playlist are copied to nginx under new names (open_file_cache never sees a rewritten file).
 */
export async function prepareRound(http: string, secretKey: string, nginx: { base: string; dir: string } | null, round: number, o: { titlesEveryMs?: number } = {}): Promise<Target[]> {
  const suffix = o.titlesEveryMs ? ' +titles' : '';
  const tag = o.titlesEveryMs ? `t${round}` : `${round}`;
  const created = await fetch(`${http}/v2/streams`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secretKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title: `bench round ${round + 1}`, codec: 'aac', quality: 'medium', reconnectWindow: 300 }),
    signal: AbortSignal.timeout(10_000),
  });
  const stream = (await created.json()) as { id?: string; rtmpUrl?: string; streamKey?: string; hlsUrl?: string };
  if (created.status !== 201 || !stream.rtmpUrl || !stream.streamKey || !stream.hlsUrl) {
    throw new Error(`POST /v2/streams answered ${created.status}: ${JSON.stringify(stream).slice(0, 500)}`);
  }
  let titlesSent = 0;
  const setTitle = async () => {
    const res = await fetch(`${http}/v2/streams/${stream.id}/now_playing`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${secretKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: `Track ${titlesSent + 1} of round ${round + 1}`, artist: 'Bench Artist', album: 'Bench Album' }),
      signal: AbortSignal.timeout(5000),
    });
    if (res.status !== 200) throw new Error(`POST now_playing answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    titlesSent++;
  };
  // 6 segments (12 s) with titles: the first at going live, the next 10 s later.
  const { mediaUrl, playlist } = await publishUntilSegments(`${stream.rtmpUrl}/${stream.streamKey}`, stream.hlsUrl, o.titlesEveryMs ? 6 : 3, o.titlesEveryMs ? { everyMs: o.titlesEveryMs, run: setTitle } : undefined);
  if (o.titlesEveryMs && (titlesSent < 2 || !playlist.includes('#EXT-X-DATERANGE'))) throw new Error(`the +titles stream got ${titlesSent} titles and its playlist ${playlist.includes('#EXT-X-DATERANGE') ? 'has' : 'has no'} EXT-X-DATERANGE`);
  const seg = pickFullSegment(playlist, mediaUrl);
  const segBody = await get(seg.url);
  if (segBody.status !== 200) throw new Error(`segment ${seg.url} answered ${segBody.status}`);
  const playlistBytes = new TextEncoder().encode(playlist);
  log(`round ${round + 1}${suffix}: segment ${seg.url} (${seg.durationS} s, ${segBody.body.byteLength} B); playlist ${playlistBytes.byteLength} B, ${seg.count} segments${o.titlesEveryMs ? `, ${titlesSent} titles` : ''}`);
  let nginxSeg: string | null = null;
  let nginxPl: string | null = null;
  if (nginx) {
    writeFileSync(path.join(nginx.dir, 'static', `seg-${tag}.ts`), segBody.body);
    writeFileSync(path.join(nginx.dir, 'static', `index-${tag}.m3u8`), playlistBytes);
    nginxSeg = `${nginx.base}/static/seg-${tag}.ts`;
    nginxPl = `${nginx.base}/static/index-${tag}.m3u8`;
  }
  const targets: Target[] = [
    { kind: `segment${suffix}`, bytes: segBody.body, skylark: seg.url, nginx: nginxSeg },
    { kind: `playlist${suffix}`, bytes: playlistBytes, skylark: mediaUrl, nginx: nginxPl },
  ];
  for (const t of targets) {
    for (const url of [t.skylark, t.nginx]) {
      if (!url) continue;
      const why = await checkServes(url, t.bytes);
      if (why) throw new Error(`before the load runs: ${why}`);
    }
  }
  return targets;
}

/** One wrk run against `url` with the server's CPU and the box's, plus validity checks around it. */
export async function measure(url: string, pid: number, bytes: Uint8Array, o: { threads: number; connections: number; seconds: number }): Promise<Measured> {
  const invalid: string[] = [];
  const before = await checkServes(url, bytes);
  if (before) invalid.push(`before: ${before}`);
  const meter = cpuMeter(pid);
  const wrk = await runWrk(url, o);
  const cpu = meter();
  const after = await checkServes(url, bytes);
  if (after) invalid.push(`after: ${after}`);
  return { wrk, serverCpu: cpu.serverPercent, boxCpu: cpu.boxPercent, invalid };
}

export const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** The errors of a set of runs, for a row's note ('no errors' when none). */
export function errorsOf(ms: Measured[]): string {
  const non = ms.reduce((a, m) => a + m.wrk.non2xx3xx, 0);
  const sock = ms.reduce(
    (a, m) => ({
      connect: a.connect + m.wrk.socketErrors.connect,
      read: a.read + m.wrk.socketErrors.read,
      write: a.write + m.wrk.socketErrors.write,
      timeout: a.timeout + m.wrk.socketErrors.timeout,
    }),
    { connect: 0, read: 0, write: 0, timeout: 0 },
  );
  const invalid = ms.flatMap((m) => m.invalid);
  const parts: string[] = [];
  if (non) parts.push(`non-2xx/3xx ${non}`);
  if (sock.connect + sock.read + sock.write + sock.timeout) parts.push(`socket errors c/r/w/t ${sock.connect}/${sock.read}/${sock.write}/${sock.timeout}`);
  if (invalid.length) parts.push(`INVALID ${invalid.join('; ')}`);
  return parts.length ? parts.join(', ') : 'no errors';
}

function toRows(
  results: Map<string, { skylark: Measured[]; nginx: Measured[]; off: Measured[] }>,
  connsList: number[],
  rounds: number,
  seconds: number,
  threads: number,
  sizes: Record<string, string>,
  notes: string[],
): BenchRow[] {
  const rows: BenchRow[] = [];
  const group = `${GROUP} -t${threads} ${seconds} s${rounds > 1 ? `, median of ${rounds}` : ''}, Skylark on ${SKYLARK_THREADS} HTTP thread(s)`;
  const metrics: Array<{ name: string; unit: string; get: (m: Measured) => number }> = [
    { name: 'req/s', unit: 'req/s', get: (m) => m.wrk.reqPerSec },
    { name: 'throughput', unit: 'Gbit/s', get: (m) => m.wrk.gbitPerSec },
    { name: 'latency p50', unit: 'ms', get: (m) => m.wrk.p50Ms },
    { name: 'latency p99', unit: 'ms', get: (m) => m.wrk.p99Ms },
    { name: 'server CPU', unit: '% core', get: (m) => m.serverCpu },
    { name: 'req per server CPU-second', unit: 'req/CPU-s', get: (m) => (m.serverCpu > 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN) },
    { name: 'wrk CPU', unit: '% core', get: (m) => m.wrk.wrkCpuPercent ?? NaN },
    { name: 'other load on the box', unit: '% core', get: (m) => m.boxCpu - m.serverCpu - (m.wrk.wrkCpuPercent ?? NaN) },
  ];
  const kinds = [...new Set([...results.keys()].map((k) => k.split('|')[0]!))];
  for (const kind of kinds) {
    for (const conns of connsList) {
      const slot = results.get(`${kind}|${conns}`);
      if (!slot || !slot.skylark.length) continue;
      for (const [i, metric] of metrics.entries()) {
        const row: BenchRow = {
          group,
          name: `${kind} ${conns} conns: ${metric.name}`,
          value: median(slot.skylark.map(metric.get)),
          unit: metric.unit,
        };
        if (slot.nginx.length) row.peer = { name: 'nginx', value: median(slot.nginx.map(metric.get)) };
        if (i === 0) {
          const each = (ms: Measured[]) => ms.map((m) => Math.round(m.wrk.reqPerSec / 100) / 10 + 'k').join('/');
          row.note = `skylark ${errorsOf(slot.skylark)}${slot.nginx.length ? `; nginx ${errorsOf(slot.nginx)}` : ''}`;
          if (rounds > 1) row.note += `; each run: skylark ${each(slot.skylark)}${slot.nginx.length ? `, nginx ${each(slot.nginx)}` : ''}`;
          if (conns === connsList[0]) row.note += `; ${sizes[kind]}`;
        }
        rows.push(row);
      }
    }
  }
  // Derived as in docs/bench/method.md "The peers measured alone": a 2 s-segment listener fetches one segment and one playlist per 2 s.
  for (const suffix of ['', ' +titles']) {
    for (const conns of connsList) {
      const s = results.get(`segment${suffix}|${conns}`);
      const p = results.get(`playlist${suffix}|${conns}`);
      if (!s?.skylark.length || !p?.skylark.length) continue;
      const est = (a: Measured[], b: Measured[]) => 2 / (1 / median(a.map((m) => m.wrk.reqPerSec)) + 1 / median(b.map((m) => m.wrk.reqPerSec)));
      const row: BenchRow = { group, name: `listeners (2 s segments${suffix}) at ${conns} conns, estimate`, value: est(s.skylark, p.skylark), unit: 'listeners' };
      if (s.nginx.length && p.nginx.length) row.peer = { name: 'nginx', value: est(s.nginx, p.nginx) };
      row.note = '2 / (1/segment req/s + 1/playlist req/s)';
      rows.push(row);
    }
  }
  // Titles against none, Skylark only, same run: per server CPU-second.
  for (const kind of ['segment', 'playlist']) {
    for (const conns of connsList) {
      const a = results.get(`${kind}|${conns}`)?.skylark ?? [];
      const b = results.get(`${kind} +titles|${conns}`)?.skylark ?? [];
      if (!a.length || !b.length) continue;
      const perCpu = (ms: Measured[]) => median(ms.map((m) => (m.serverCpu > 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN)));
      rows.push({
        group,
        name: `${kind} ${conns} conns: req per server CPU-second, titles every 10 s`,
        value: perCpu(b),
        unit: 'req/CPU-s',
        peer: { name: 'no titles', value: perCpu(a) },
        note: `req/s with titles ${Math.round(median(b.map((m) => m.wrk.reqPerSec)))}, without ${Math.round(median(a.map((m) => m.wrk.reqPerSec)))}`,
      });
    }
  }
  // The HTTP/1.0 front's cost to HTTP/1.1 requests: the same request against a Skylark without it.
  for (const kind of ['segment', 'playlist']) {
    for (const conns of connsList) {
      const slot = results.get(`${kind}|${conns}`);
      if (!slot?.skylark.length || !slot.off.length) continue;
      const perCpu = (ms: Measured[]) => median(ms.map((m) => (m.serverCpu > 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN)));
      const reqs = (ms: Measured[]) => median(ms.map((m) => m.wrk.reqPerSec));
      rows.push({
        group,
        name: `${kind} ${conns} conns: req/s, HTTP/1.0 front on (HTTP/1.1 requests)`,
        value: reqs(slot.skylark),
        unit: 'req/s',
        peer: { name: 'front off', value: reqs(slot.off) },
        note: `req per server CPU-second on ${Math.round(perCpu(slot.skylark))}, off ${Math.round(perCpu(slot.off))}; front off: ${errorsOf(slot.off)}`,
      });
    }
  }
  if (notes.length) rows.push({ group, name: 'notes', value: NaN, unit: '', note: notes.join('; ') });
  return rows;
}

// ── Skylark ─────────────────────────────────────────────────────────────────────────────────

/** Waits until no native rebuild holds the lock and the addon and dist/ exist. @throws Error after 180 s */
async function waitForBuild(): Promise<void> {
  const addon = path.join(root, 'build', 'Release', 'skylark.node');
  const cli = path.join(root, 'dist', 'cli', 'main.js');
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (have('flock')) await runToEnd(['flock', '-w', '120', '/tmp/skylark-gyp.lock', 'true'], 125_000);
    const ok = existsSync(addon) && existsSync(cli) && Date.now() - statSync(addon).mtimeMs > 2000;
    if (ok) return;
    if (Date.now() > deadline) {
      throw new Error(`${existsSync(cli) ? '' : 'dist/ is missing (npx tsc -p tsconfig.build.json); '}${existsSync(addon) ? '' : 'build/Release/skylark.node is missing (npx node-gyp rebuild)'}`);
    }
    log('waiting for the native addon / dist build…');
    await sleep(3000);
  }
}

export async function startSkylark(dataDir: string, extraEnv: Record<string, string> = {}) {
  mkdirSync(dataDir, { recursive: true });
  const prof = process.env.SKYLARK_BENCH_CPU_PROF;
  const nodeFlags = [...(prof ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(prof)}`] : []), ...(process.env.SKYLARK_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean)];
  let lastErr: Error | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    await waitForBuild();
    const child = spawnWithFds([process.execPath, ...nodeFlags, path.join(root, 'bin', 'skylark.js'), 'serve'], {
      cwd: root,
      env: {
        ...process.env,
        SKYLARK_HTTP_HOST: '127.0.0.1',
        SKYLARK_HTTP_PORT: '0',
        SKYLARK_RTMP_HOST: '127.0.0.1',
        SKYLARK_RTMP_PORT: '0',
        SKYLARK_ICECAST_PORT: '0',
        SKYLARK_DATA_DIR: dataDir,
        SKYLARK_LOG_LEVEL: 'warn',
        // Every bench client comes from 127.0.0.1: the per-address caps (docs/behaviour.md §13) would
        // refuse it long before the node is loaded.
        SKYLARK_RTMP_MAX_CONNECTIONS_PER_IP: '100000',
        SKYLARK_RTMP_MAX_CONNECTIONS: '100000',
        SKYLARK_HTTP_MAX_HELD_PER_IP: '1000000',
        SKYLARK_HTTP_MAX_HELD: '1000000',
        SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: '1000000',
        SKYLARK_LISTEN_MAX_CONNECTIONS: '1000000',
        SKYLARK_WHEP_MAX_PENDING_PER_IP: '100000',
        SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE: '1000000',
        SKYLARK_WHEP_MAX_PENDING: '100000',
        // Threads serving HTTP (docs/scaling.md): 1 unless BENCH_SKYLARK_THREADS says otherwise.
        SKYLARK_HTTP_THREADS: SKYLARK_THREADS,
        ...extraEnv,
      },
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('skylark serve printed no listening line in 20 s')), 20_000);
        createInterface({ input: child.stdout! }).once('line', (l) => {
          clearTimeout(timer);
          resolve(l);
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`skylark serve exited with ${code}: ${stderr.trim().slice(0, 1000)}`));
        });
      });
      const listening = JSON.parse(line) as { http: string; rtmp: string };
      await sleep(100); // the default-account lines follow the listening line on stderr
      const defaultSecretKey = /secretKey: (\S+)/.exec(stderr)?.[1] ?? null;
      return { child, http: listening.http, rtmp: listening.rtmp, defaultSecretKey };
    } catch (e) {
      lastErr = e as Error;
      await stop(child, 'SIGKILL');
      log(`skylark did not start (attempt ${attempt + 1}): ${lastErr.message}`);
      await sleep(5000);
    }
  }
  throw lastErr!;
}

/** A paid account made with the CLI (`skylark accounts create`, the real interface for accounts); its secret key. */
export async function createAccount(dataDir: string, fallback: string | null): Promise<string> {
  const r = await runToEnd(
    [process.execPath, path.join(root, 'bin', 'skylark.js'), 'accounts', 'create', '--name', 'Bench', '--plan', 'paid', '--json', '--data-dir', dataDir],
    30_000,
  );
  try {
    const created = JSON.parse(r.stdout) as { secretKey?: string };
    if (created.secretKey) return created.secretKey;
  } catch {
    /* fall through */
  }
  if (fallback) {
    log(`accounts create failed (${r.stderr.trim().slice(0, 300)}); using the default account`);
    return fallback;
  }
  throw new Error(`skylark accounts create failed: ${r.stderr.trim() || r.stdout.trim()}`);
}

/** Publishes a real AAC stream with FFmpeg until the media playlist lists `n` segments, stops it, and returns the settled playlist. */
export async function publishUntilSegments(publishUrl: string, hlsUrl: string, n: number, every?: { everyMs: number; run: () => Promise<void> }): Promise<{ mediaUrl: string; playlist: string }> {
  const ff = spawnWithFds([
    'ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error', '-re',
    '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
    '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', publishUrl,
  ]);
  let ffErr = '';
  ff.stderr!.on('data', (d) => (ffErr += d));
  let ticker: NodeJS.Timeout | undefined;
  let tickerErr: Error | null = null;
  try {
    const deadline = Date.now() + 20_000 + n * 3000;
    let mediaUrl: string | null = null;
    for (;;) {
      if (ff.exitCode !== null) throw new Error(`ffmpeg exited with ${ff.exitCode}: ${ffErr.trim().slice(0, 500)}`);
      if (Date.now() > deadline) throw new Error(`the media playlist did not list ${n} segments in time${mediaUrl ? ` (${mediaUrl})` : ''}`);
      await sleep(250);
      try {
        if (!mediaUrl) {
          const mv = await get(hlsUrl);
          if (mv.status !== 200) continue;
          const uri = Buffer.from(mv.body).toString('utf8').split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('#'));
          if (!uri) continue;
          mediaUrl = new URL(uri, hlsUrl).toString();
        }
        const mp = await get(mediaUrl);
        if (every && !ticker && mp.status === 200) {
          // Live: the first call now, then one every `everyMs`.
          const tick = () => every.run().catch((e: Error) => (tickerErr = e));
          await tick();
          ticker = setInterval(tick, every.everyMs);
        }
        if (tickerErr) throw tickerErr;
        if (mp.status === 200 && (Buffer.from(mp.body).toString('utf8').match(/#EXTINF:/g) ?? []).length >= n) break;
      } catch {
        /* not up yet */
      }
    }
    clearInterval(ticker);
    await stop(ff, 'SIGINT', 5000); // the publisher leaves; the stream waits in its reconnect window
    // The hub flushes the open (partial) segment when the publisher goes; wait until the playlist settles.
    let prev = '';
    for (let i = 0; i < 40; i++) {
      await sleep(250);
      const mp = await get(mediaUrl);
      const text = Buffer.from(mp.body).toString('utf8');
      if (mp.status === 200 && text === prev && i >= 3) return { mediaUrl, playlist: text };
      prev = text;
    }
    throw new Error('the media playlist kept changing after the publisher stopped');
  } finally {
    clearInterval(ticker);
    await stop(ff, 'SIGKILL', 1000);
  }
}

/** The newest segment whose duration is within 10 % of the longest listed (a full one, not the flushed tail). */
function pickFullSegment(playlist: string, mediaUrl: string): { url: string; durationS: number; count: number } {
  const lines = playlist.split('\n').map((l) => l.trim());
  const segs: Array<{ uri: string; d: number }> = [];
  let d: number | null = null;
  for (const l of lines) {
    if (l.startsWith('#EXTINF:')) d = Number.parseFloat(l.slice(8));
    else if (l && !l.startsWith('#') && d !== null) {
      segs.push({ uri: l, d });
      d = null;
    }
  }
  if (!segs.length) throw new Error(`no segments in the media playlist:\n${playlist}`);
  const longest = Math.max(...segs.map((s) => s.d));
  const full = segs.filter((s) => s.d >= longest * 0.9);
  const pick = full[full.length - 1]!;
  return { url: new URL(pick.uri, mediaUrl).toString(), durationS: pick.d, count: segs.length };
}

// ── nginx ───────────────────────────────────────────────────────────────────────────────────

export async function startNginx(dir: string) {
  mkdirSync(path.join(dir, 'static'), { recursive: true });
  writeFileSync(path.join(dir, 'static', 'ready.txt'), 'ok\n');
  const port = await freePort();
  const tmpl = readFileSync(path.join(import.meta.dirname, 'peers', 'nginx-static.conf.tmpl'), 'utf8');
  const conf = tmpl.replaceAll('@WORKERS@', '1').replaceAll('@DIR@', dir).replaceAll('@HTTP_PORT@', String(port));
  const leftover = /@[A-Z_]+@/.exec(conf);
  if (leftover) throw new Error(`nginx template placeholder ${leftover[0]} is not filled in`);
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const bin = have('nginx') ? 'nginx' : '/usr/sbin/nginx';
  const child = spawnWithFds([bin, '-p', `${dir}/`, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')]);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) {
      const errLog = existsSync(path.join(dir, 'error.log')) ? readFileSync(path.join(dir, 'error.log'), 'utf8') : '';
      throw new Error(`nginx exited with ${child.exitCode}: ${(stderr + errLog).trim().slice(0, 800)}`);
    }
    try {
      if ((await get(`${base}/static/ready.txt`, 1000)).status === 200) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      await stop(child, 'SIGKILL');
      throw new Error('nginx did not answer in 10 s');
    }
    await sleep(100);
  }
  // Give the master a moment to have forked its worker (CPU is summed over master + workers).
  await sleep(200);
  return { child, base };
}
