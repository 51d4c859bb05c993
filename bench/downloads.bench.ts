/**
 * Episode audio GETs with podcast download counting on and off (docs/podcasts.md "Download
 * counting"), against a stock nginx serving the same file with sendfile (bench/peers/nginx-static.conf.tmpl),
 * in the same run: whole-file GETs per second and per server CPU-second, wrk -t1 from 127.0.0.1.
 *
 * Two `skylark serve` processes (the CLI, dist/) on their own data dirs: one counting (the default),
 * one with `SKYLARK_DOWNLOAD_COUNTING=0`. Each trusts 127.0.0.1 as a proxy, and wrk's Lua script
 * gives every request a new `X-Forwarded-For` address and a podcast app's User-Agent, so with
 * counting on every response is a new client that reaches its first minute: the counter's worst
 * case (an HMAC, a client entry, a new download per request). The file is 60 s of 64 kb/s MP3
 * (~480 KB), small enough that per-request costs show. After a 2 s warm-up of each, rounds
 * interleave on / off / nginx; each row is the median. The counted downloads are read back from the stats API as a check.
 *
 * Also, in this process: the counter's own cost per new client (request, two byte reports, its
 * share of the batch write), steadier than the CPU-second rows on a loaded box.
 *
 * Settings (environment): BENCH_DOWNLOADS_SECONDS (10), BENCH_DOWNLOADS_ROUNDS (3),
 * BENCH_DOWNLOADS_CONNS (50). Alone: `npx tsx bench/downloads.bench.ts`.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BenchRow } from './lib/report.js';
import { cpuMeter, have, runToEnd, stop } from './lib/proc.js';
import { parseWrk } from './lib/wrk.js';
import { createAccount, startNginx, startSkylark } from './http-segments.js';
import { openDatabase } from '../src/base/db/database.js';
import { DownloadsRepo } from '../src/base/db/downloads-repo.js';
import { DownloadCounter } from '../src/control/downloads/counter.js';
import { createLogger } from '../src/base/logger.js';

const GROUP = 'Episode audio GETs (60 s of 64 kb/s MP3): download counting on vs off vs nginx sendfile, wrk -t1';
const log = (m: string) => process.stderr.write(`[downloads] ${m}\n`);
const envNum = (name: string, dflt: number) => {
  const n = Number(process.env[name]);
  return Number.isFinite(n) && n > 0 ? n : dflt;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Every request a new client: a fresh X-Forwarded-For (10.x.y.z from a counter) and an app's User-Agent. */
const LUA = `
local n = 0
request = function()
  n = n + 1
  wrk.headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
  wrk.headers["User-Agent"] = "AppleCoreMedia/1.0.0.21E236 (iPhone; U; CPU OS 17_4 like Mac OS X; en_us)"
  return wrk.format()
end
`;

interface Measured {
  rps: number;
  cpuPercent: number;
  note: string;
}

async function measure(url: string, pid: number, script: string, seconds: number, conns: number): Promise<Measured> {
  const meter = cpuMeter(pid);
  const r = await runToEnd(['wrk', '-t1', `-c${conns}`, `-d${seconds}s`, '--latency', '-s', script, url], (seconds + 30) * 1000);
  const cpu = meter();
  if (r.timedOut || r.code !== 0) throw new Error(`wrk failed: ${r.stderr || r.stdout}`);
  const w = parseWrk(r.stdout);
  const e = w.socketErrors;
  const errors = e.connect + e.read + e.write + e.timeout;
  return { rps: w.reqPerSec, cpuPercent: cpu.serverPercent, note: `${w.non2xx3xx ? `non-2xx ${w.non2xx3xx} ` : ''}${errors ? `socket errors ${errors}` : ''}`.trim() };
}

