/**
 * Episode-audio throughput: 100 concurrent range readers (wrk, 100 connections,
 * each request a random 256 KiB byte range) against Skylark's `/media/…` (the CLI, `node
 * bin/skylark.js serve`, as its own process: file streamed from disk with uWS backpressure) and
 * against Debian nginx serving the same file (bench/peers/nginx-static.conf.tmpl, 1 worker, sendfile),
 * in the same run. MB/s is what wrk read per second (1 MB = 10^6 B). The file: 2 minutes of 48 kHz
 * stereo WAV made by FFmpeg (~23 MB), uploaded and published through the API; both servers are
 * checked to answer the same bytes for a range before and after each run.
 *
 * Settings (environment): BENCH_MEDIA_SECONDS (10), BENCH_MEDIA_CONNS (100).
 * `npx tsx bench/media.bench.ts` runs it alone (needs dist/: `npx tsc -p tsconfig.build.json`).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { cpuMeter, freePort, have, runToEnd, sleep, spawnWithFds, stop } from './lib/proc.js';
import { parseWrk, type WrkResult } from './lib/wrk.js';

const root = path.resolve(import.meta.dirname, '..');
const GROUP = 'Episode audio: 100 concurrent range readers, Skylark (CLI process) vs nginx static, wrk';
const RANGE = 256 * 1024;
const log = (msg: string) => process.stderr.write(`[media] ${msg}\n`);
const envNum = (name: string, dflt: number) => {
  const n = Number(process.env[name]);
  return process.env[name] && Number.isFinite(n) && n > 0 ? n : dflt;
};

export async function run(): Promise<BenchRow[]> {
  const seconds = envNum('BENCH_MEDIA_SECONDS', 10);
  const conns = envNum('BENCH_MEDIA_CONNS', 100);
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  if (!have('ffmpeg')) throw new Error('ffmpeg is not on PATH: apt-get install -y ffmpeg');
  if (!existsSync(path.join(root, 'dist', 'main.js'))) throw new Error('dist/ is missing: npx tsc -p tsconfig.build.json');
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-media-'));
  const children: ChildProcess[] = [];
  try {
    const wav = path.join(work, 'episode.wav');
    const ff = await runToEnd(['ffmpeg', '-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=120', '-ac', '2', '-ar', '48000', '-c:a', 'pcm_s16le', wav], 60_000);
    if (ff.code !== 0) throw new Error(`ffmpeg failed: ${ff.stderr}`);
    const bytes = readFileSync(wav);

    // ── Skylark ──
    const dataDir = path.join(work, 'data');
    mkdirSync(dataDir, { recursive: true });
    const acct = await runToEnd([process.execPath, path.join(root, 'bin', 'skylark.js'), 'accounts', 'create', '--name', 'Bench', '--plan', 'paid', '--json', '--data-dir', dataDir], 30_000);
    const key = (JSON.parse(acct.stdout) as { secretKey: string }).secretKey;
    const sky = await startSkylark(dataDir);
    children.push(sky.child);
    const call = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(`${sky.http}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      const j = (await r.json()) as any;
      if (r.status >= 300) throw new Error(`${method} ${p} → ${r.status} ${JSON.stringify(j)}`);
      return j;
    };
    const pod = await call('POST', '/v2/podcasts', { title: 'Bench show' });
    const ep = await call('POST', `/v2/podcasts/${pod.id}/episodes`, { title: 'Bench episode' });
    const up = await fetch(`${sky.http}/v2/podcasts/${pod.id}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/wav' }, body: bytes });
    if (up.status !== 200) throw new Error(`upload → ${up.status} ${await up.text()}`);
    const published = await call('POST', `/v2/podcasts/${pod.id}/publish`, { episodeId: ep.id });
    const skyUrl = published.audioUrl as string;
    log(`skylark pid ${sky.child.pid}: ${skyUrl} (${bytes.length} B)`);

    // ── nginx ──
    let nginx: { child: ChildProcess; url: string } | null = null;
    if (have('nginx') || existsSync('/usr/sbin/nginx')) {
      try {
        nginx = await startNginx(path.join(work, 'nginx'), wav);
        children.push(nginx.child);
        log(`nginx pid ${nginx.child.pid}: ${nginx.url}`);
      } catch (e) {
        log(`nginx failed to start: ${(e as Error).message}`);
      }
    } else log('nginx is not installed (apt-get install -y nginx): Skylark rows only');

    const script = path.join(work, 'ranges.lua');
    writeFileSync(
      script,
      `-- random ${RANGE}-byte ranges of a ${bytes.length}-byte file\nmath.randomseed(os.time())\nrequest = function()\n  local s = math.random(0, ${bytes.length - RANGE})\n  return wrk.format("GET", nil, { ["Range"] = "bytes=" .. s .. "-" .. (s + ${RANGE - 1}) })\nend\n`,
    );
    const rows: BenchRow[] = [];
    const results: Record<string, { wrk: WrkResult; cpu: number; invalid: string[] }> = {};
    for (const [who, url, pid] of [
      ['skylark', skyUrl, sky.child.pid!],
      ['nginx', nginx?.url, nginx?.child.pid],
    ] as const) {
      if (!url || !pid) continue;
      const invalid: string[] = [];
      const check = async (when: string) => {
        const r = await fetch(url, { headers: { Range: 'bytes=1000-1999' } });
        const b = Buffer.from(await r.arrayBuffer());
        if (r.status !== 206 || !b.equals(bytes.subarray(1000, 2000))) invalid.push(`${when}: ${r.status}, ${b.length} B`);
      };
      await check('before');
      const meter = cpuMeter(pid);
      const w = await runToEnd(['wrk', '-t1', `-c${conns}`, `-d${seconds}s`, '--latency', '-s', script, url], (seconds + 30) * 1000);
      const cpu = meter();
      if (w.code !== 0) throw new Error(`wrk failed: ${w.stderr || w.stdout}`);
      const parsed = { ...parseWrk(w.stdout), wrkCpuPercent: w.cpuPercent };
      await check('after');
      results[who] = { wrk: parsed, cpu: cpu.serverPercent, invalid };
      log(`${who}: ${(parsed.bytesPerSec / 1e6).toFixed(0)} MB/s, ${Math.round(parsed.reqPerSec)} req/s, p99 ${parsed.p99Ms} ms, server CPU ${cpu.serverPercent.toFixed(0)} %`);
      await sleep(1000);
    }
    const s = results.skylark!;
    const n = results.nginx;
    const note = (r: typeof s) =>
      [`${Math.round(r.wrk.reqPerSec)} req/s`, `p99 ${r.wrk.p99Ms} ms`, `server CPU ${r.cpu.toFixed(0)} %`, r.wrk.non2xx3xx ? `non-2xx ${r.wrk.non2xx3xx}` : '', ...r.invalid.map((i) => `INVALID ${i}`)]
        .filter(Boolean)
        .join(', ');
    rows.push({
      group: GROUP,
      name: `${conns} readers × random ${RANGE / 1024} KiB ranges, ${Math.round(bytes.length / 1e6)} MB file`,
      value: s.wrk.bytesPerSec / 1e6,
      unit: 'MB/s',
      ...(n ? { peer: { name: 'nginx', value: n.wrk.bytesPerSec / 1e6 } } : {}),
      note: `skylark: ${note(s)}${n ? `; nginx: ${note(n)}` : ''}`,
    });
    return rows;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}

async function startSkylark(dataDir: string): Promise<{ child: ChildProcess; http: string }> {
  const child = spawnWithFds([process.execPath, path.join(root, 'bin', 'skylark.js'), 'serve'], {
    cwd: root,
    env: { ...process.env, SKYLARK_HTTP_HOST: '127.0.0.1', SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_HOST: '127.0.0.1', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: dataDir, SKYLARK_LOG_LEVEL: 'warn' },
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('skylark serve printed no listening line in 20 s')), 20_000);
    createInterface({ input: child.stdout! }).once('line', (l) => {
      clearTimeout(timer);
      resolve(l);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`skylark serve exited with ${code}: ${stderr.slice(0, 1000)}`));
    });
  });
  return { child, http: (JSON.parse(line) as { http: string }).http };
}

async function startNginx(dir: string, file: string): Promise<{ child: ChildProcess; url: string }> {
  mkdirSync(path.join(dir, 'static'), { recursive: true });
  copyFileSync(file, path.join(dir, 'static', 'episode.wav'));
  const port = await freePort();
  const conf = readFileSync(path.join(import.meta.dirname, 'peers', 'nginx-static.conf.tmpl'), 'utf8').replaceAll('@WORKERS@', '1').replaceAll('@DIR@', dir).replaceAll('@HTTP_PORT@', String(port));
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const child = spawnWithFds([have('nginx') ? 'nginx' : '/usr/sbin/nginx', '-p', `${dir}/`, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')]);
  const url = `http://127.0.0.1:${port}/static/episode.wav`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}`);
    try {
      if ((await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(1000) })).status === 200) return { child, url };
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error('nginx did not answer in 10 s');
    await sleep(100);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run()) console.log(`${r.group} | ${r.name}: ${r.value.toFixed(1)} ${r.unit}${r.peer ? ` (nginx ${r.peer.value.toFixed(1)})` : ''} — ${r.note ?? ''}`);
}
