/**
 * LL-HLS part GETs per server CPU-second: a public stream's part answered by the native HTTP front
 * (docs/http.md "Media objects answered in native code") against the same Skylark with
 * `SKYLARK_HLS_NATIVE_PARTS=0` (the HLS routes in JavaScript answer it) and against nginx serving
 * the same bytes as a static file (`sendfile`, open_file_cache: bench/peers/nginx-static.conf.tmpl).
 *
 * Setup: two `skylark serve` processes from dist/ (one HTTP thread each), a low-latency AAC stream
 * on each published with FFmpeg until its media playlist lists 3 segments, then stopped (the
 * stream stays live for its reconnect window, so its last parts stay kept). The newest listed
 * part is the target; its bytes go to nginx's static folder. Each round runs `wrk -t1` for
 * BENCH_PARTS_SECONDS (6) at BENCH_PARTS_CONNS (100) keep-alive connections against each server
 * in turn (the order alternates between rounds; BENCH_PARTS_ROUNDS, 3), and checks before and
 * after that every server answers the part's bytes. Server CPU is user + system time from /proc
 * over the run. Rows: the median of the rounds, Skylark (native) beside each peer.
 *
 * What it shows: the CPU one part GET costs the server with and without JavaScript per request
 * (the two requests per part an hls.js listener makes are a blocking reload, always answered by
 * the routes, and this GET). A wrk connection sends only part GETs, so one request per
 * connection every 4 s still goes to the routes (the HTTP library's idle timeout, docs/http.md).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { have, sleep, stop } from './lib/proc.js';
import { get } from './lib/http-check.js';
import { createAccount, envNum, measure, median, publishUntilSegments, startNginx, startSkylark, type Measured } from './http-segments.js';

const GROUP = 'LL-HLS part GET per server CPU-second (wrk -t1, keep-alive, one HTTP thread)';
const log = (s: string) => process.stderr.write(`[ll-parts] ${s}\n`);

/** A low-latency stream on `http`, published until 3 segments are listed: its newest part's URL and bytes. */
export async function livePart(http: string, secretKey: string): Promise<{ url: string; bytes: Uint8Array }> {
  const created = await fetch(`${http}/v2/streams`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secretKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title: 'bench parts', codec: 'aac', quality: 'medium', latencyMode: 'low', reconnectWindow: 300 }),
    signal: AbortSignal.timeout(10_000),
  });
  const stream = (await created.json()) as { rtmpUrl?: string; streamKey?: string; hlsUrl?: string };
  if (created.status !== 201 || !stream.rtmpUrl || !stream.hlsUrl) throw new Error(`POST /v2/streams answered ${created.status}`);
  const { mediaUrl, playlist } = await publishUntilSegments(`${stream.rtmpUrl}/${stream.streamKey}`, stream.hlsUrl, 3);
  // The newest full-length part (the publisher's stop flushes a short one at the end).
  const parts = [...playlist.matchAll(/#EXT-X-PART:DURATION=([\d.]+)[^\n]*URI="([^"]+)"/g)].map((m) => ({ s: Number(m[1]), uri: m[2]! }));
  const longest = Math.max(...parts.map((p) => p.s));
  const uri = parts.filter((p) => p.s >= 0.9 * longest).pop()?.uri;
  if (!uri) throw new Error('the low-latency playlist lists no part');
  const url = new URL(uri, mediaUrl).href;
  const r = await get(url);
  if (r.status !== 200) throw new Error(`part ${url} answered ${r.status}`);
  return { url, bytes: r.body };
}

export async function run(): Promise<BenchRow[]> {
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  const seconds = envNum('BENCH_PARTS_SECONDS', 6);
  const rounds = Math.max(1, Math.round(envNum('BENCH_PARTS_ROUNDS', 3)));
  const conns = Math.max(1, Math.round(envNum('BENCH_PARTS_CONNS', 100)));
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-parts-'));
  const children: ChildProcess[] = [];
  try {
    const servers: Array<{ who: string; pid: number; url: string; bytes: Uint8Array }> = [];
    for (const [who, flag] of [['native', '1'], ['routes', '0']] as const) {
      const dir = path.join(work, who);
      const sky = await startSkylark(dir, { SKYLARK_HLS_NATIVE_PARTS: flag, SKYLARK_ABR_LADDER: '0' });
      children.push(sky.child);
      const part = await livePart(sky.http, await createAccount(dir, sky.defaultSecretKey));
      servers.push({ who, pid: sky.child.pid!, ...part });
      log(`${who}: pid ${sky.child.pid}, part ${part.url} (${part.bytes.byteLength} B)`);
    }
    if (have('nginx')) {
      const dir = path.join(work, 'nginx');
      const n = await startNginx(dir);
      children.push(n.child);
      writeFileSync(path.join(dir, 'static', 'part.m4s'), servers[0]!.bytes);
      servers.push({ who: 'nginx', pid: n.child.pid!, url: `${n.base}/static/part.m4s`, bytes: servers[0]!.bytes });
    }
    const got = new Map<string, Measured[]>(servers.map((s) => [s.who, []]));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? servers : [...servers].reverse();
      for (const s of order) {
        const m = await measure(s.url, s.pid, s.bytes, { threads: 1, connections: conns, seconds });
        got.get(s.who)!.push(m);
        log(`round ${r + 1}/${rounds} ${s.who}: ${Math.round(m.wrk.reqPerSec)} req/s, server CPU ${m.serverCpu.toFixed(0)} %, box ${m.boxCpu.toFixed(0)} % of 200${m.wrk.non2xx3xx ? `, NON-2xx ${m.wrk.non2xx3xx}` : ''}${m.invalid.length ? `, INVALID: ${m.invalid.join('; ')}` : ''}`);
        await sleep(500);
      }
    }
    const perCpu = (m: Measured) => (m.serverCpu > 0 && m.invalid.length === 0 && m.wrk.non2xx3xx === 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN);
    const value = (who: string) => median((got.get(who) ?? []).map(perCpu));
    const runs = (who: string) => (got.get(who) ?? []).map((m) => Math.round(perCpu(m))).join(', ');
    const native = value('native');
    const rows: BenchRow[] = [];
    for (const peer of ['routes', 'nginx']) {
      if (!got.has(peer)) continue;
      const pv = value(peer);
      rows.push({
        group: GROUP,
        name: `${conns} conns: Skylark native vs ${peer === 'routes' ? 'Skylark with SKYLARK_HLS_NATIVE_PARTS=0 (the HLS routes)' : 'nginx static (sendfile)'}`,
        value: native,
        unit: 'req/CPU-s',
        peer: { name: peer === 'routes' ? 'routes (JS)' : 'nginx', value: pv },
        note: `${seconds} s × ${rounds}, median; runs native ${runs('native')}; ${peer} ${runs(peer)}; ≈ ${(1e6 / native).toFixed(1)} vs ${(1e6 / pv).toFixed(1)} µs of server CPU per part GET`,
      });
    }
    return rows;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}