/** A podcast with one published episode holding `file` on server `http`; its audio URL and podcast id. */
async function publish(http: string, key: string, file: Buffer): Promise<{ url: string; podcastId: string }> {
  const call = async (method: string, p: string, body?: unknown, raw?: Buffer) => {
    const r = await fetch(`${http}/v2${p}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': raw ? 'audio/mpeg' : 'application/json' },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const j = (await r.json()) as any;
    if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(j)}`);
    return j;
  };
  const pod = await call('POST', '/podcasts', { title: 'Bench show' });
  const ep = await call('POST', `/podcasts/${pod.id}/episodes`, { title: 'Bench episode' });
  const up = await call('PUT', `/podcasts/${pod.id}/episodes/${ep.id}/audio`, undefined, file);
  await call('POST', `/podcasts/${pod.id}/publish`, { episodeId: ep.id });
  return { url: up.audioUrl, podcastId: pod.id };
}

/** Microseconds of counter work per new client: `request` + two byte reports reaching the minute, and the batch write per client. */
function counterCost(dir: string, n = 50_000): { requestUs: number; flushUs: number } {
  const db = openDatabase(dir);
  try {
    const c = new DownloadCounter({ repo: new DownloadsRepo(db), log: createLogger('error') });
    const ua = 'AppleCoreMedia/1.0.0.21E236 (iPhone; U; CPU OS 17_4 like Mac OS X; en_us)';
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const sink = c.request({ podcastId: 'pod_bench', episodeId: 'ep_bench', minuteBytes: 400_000, ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, userAgent: ua }, 'GET')?.(480_000);
      sink?.(262_144);
      sink?.(480_000 - 262_144);
    }
    const t1 = performance.now();
    c.flush();
    const t2 = performance.now();
    return { requestUs: ((t1 - t0) / n) * 1000, flushUs: ((t2 - t1) / n) * 1000 };
  } finally {
    db.close();
  }
}

