/**
 * What an origin costs behind caching edges (docs/behaviour.md §12; docs/edges.md),
 * loopback only, bounded in time. One Skylark origin (the CLI process) serving an AAC 128 kbps
 * LL-HLS stream (0.5 s parts, one layer) published by FFmpeg; the same number of `hlsjs-ll`
 * listeners (bench/lib/player-client.ts: blocking reload for the next part, then the part, as
 * hls.js does), each with an `X-Forwarded-For` public address, in two steps of the same run:
 *
 * 1. no edges: every listener talks to the origin (which trusts the client's address);
 * 2. two edges: two stock nginx edges from `skylark edge-config` (127.0.0.2, 127.0.0.3, each
 *    sending its media playlist log lines to the origin's edge log receiver), half the listeners
 *    on each.
 *
 * Per step, over a measuring window: the origin's CPU (/proc utime+stime of the process and its
 * children) above its idle CPU (publisher running, no listeners), per listener-second; the
 * requests the origin answered per listener-second (step 1: every listener request; step 2: the
 * edges' origin fetches, counted from their access logs' `$upstream_addr`); the edges' own CPU;
 * how late listeners got parts after they were first listed; and what the origin's `/stats`
 * counted. Target: ≥ 10 × fewer origin requests per listener behind the edges.
 *
 * Environment: BENCH_EDGES_LISTENERS (1000), BENCH_EDGES_WINDOW_S (10).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import dgram from 'node:dgram';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { CLK_TCK, sleep, spawnWithFds, stop, treeTicks } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { nginxBinary, startEdge, type Edge } from './lib/nginx-edges.js';
import type { PlayerConfig, PlayerReport } from './lib/player-client.js';

const root = path.resolve(import.meta.dirname, '..');
const log = (msg: string) => process.stderr.write(`[edges] ${msg}\n`);
const LISTENERS = Number(process.env.BENCH_EDGES_LISTENERS || 1000);
const WINDOW_S = Number(process.env.BENCH_EDGES_WINDOW_S || 10);
const GROUP = 'Edges: the origin behind two nginx edges from `skylark edge-config` (LL-HLS, loopback)';
/** Public client addresses (five countries), taken in turn by the listeners. */
const ADDRESSES = ['8.8.8.8', '81.2.69.160', '5.9.0.1', '133.242.0.1', '62.210.0.1'];

/** bench/run.ts gives this part this long. */
export const timeoutMs = 6 * 60_000;

interface StepResult {
  label: string;
  usPerListenerS: number;
  originReqPerListenerS: number;
  edgeUsPerListenerS: number;
  p99: number;
  max: number;
  counted: number;
  clientReqPerListenerS: number;
  errors: string;
}

/** A free UDP port on 127.0.0.1. */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.bind(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

function runClient(cfg: PlayerConfig): Promise<PlayerReport> {
  const child = spawnWithFds([process.execPath, '--import', 'tsx', path.join(root, 'bench', 'lib', 'player-client-child.ts'), JSON.stringify(cfg)], { cwd: root });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) =>
    child.once('close', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as PlayerReport);
      } catch {
        reject(new Error(`load client failed: ${err.trim().slice(-300)}`));
      }
    }),
  );
}

async function api(base: string, key: string, method: string, p: string, body?: unknown) {
  const r = await fetch(`${base}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json() as Promise<any>;
}

/** Delay of every due part to every listener after it was first listed (ms), and missing ones. */
function delays(reports: PlayerReport[], windowMs: number): { p99: number; max: number; missing: number } {
  const first = new Map<number, number>();
  for (const r of reports)
    for (let i = 0; i < r.seen.length; i += 2) {
      const at = r.seen[i + 1]!;
      if (!(first.get(r.seen[i]!)! <= at)) first.set(r.seen[i]!, at);
    }
  const due = [...first].filter(([, at]) => at >= 0 && at <= windowMs - 2000);
  const ds: number[] = [];
  let missing = 0;
  for (const r of reports)
    for (const d of r.done) {
      const got = new Map<number, number>();
      for (let i = 0; i < d.length; i += 2) got.set(d[i]!, d[i + 1]!);
      for (const [k, at] of due) {
        const t = got.get(k);
        if (t === undefined) missing++;
        else ds.push(t - at);
      }
    }
  ds.sort((a, b) => a - b);
  return { p99: ds.length ? ds[Math.floor(0.99 * (ds.length - 1))]! : NaN, max: ds.length ? ds[ds.length - 1]! : NaN, missing };
}

/** One step: `urls` (one per client process) get `LISTENERS` listeners between them. */
async function step(label: string, o: { originPid: number; idlePct: number; urls: string[]; edges: Edge[]; stats: () => Promise<number> }): Promise<StepResult> {
  const startAt = Date.now() + 3000;
  const rampMs = Math.max(2000, LISTENERS); // 1,000 arrivals a second
  const from = startAt + rampMs + 4000;
  const to = from + WINDOW_S * 1000;
  const per = Math.ceil(LISTENERS / o.urls.length);
  log(`${label}: ${LISTENERS} listeners over ${o.urls.length} client process(es), window ${WINDOW_S} s`);
  const clients = o.urls.map((url, i) =>
    runClient({ mode: 'hlsjs-ll', url, count: per, index: 0, stride: 1, total: per, startAt, rampMs, from, to, exitAt: to + 1000, forwardedFor: ADDRESSES.map((_, k) => ADDRESSES[(k + i) % ADDRESSES.length]!) }),
  );
  while (Date.now() < from) await sleep(20);
  const w0 = performance.now();
  const o0 = treeTicks(o.originPid);
  const e0 = o.edges.reduce((a, e) => a + treeTicks(e.pid), 0);
  while (Date.now() < from + (WINDOW_S * 1000) / 2) await sleep(20);
  const counted = await o.stats();
  while (Date.now() < to) await sleep(20);
  const o1 = treeTicks(o.originPid);
  const e1 = o.edges.reduce((a, e) => a + treeTicks(e.pid), 0);
  const windowS = (performance.now() - w0) / 1000;
  const reports = await Promise.all(clients);
  const n = per * o.urls.length;
  const ls = n * windowS;
  const clientRequests = reports.reduce((a, r) => a + r.requests, 0);
  const originRequests = o.edges.length ? o.edges.reduce((a, e) => a + e.originFetches(from, to).total, 0) : clientRequests;
  const originUs = Math.max(0, ((o1 - o0) / CLK_TCK) * 1e6 - (o.idlePct / 100) * windowS * 1e6);
  const d = delays(reports, WINDOW_S * 1000);
  const errs: Record<string, number> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.errors)) errs[k] = (errs[k] ?? 0) + v;
  const alive = reports.reduce((a, r) => a + r.alive, 0);
  const res: StepResult = {
    label,
    usPerListenerS: originUs / ls,
    originReqPerListenerS: originRequests / ls,
    edgeUsPerListenerS: o.edges.length ? (((e1 - e0) / CLK_TCK) * 1e6) / ls : NaN,
    p99: d.p99,
    max: d.max,
    counted,
    clientReqPerListenerS: clientRequests / ls,
    errors: `${alive}/${n} alive, ${d.missing} (listener, part) missing; errors: ${Object.entries(errs).map(([k, v]) => `${k}×${v}`).join(', ') || 'none'}`,
  };
  log(`${label}: origin ${res.usPerListenerS.toFixed(1)} µs/listener-s, ${res.originReqPerListenerS.toFixed(3)} origin req/listener-s (listeners ${res.clientReqPerListenerS.toFixed(2)}), delay p99/max ${d.p99}/${d.max} ms, /stats ${counted}; ${res.errors}`);
  return res;
}

export async function run(): Promise<BenchRow[]> {
  if (!nginxBinary()) throw new Error('nginx is not installed: apt-get install -y nginx');
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-edges-'));
  chmodSync(work, 0o755);
  const children: ChildProcess[] = [];
  const edges: Edge[] = [];
  try {
    const edgeLogPort = await freeUdpPort();
    const dataDir = path.join(work, 'origin');
    const sky = await startSkylark(dataDir, {
      SKYLARK_ABR_LADDER: '0',
      SKYLARK_TRUSTED_PROXIES: '127.0.0.0/8',
      SKYLARK_EDGE_LOG_HOST: '127.0.0.1',
      SKYLARK_EDGE_LOG_PORT: String(edgeLogPort),
      SKYLARK_HTTP_MAX_HELD: '100000',
      SKYLARK_HTTP_MAX_HELD_PER_IP: '100000',
      // 1,000 listeners share five client addresses: lift the sessions-per-address rate.
      SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE: '1000000',
    });
    children.push(sky.child);
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    const s = await api(sky.http, key, 'POST', '/v2/streams', { title: 'Bench edges', codec: 'aac', reconnectWindow: 300, latencyMode: 'low' });
    if (!s.id) throw new Error(`POST /v2/streams failed: ${JSON.stringify(s)}`);
    children.push(
      spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '3600', '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', `${s.rtmpUrl}/${s.streamKey}`], { stdio: 'ignore' }),
    );
    for (let i = 0; i < 120; i++) {
      const r = await fetch(s.hlsUrl).catch(() => null);
      if (r?.status === 200) {
        const uri = (await r.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
        if ((await (await fetch(new URL(uri, s.hlsUrl))).text()).includes('#EXTINF')) break;
      }
      await sleep(250);
    }
    for (const [i, host] of ['127.0.0.2', '127.0.0.3'].entries()) {
      edges.push(await startEdge({ origin: sky.http, host, dir: path.join(work, `edge-${i}`), logTo: `127.0.0.1:${edgeLogPort}`, originDataDir: dataDir, trustForwardedFrom: ['127.0.0.0/8'] }));
    }
    const pid = sky.child.pid!;
    // Idle: the publisher running, no listeners.
    await sleep(2000);
    const t0 = performance.now();
    const c0 = treeTicks(pid);
    await sleep(6000);
    const idlePct = ((treeTicks(pid) - c0) / CLK_TCK / ((performance.now() - t0) / 1000)) * 100;
    log(`origin idle: ${idlePct.toFixed(2)} % of a core`);
    const stats = async () => (await api(sky.http, key, 'GET', `/v2/streams/${s.id}/stats`)).listenerCount as number;
    const hls = (base: string) => `${base}/hls/${s.id}/index.m3u8`;
    const direct = await step('no edges', { originPid: pid, idlePct, urls: [hls(sky.http), hls(sky.http)], edges: [], stats });
    await sleep(8000); // the direct listeners leave (3 target durations)
    const behind = await step('2 edges', { originPid: pid, idlePct, urls: edges.map((e) => hls(e.url)), edges, stats });
    const fewer = direct.originReqPerListenerS / behind.originReqPerListenerS;
    const at = `${LISTENERS.toLocaleString('en-US')} hls.js-like LL-HLS listeners, ${WINDOW_S} s window`;
    return [
      { group: GROUP, headline: true, name: 'origin CPU per listener-second, behind 2 edges', value: behind.usPerListenerS, unit: 'µs', peer: { name: 'no edges', value: direct.usPerListenerS }, note: `${at}; above idle (${idlePct.toFixed(1)} % of a core); ${(direct.usPerListenerS / Math.max(1e-9, behind.usPerListenerS)).toFixed(1)} × less` },
      { group: GROUP, headline: true, name: 'origin requests per listener-second, behind 2 edges', value: behind.originReqPerListenerS, unit: 'req/s', peer: { name: 'no edges', value: direct.originReqPerListenerS }, note: `${fewer.toFixed(1)} × fewer (target ≥ 10 ×); listeners made ${behind.clientReqPerListenerS.toFixed(2)} req/s each` },
      { group: GROUP, headline: true, name: 'edge CPU per listener-second (nginx, both edges)', value: behind.edgeUsPerListenerS, unit: 'µs', note: at },
      { group: GROUP, headline: true, name: 'part delay after first listed p99, behind 2 edges', value: behind.p99, unit: 'ms', peer: { name: 'no edges', value: direct.p99 }, note: `max ${behind.max} ms (no edges ${direct.max} ms): nginx's cache lock waiters look every 500 ms; ${behind.errors}` },
      { group: GROUP, headline: true, name: 'listeners the origin counts, behind 2 edges', value: behind.counted, unit: 'listeners', peer: { name: 'no edges', value: direct.counted }, note: `of ${LISTENERS} (edge log lines over UDP syslog)` },
    ];
  } finally {
    for (const e of edges) await e.stop();
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
    rmSync(work, { recursive: true, force: true });
  }
}

// `npx tsx bench/edges.bench.ts` prints this part's rows alone.
if (import.meta.url === `file://${process.argv[1]}`) await (await import('./lib/format.js')).printPartAlone(run);