export async function run(): Promise<BenchRow[]> {
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  if (!have('ffmpeg')) throw new Error('ffmpeg is not on PATH: apt-get install -y ffmpeg');
  const seconds = envNum('BENCH_DOWNLOADS_SECONDS', 10);
  const rounds = Math.round(envNum('BENCH_DOWNLOADS_ROUNDS', 3));
  const conns = Math.round(envNum('BENCH_DOWNLOADS_CONNS', 50));
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-downloads-'));
  const children: ChildProcess[] = [];
  try {
    const mp3 = path.join(work, 'episode.mp3');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=60', '-ac', '1', '-c:a', 'libmp3lame', '-b:a', '64k', '-id3v2_version', '3', '-metadata', 'title=Bench', mp3], { timeout: 60_000 });
    const bytes = readFileSync(mp3);
    const script = path.join(work, 'clients.lua');
    writeFileSync(script, LUA);

    const servers: Record<'on' | 'off', { pid: number; url: string; http: string; key: string; podcastId: string }> = {} as never;
    for (const mode of ['on', 'off'] as const) {
      const dir = path.join(work, `data-${mode}`);
      const s = await startSkylark(dir, { SKYLARK_TRUSTED_PROXIES: '127.0.0.1', SKYLARK_DOWNLOAD_COUNTING: mode === 'on' ? '1' : '0' });
      children.push(s.child);
      const key = await createAccount(dir, s.defaultSecretKey);
      const ep = await publish(s.http, key, bytes);
      servers[mode] = { pid: s.child.pid!, url: ep.url, http: s.http, key, podcastId: ep.podcastId };
      log(`skylark (counting ${mode}) pid ${s.child.pid} serving ${ep.url}`);
    }
    let nginx: { pid: number; url: string } | null = null;
    if (have('nginx') || existsSync('/usr/sbin/nginx')) {
      const dir = path.join(work, 'nginx');
      const n = await startNginx(dir);
      children.push(n.child);
      copyFileSync(mp3, path.join(dir, 'static', 'episode.mp3'));
      nginx = { pid: n.child.pid!, url: `${n.base}/static/episode.mp3` };
      log(`nginx pid ${n.child.pid} serving ${nginx.url}`);
    } else log('nginx is not installed (apt-get install -y nginx): no peer');

    for (const [who, url] of [['on', servers.on.url], ['off', servers.off.url], ['nginx', nginx?.url]] as const) {
      if (!url) continue;
      const r = await fetch(url, { headers: { 'User-Agent': 'Overcast/3.0 (+http://overcast.fm/; iOS podcast app)' } });
      const got = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200 || !got.equals(bytes)) throw new Error(`${who} does not serve the file (${r.status}, ${got.length} bytes)`);
    }

    // Warm-up (not measured): the first run of a fresh process pays for JIT and first allocations.
    for (const url of [servers.on.url, servers.off.url, nginx?.url]) if (url) await runToEnd(['wrk', '-t1', `-c${conns}`, '-d2s', '-s', script, url], 32_000);

    const res: Record<'on' | 'off' | 'nginx', Measured[]> = { on: [], off: [], nginx: [] };
    for (let round = 0; round < rounds; round++) {
      const order: Array<'on' | 'off' | 'nginx'> = round % 2 === 0 ? ['on', 'off', 'nginx'] : ['nginx', 'off', 'on'];
      for (const who of order) {
        const target = who === 'nginx' ? nginx : servers[who];
        if (!target) continue;
        const m = await measure(target.url, target.pid, script, seconds, conns);
        res[who].push(m);
        log(`round ${round + 1} ${who}: ${Math.round(m.rps)} req/s, server CPU ${m.cpuPercent.toFixed(0)} %${m.note ? `, ${m.note}` : ''}`);
      }
    }

    const stats = (await (await fetch(`${servers.on.http}/v2/podcasts/${servers.on.podcastId}/stats`, { headers: { Authorization: `Bearer ${servers.on.key}` } })).json()) as { downloads: number };
    const offStats = (await (await fetch(`${servers.off.http}/v2/podcasts/${servers.off.podcastId}/stats`, { headers: { Authorization: `Bearer ${servers.off.key}` } })).json()) as { downloads: number };
    const group = `${GROUP}, ${conns} conns, ${seconds} s${rounds > 1 ? `, median of ${rounds}` : ''}`;
    const cost = counterCost(path.join(work, 'counter'));
    const rps = (ms: Measured[]) => median(ms.map((m) => m.rps));
    const perCpu = (ms: Measured[]) => median(ms.map((m) => (m.cpuPercent > 0 ? m.rps / (m.cpuPercent / 100) : NaN)));
    const cpu = (ms: Measured[]) => median(ms.map((m) => m.cpuPercent));
    const notes = (ms: Measured[]) => ms.map((m) => m.note).filter(Boolean).join('; ');
    const rows: BenchRow[] = [
      { group, name: 'counter cost per new client (in process)', value: cost.requestUs + cost.flushUs, unit: 'µs', note: `request + byte reports ${cost.requestUs.toFixed(1)} µs, batch write ${cost.flushUs.toFixed(1)} µs (50,000 clients)` },
      { group, name: 'GETs/s, counting on', value: rps(res.on), unit: 'req/s', peer: { name: 'counting off', value: rps(res.off) }, note: `every request a new client; ${stats.downloads} downloads counted (off: ${offStats.downloads})${notes(res.on) ? `; ${notes(res.on)}` : ''}` },
      { group, name: 'GETs per server CPU-second, counting on', value: perCpu(res.on), unit: 'req/CPU-s', peer: { name: 'counting off', value: perCpu(res.off) } },
      { group, name: 'server CPU, counting on', value: cpu(res.on), unit: '% core', peer: { name: 'counting off', value: cpu(res.off) } },
    ];
    if (res.nginx.length) {
      rows.push(
        { group, name: 'GETs/s, counting off', value: rps(res.off), unit: 'req/s', peer: { name: 'nginx', value: rps(res.nginx) }, ...(notes(res.nginx) ? { note: `nginx: ${notes(res.nginx)}` } : {}) },
        { group, name: 'GETs per server CPU-second, counting off', value: perCpu(res.off), unit: 'req/CPU-s', peer: { name: 'nginx', value: perCpu(res.nginx) } },
        { group, name: 'GETs/s, counting on (vs nginx)', value: rps(res.on), unit: 'req/s', peer: { name: 'nginx', value: rps(res.nginx) } },
      );
    }
    return rows;
  } finally {
    for (const c of children) await stop(c).catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await run();
  for (const r of rows) process.stdout.write(`${r.name}: ${r.value.toFixed(1)} ${r.unit}${r.peer ? ` (${r.peer.name}: ${r.peer.value.toFixed(1)})` : ''}${r.note ? ` — ${r.note}` : ''}\n`);
  process.exit(0);
}
