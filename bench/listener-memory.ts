/**
 * Where a listener's memory goes, loopback only, bounded in time (~3–4 min): for each
 * kind of connection, a fresh Skylark CLI process (`node bin/skylark.js serve`, one HTTP thread)
 * with one stream published by FFmpeg, N connections from a separate client process (so the
 * client's memory is not counted), and the server's memory read from inside it before and after,
 * each time after a full GC.
 *
 * Cases (one server each, N = BENCH_MEMORY_N, default 4,000):
 * - `idle`: bare TCP connections that sent nothing (uWS's per-connection cost: the us_socket and
 *   its HTTP extension). uWS closes them after its 10 s idle timeout, so they are measured at once.
 * - `request`: keep-alive connections that GET the media playlist without a session id every 3 s
 *   (uWS after a request; no listener session: such a request is served but not tracked).
 * - `session`: the same after a multivariant GET: the media playlist GETs carry the minted
 *   `?sid=`, so each connection is a listener session (src/delivery/listeners/registry.ts, hls-access.ts).
 * - `progressive`: `/listen/<id>.mp3` listeners (MP3 128 kbit/s), 6 s after the last arrival.
 * - `classic`: classic HLS players on the MP3 stream (2 s segments), bench/lib/player-client.ts.
 * - `ll`: hls.js-like LL-HLS players on an AAC stream with 0.5 s parts: chained blocking reloads
 *   held (src/delivery/listeners/held.ts) plus a second connection for parts (2 connections a listener).
 * - `icecast2`: the `progressive` case against Debian Icecast 2 (bench/peers/icecast.xml.tmpl),
 *   RSS only (the ratio), per connection it held at the reading (`n`: fewer than N when its slow
 *   accepts did not take all of them within the client's 60 s).
 *
 * How the server is read: Skylark runs with `--expose-gc --import <probe.mjs>` (through
 * SKYLARK_BENCH_NODE_FLAGS); the probe, on SIGUSR2, reads `process.memoryUsage()`, VmRSS and the
 * resident bytes by mapping (/proc/self/smaps: the main malloc arena, anonymous, file), runs two
 * full GCs (`gc()`: Node 20's `gc({ type: 'major' })` runs only a scavenge), waits 300 ms, runs
 * a third, waits BENCH_MEMORY_SETTLE_MS (1,000) while V8's background threads give back the pages
 * that collection freed and the server trims the C heap after it, reads them again and writes them
 * to a file (read at once after the collection, the same server varied by up to 2 KB per listener
 * from run to run: pages the collection had just freed, still resident); or writes a heap snapshot (`v8.writeHeapSnapshot`), whose nodes summed by constructor
 * tell which JS objects a listener keeps. Per case: a warm-up with BENCH_MEMORY_WARM (100)
 * connections of the same kind (code paths compiled, the progressive mount created) and their
 * departure (HLS sessions time out after 3 target durations); the baseline reading; the N
 * connections; the loaded reading, the server's socket count (/proc/PID/fd), the kernel's TCP
 * memory (/proc/net/sockstat, both ends of every loopback connection, box-wide, not in any RSS);
 * then a heap snapshot, the departure, another reading and snapshot. Snapshots come after the
 * readings because writing one grows the RSS by ~80–100 MB of malloc that glibc keeps and later
 * allocations reuse unseen; "JS heap by constructor" is loaded minus departed. `heapUsed` after a
 * GC is approximate (V8 sweeps concurrently); the snapshot's sums are exact.
 * BENCH_MEMORY_RETAINED=1 also snapshots the baseline and logs what stays after the listeners left
 * (that run's RSS columns are then wrong: read only its heap lists).
 *
 * Per listener (÷ N): RSS Δ before GC, RSS Δ after GC, V8 heapUsed Δ and heapTotal Δ (committed)
 * after GC, external Δ (arrayBuffers included, as Node counts them), and the native remainder =
 * RSS Δ − heapTotal Δ − external Δ (uWS sockets and buffers, malloc, SQLite's page cache); it
 * goes negative when V8 committed heap it has not touched (a grown young generation), and the
 * V8 heap spaces' Δ are printed per case to show that.
 *
 * Run: `node --import tsx bench/listener-memory.ts [case …]` (cases filter by name). Environment:
 * BENCH_MEMORY_N (4000), BENCH_MEMORY_WARM (100), BENCH_MEMORY_SNAPSHOT (1; 0: no heap snapshots),
 * BENCH_MEMORY_TOP (12: constructors listed per case), BENCH_MEMORY_NUMERIC (1: numbers in fields and
 * tables are snapshot nodes too, so a boxed number shows its holder), BENCH_MEMORY_KEEP (a directory
 * that keeps each case's loaded snapshot), BENCH_MEMORY_MAPS (1: the anonymous mappings that grew
 * most, by start address and size: V8's 256 KiB pages, glibc's 64 MiB-aligned thread arenas).
 * Writes bench/.out/listener-memory.json.
 * `npm run bench` runs it through bench/listener-memory.bench.ts (a child process, the cases the
 * goals block needs) and reads this JSON; by hand it takes minutes (one server start per case).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, existsSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { freePort, have, shq, sleep, stop } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { HttpConn, PlayerRun, type PlayerConfig, type WireStats } from './lib/player-client.js';

const root = path.resolve(import.meta.dirname, '..');
const log = (msg: string) => process.stderr.write(`[listener-memory] ${msg}\n`);
const envNum = (name: string, dflt: number) => {
  const n = Number(process.env[name]);
  return process.env[name] && Number.isFinite(n) && n >= 0 ? n : dflt;
};
const N = Math.round(envNum('BENCH_MEMORY_N', 4000));
const WARM = Math.round(envNum('BENCH_MEMORY_WARM', 100));
const SNAPSHOTS = process.env.BENCH_MEMORY_SNAPSHOT !== '0';
const TOP = Math.round(envNum('BENCH_MEMORY_TOP', 12));
/** Also a heap snapshot after the baseline, to list what stays after the listeners left (the RSS Δ of that run then reuses the snapshot's freed malloc: read only the heap columns). */
const RETAINED = process.env.BENCH_MEMORY_RETAINED === '1';
/** BENCH_MEMORY_KEEP=<dir>: the loaded heap snapshot of each case is kept there (`<case>-loaded.heapsnapshot`). */
const KEEP_SNAPSHOT = process.env.BENCH_MEMORY_KEEP ?? '';
/** Playlist GETs of the `request`/`session` cases: often enough for uWS's 10 s idle timeout and a 6 s session timeout. */
const POLL_MS = 3000;

type CaseName = 'idle' | 'request' | 'session' | 'progressive' | 'classic' | 'll' | 'icecast2';

/** What a client process does (its one JSON argument). */
interface ClientConfig {
  kind: Exclude<CaseName, 'icecast2'> | 'icecast';
  n: number;
  /** idle/request/session: the server; request/session: the multivariant playlist path. */
  host: string;
  port: number;
  path: string;
  /** PlayerRun cases: the URL (multivariant playlist or stream). */
  url: string;
}

// ── The client process ───────────────────────────────────────────────────────────────────────────

/**
 * Opens `cfg.n` connections of `cfg.kind`; prints `{"ready":…}` once every one has connected (and
 * had its first answer), then `{"report":…}` for each line read on stdin. Exits when stdin ends.
 */
async function clientMain(cfg: ClientConfig): Promise<void> {
  let status: () => { opened: number; answered: number; alive: number; errors: Record<string, number> };
  let ready: () => boolean;
  const t0 = Date.now();
  if (cfg.kind === 'idle' || cfg.kind === 'request' || cfg.kind === 'session') {
    const wire: WireStats = { from: 0, to: 0, requests: 0, bytes: 0 };
    const errors: Record<string, number> = {};
    const err = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);
    let opened = 0;
    let answered = 0;
    let alive = 0;
    let inFlight = 0;
    let next = 0;
    const reqFor = (p: string) => `GET ${p} HTTP/1.1\r\nHost: ${cfg.host}:${cfg.port}\r\nUser-Agent: listener-memory/1.0 (bench)\r\n\r\n`;
    const dir = cfg.path.slice(0, cfg.path.lastIndexOf('/') + 1);
    const open = () => {
      while (inFlight < 200 && next < cfg.n) {
        next++;
        let first = true;
        let c: HttpConn | null = null;
        const poll = (p: string) => {
          c!.send(reqFor(p), false, (st) => {
            if (st !== 200) err(`playlist ${st}`);
            if (first) {
              first = false;
              answered++;
            }
            setTimeout(() => c && !c.busy && poll(p), POLL_MS).unref();
          });
        };
        c = new HttpConn(
          cfg.port,
          cfg.host,
          wire,
          () => {
            opened++;
            alive++;
            if (cfg.kind === 'idle') return;
            // The multivariant playlist: the variant URI (with `?sid=` minted for this connection).
            c!.send(reqFor(cfg.path), true, (st, body) => {
              const uri = body.split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('#'));
              if (st !== 200 || !uri) return err(`multivariant ${st}`);
              const media = uri.startsWith('/') ? uri : dir + uri;
              poll(cfg.kind === 'session' ? media : media.replace(/\?.*$/, ''));
            });
          },
          (why) => {
            alive--;
            err(why);
            c = null;
          },
          (d) => {
            inFlight += d;
            if (d < 0) setImmediate(open);
          },
        );
      }
    };
    open();
    status = () => ({ opened, answered, alive, errors });
    ready = () => next >= cfg.n && inFlight === 0 && (cfg.kind === 'idle' ? opened : answered) + Object.values(errors).reduce((a, b) => a + b, 0) >= cfg.n;
  } else {
    const mode = cfg.kind === 'll' ? 'hlsjs-ll' : cfg.kind === 'classic' ? 'classic' : 'icecast';
    const rampMs = Math.max(1000, cfg.n); // 1,000 arrivals/s (Icecast: its listen backlog of 5 cannot take a burst)
    const startAt = Date.now() + 100;
    const pc: PlayerConfig = { mode, url: cfg.url, count: cfg.n, index: 0, stride: 1, total: cfg.n, startAt, rampMs: cfg.kind === 'icecast' ? rampMs * 3 : rampMs, from: startAt, to: startAt + 600_000, exitAt: startAt + 600_000, maxConnecting: 64 };
    const run = new PlayerRun(pc);
    run.start();
    status = () => {
      const r = run.report();
      return { opened: r.started, answered: r.started, alive: r.alive, errors: r.errors };
    };
    ready = () => status().answered >= cfg.n;
  }
  const say = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
  while (!ready() && Date.now() - t0 < 60_000) await sleep(100);
  say({ ready: { ...status(), ms: Date.now() - t0 } });
  const rl = createInterface({ input: process.stdin });
  rl.on('line', () => say({ report: status() }));
  rl.on('close', () => process.exit(0));
}

// ── The server probe (runs inside Skylark) ──────────────────────────────────────────────────────

/** Loaded into Skylark with `--import`: answers SIGUSR2 with a memory reading or a heap snapshot (see the module comment). */
const PROBE = `
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import v8 from 'node:v8';
const out = process.env.SKYLARK_BENCH_MEMPROBE;
const SETTLE_MS = Number(process.env.BENCH_MEMORY_SETTLE_MS ?? 1000);
const status = () => {
  const s = readFileSync('/proc/self/status', 'utf8');
  const kb = (k) => Number(new RegExp(k + ':\\\\s+(\\\\d+) kB').exec(s)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), rssAnon: kb('RssAnon'), rssFile: kb('RssFile'), rssShmem: kb('RssShmem') };
};
// Resident bytes by mapping (/proc/self/smaps): brk = the main malloc arena ([heap]); anon = anonymous
// mappings (V8's pages, other threads' malloc arenas, large mallocs, the HTTP front's tables); file; other.
// BENCH_MEMORY_MAPS=1: also each anonymous mapping's start, size and resident bytes (which ones grew).
const listMaps = process.env.BENCH_MEMORY_MAPS === '1';
const maps = () => {
  const r = { brk: 0, anon: 0, file: 0, other: 0 };
  const list = [];
  let cls = 'other';
  let cur = null;
  for (const l of readFileSync('/proc/self/smaps', 'utf8').split('\\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(l)) {
      const name = l.split(/ +/)[5] ?? '';
      cls = name === '[heap]' ? 'brk' : name === '' ? 'anon' : name.startsWith('/') ? 'file' : 'other';
      const [a, b] = l.split(' ')[0].split('-');
      cur = cls === 'anon' && listMaps ? [a, Number(BigInt('0x' + b) - BigInt('0x' + a)), 0] : null;
      if (cur) list.push(cur);
    } else if (l.startsWith('Rss:')) {
      const n = Number(l.split(/ +/)[1]) * 1024;
      r[cls] += n;
      if (cur) cur[2] = n;
    }
  }
  if (listMaps) r.list = list;
  return r;
};
const read = () => {
  const m = process.memoryUsage();
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, size: s.space_size }]));
  return { ...status(), heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, spaces, maps: maps() };
};
const answer = (r) => { writeFileSync(out + '.tmp', JSON.stringify(r)); renameSync(out + '.tmp', out + '.json'); };
if (out && isMainThread) {
  process.on('SIGUSR2', () => {
    try {
      const cmd = readFileSync(out + '.cmd', 'utf8').trim();
      if (cmd === 'mem') {
        const before = read();
        globalThis.gc();
        globalThis.gc();
        setTimeout(() => {
          try {
            globalThis.gc();
            // Read once V8's background threads have given back what the last collection freed.
            setTimeout(() => {
              try {
                answer({ before, after: read() });
              } catch (e) { answer({ error: String(e) }); }
            }, SETTLE_MS);
          } catch (e) { answer({ error: String(e) }); }
        }, 300);
      } else if (cmd.startsWith('snap ')) {
        // BENCH_MEMORY_NUMERIC=1: numbers in fields get edges too (which field keeps a boxed double).
        v8.writeHeapSnapshot(cmd.slice(5), process.env.BENCH_MEMORY_NUMERIC === '1' ? { exposeNumericValues: true } : undefined);
        answer({ snap: true });
      } else answer({ error: 'unknown command ' + cmd });
    } catch (e) { answer({ error: String(e) }); }
  });
}
`;

interface Reading {
  rss: number;
  rssAnon: number;
  rssFile: number;
  rssShmem: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  /** V8 heap spaces: live bytes and committed bytes. */
  spaces: Record<string, { used: number; size: number }>;
  /** Resident bytes by mapping: the main malloc arena (brk), anonymous, file-backed, other. */
  maps: { brk: number; anon: number; file: number; other: number; list?: Array<[string, number, number]> };
}

/** Asks the probe in `pid` for `cmd` and waits for its answer (≤ 120 s). */
async function ask(pid: number, probeOut: string, cmd: string): Promise<any> {
  writeFileSync(probeOut + '.cmd', cmd);
  if (existsSync(probeOut + '.json')) unlinkSync(probeOut + '.json');
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    await sleep(50);
    if (existsSync(probeOut + '.json')) {
      const r = JSON.parse(readFileSync(probeOut + '.json', 'utf8'));
      if (r.error) throw new Error(`server probe: ${r.error}`);
      return r;
    }
  }
  throw new Error(`the server probe did not answer '${cmd}' in 120 s`);
}

const memory = (pid: number, probeOut: string) => ask(pid, probeOut, 'mem') as Promise<{ before: Reading; after: Reading }>;

/** Sockets among the open fds of `pid`. */
function socketCount(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
    } catch {
      /* closed meanwhile */
    }
  }
  return n;
}

/** The kernel's TCP buffer memory, all sockets of the box (bytes; /proc/net/sockstat `mem` is in pages). */
function kernelTcpBytes(): number {
  const m = /TCP: .* mem (\d+)/.exec(readFileSync('/proc/net/sockstat', 'utf8'));
  return m ? Number(m[1]) * 4096 : NaN;
}

/** The kernel's slab memory of the box (bytes; sockets, inodes, epoll items live there). Noisy: the box is shared. */
function slabBytes(): number {
  const m = /Slab:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

function vmRss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

// ── Heap snapshots: self sizes summed by constructor ────────────────────────────────────────────

type Totals = Map<string, { count: number; size: number }>;

/** A heap snapshot summed by kind, and who holds the nodes of a kind. */
interface Summary {
  totals: Totals;
  /** For each key of `keys`: `<holder key>.<edge name>` → edges, most first (top 4). */
  holders(keys: string[]): Map<string, Array<[string, number]>>;
}

/**
 * Sums a heap snapshot's nodes by kind: objects by constructor name, strings by their first 4
 * characters, arrays, code, closures…
 */
function summarize(file: string): Summary {
  const j = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const f = j.snapshot.meta.node_fields;
  const types = j.snapshot.meta.node_types[0];
  const [iType, iName, iSize, iEdges, step] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size'), f.indexOf('edge_count'), f.length];
  const nodes = j.nodes;
  const keyOf = (i: number) => {
    const type = types[nodes[i + iType]!]!;
    const name = j.strings[nodes[i + iName]!] ?? '';
    if (type === 'object' || type === 'native') return `${type === 'native' ? '(native) ' : ''}${name.slice(0, 60)}`;
    if (type === 'hidden' || type === 'array') return `(${type}) ${name.slice(0, 40)}`;
    if (type.includes('string')) return `(string) ${JSON.stringify(name.slice(0, 4))}`;
    // With BENCH_MEMORY_NUMERIC=1 small integers are nodes too (of no size): apart from boxed numbers.
    if (type === 'number' && nodes[i + iSize] === 0) return '(small integer)';
    return `(${type})`;
  };
  const totals: Totals = new Map();
  for (let i = 0; i < nodes.length; i += step) {
    const key = keyOf(i);
    const t = totals.get(key) ?? { count: 0, size: 0 };
    t.count++;
    t.size += nodes[i + iSize]!;
    totals.set(key, t);
  }
  return {
    totals,
    holders(keys) {
      const want = new Set(keys);
      const ef = j.snapshot.meta.edge_fields;
      const etypes = j.snapshot.meta.edge_types[0];
      const [eType, eName, eTo, estep] = [ef.indexOf('type'), ef.indexOf('name_or_index'), ef.indexOf('to_node'), ef.length];
      const out = new Map<string, Map<string, number>>();
      let e = 0;
      for (let i = 0; i < nodes.length; i += step) {
        const from = keyOf(i);
        for (let k = 0; k < nodes[i + iEdges]!; k++, e += estep) {
          const to = keyOf(j.edges[e + eTo]!);
          if (!want.has(to)) continue;
          const et = etypes[j.edges[e + eType]!]!;
          if (et === 'weak') continue;
          const raw = et === 'element' || et === 'hidden' ? '' : String(j.strings[j.edges[e + eName]!] ?? '');
          // A hash table's slots are internal edges named by their index: one name for all of them.
          const name = raw === '' || /^\d+$/.test(raw) ? `[${et}]` : raw.slice(0, 30);
          const m = out.get(to) ?? new Map<string, number>();
          const h = `${from}.${name}`;
          m.set(h, (m.get(h) ?? 0) + 1);
          out.set(to, m);
        }
      }
      return new Map([...out].map(([k, m]) => [k, [...m].sort((a, b) => b[1] - a[1]).slice(0, 4)]));
    },
  };
}

/** The anonymous mappings whose resident bytes grew most from `a` to `b` (BENCH_MEMORY_MAPS=1), per listener. */
function anonGrowth(a: Array<[string, number, number]>, b: Array<[string, number, number]>, n: number): string {
  const before = new Map(a.map(([start, , rss]) => [start, rss]));
  const grown = b.map(([start, size, rss]) => [start, size, rss - (before.get(start) ?? 0)] as const).sort((x, y) => y[2] - x[2]);
  const size = (x: number) => (x >= 2 ** 20 ? `${(x / 2 ** 20).toFixed(1)} MiB` : `${(x / 1024).toFixed(0)} KiB`);
  const gone = a.filter(([start]) => !b.some(([s]) => s === start)).reduce((t, [, , rss]) => t + rss, 0);
  return `${grown.slice(0, 10).map(([start, sz, d]) => `${start} ${size(sz)} ${(d / 1024 / n).toFixed(3)}`).join('; ')}; mappings gone ${(gone / 1024 / n).toFixed(3)}`;
}

/** The constructors whose self size grew most from `a` to `b`, per listener. */
function topGrowth(a: Totals, b: Totals, n: number, top: number): CaseResult['top'] {
  const rows: CaseResult['top'] = [];
  for (const [k, v] of b) {
    const u = a.get(k) ?? { count: 0, size: 0 };
    rows.push({ what: k, bytesPer: (v.size - u.size) / n, countPer: (v.count - u.count) / n });
  }
  for (const [k, u] of a) if (!b.has(k)) rows.push({ what: k, bytesPer: -u.size / n, countPer: -u.count / n });
  return rows.sort((x, y) => y.bytesPer - x.bytesPer).slice(0, top);
}

// ── Servers ──────────────────────────────────────────────────────────────────────────────────────

async function api(base: string, key: string, method: string, p: string, body?: unknown) {
  const r = await fetch(`${base}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json() as Promise<any>;
}

/** FFmpeg publishing a 440 Hz sine in real time to `url` with `args` (codec, format). */
function ffmpegPublish(url: string, args: string[]): ChildProcess {
  return spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '3600', ...args, url], { stdio: 'ignore' });
}

/** Waits until the stream's media playlist lists 3 segments (and a part, for LL). */
async function waitPlayable(hlsUrl: string, parts: boolean): Promise<void> {
  const deadline = Date.now() + 45_000;
  while (Date.now() < deadline) {
    try {
      const uri = (await (await fetch(hlsUrl)).text()).split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('#'));
      if (uri) {
        const text = await (await fetch(new URL(uri, hlsUrl))).text();
        if ((text.match(/#EXTINF:/g) ?? []).length >= 3 && (!parts || text.includes('#EXT-X-PART:'))) return;
      }
    } catch {
      /* not up yet */
    }
    await sleep(250);
  }
  throw new Error(`${hlsUrl} did not list 3 segments in time`);
}

interface Server {
  pid: number;
  /** Null for a server without the probe (Icecast). */
  probeOut: string | null;
  url: (c: CaseName) => string;
  host: string;
  port: number;
  path: string;
  /** HLS sessions end this long after their last request (ms): 3 target durations. */
  sessionMs: number;
  children: ChildProcess[];
}

async function startServer(work: string, c: CaseName): Promise<Server> {
  const dir = path.join(work, c);
  mkdirSync(dir, { recursive: true });
  if (c === 'icecast2') {
    chmodSync(work, 0o755);
    mkdirSync(path.join(dir, 'log'), { recursive: true });
    chmodSync(dir, 0o777);
    chmodSync(path.join(dir, 'log'), 0o777);
    const port = await freePort();
    const conf = readFileSync(path.join(import.meta.dirname, 'peers', 'icecast.xml.tmpl'), 'utf8').replaceAll('@MAX_CLIENTS@', String(N + WARM + 100)).replaceAll('@PORT@', String(port)).replaceAll('@DIR@', dir);
    writeFileSync(path.join(dir, 'icecast.xml'), conf);
    chmodSync(path.join(dir, 'icecast.xml'), 0o644);
    const ice = spawnFds(['icecast2', '-c', path.join(dir, 'icecast.xml')]);
    await sleep(1500);
    const ff = ffmpegPublish(`icecast://source:anchors@127.0.0.1:${port}/live.mp3`, ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3']);
    const url = `http://127.0.0.1:${port}/live.mp3`;
    await sleep(3000);
    return { pid: ice.pid!, probeOut: null, url: () => url, host: '127.0.0.1', port, path: '/live.mp3', sessionMs: 0, children: [ice, ff] };
  }
  const probeFile = path.join(work, 'probe.mjs');
  writeFileSync(probeFile, PROBE);
  const probeOut = path.join(dir, 'probe');
  const flagsBefore = process.env.SKYLARK_BENCH_NODE_FLAGS;
  process.env.SKYLARK_BENCH_NODE_FLAGS = `${flagsBefore ?? ''} --expose-gc --import ${pathToFileURL(probeFile).href}`;
  const dataDir = path.join(dir, 'data');
  // One layer (no ladder codec process), one HTTP thread (the probe reads the main thread's heap).
  const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0', SKYLARK_HTTP_THREADS: '1', SKYLARK_BENCH_MEMPROBE: probeOut });
  if (flagsBefore === undefined) delete process.env.SKYLARK_BENCH_NODE_FLAGS;
  else process.env.SKYLARK_BENCH_NODE_FLAGS = flagsBefore;
  const children: ChildProcess[] = [sky.child];
  try {
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    const codec = c === 'll' ? 'aac' : 'mp3';
    const s = await api(sky.http, key, 'POST', '/v2/streams', { title: `Bench memory ${c}`, codec, reconnectWindow: 300, latencyMode: codec === 'aac' ? 'low' : 'standard' });
    if (!s.id) throw new Error(`POST /v2/streams failed: ${JSON.stringify(s)}`);
    const args = codec === 'aac' ? ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv'] : ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-f', 'flv'];
    children.push(ffmpegPublish(`${s.rtmpUrl}/${s.streamKey}`, args));
    await waitPlayable(s.hlsUrl, codec === 'aac');
    const u = new URL(s.hlsUrl);
    const listen = `${sky.http}/listen/${s.id}.mp3`;
    return { pid: sky.child.pid!, probeOut, url: (k) => (k === 'progressive' ? listen : s.hlsUrl), host: u.hostname, port: Number(u.port), path: u.pathname, sessionMs: 3 * 2000, children };
  } catch (e) {
    for (const ch of children.reverse()) await stop(ch, 'SIGTERM', 3000);
    throw e;
  }
}

/** Spawns with a raised fd limit (like bench/lib/proc.ts `spawnWithFds`), stdin a pipe. */
function spawnFds(argv: string[]): ChildProcess {
  return spawn('bash', ['-c', `ulimit -n 40000 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec ${argv.map(shq).join(' ')}`], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** A client process running `cfg`; `ready` resolves with its first line, `report()` asks for another, `close()` ends it. */
function startClient(cfg: ClientConfig) {
  const child = spawnFds(['nice', '-n', '10', process.execPath, '--import', 'tsx', path.join(root, 'bench', 'listener-memory.ts'), '--client', JSON.stringify(cfg)]);
  let errText = '';
  child.stderr!.on('data', (d) => (errText += d));
  const waiting: Array<(o: any) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      waiting.shift()?.(JSON.parse(l));
    } catch {
      /* not ours */
    }
  });
  const next = (ms: number) =>
    new Promise<any>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`the client did not answer in ${ms / 1000} s: ${errText.trim().slice(-300)}`)), ms);
      waiting.push((o) => {
        clearTimeout(t);
        resolve(o);
      });
      child.once('exit', () => reject(new Error(`the client exited: ${errText.trim().slice(-300)}`)));
    });
  const ready = next(90_000).then((o) => o.ready as { opened: number; answered: number; alive: number; errors: Record<string, number>; ms: number });
  return {
    ready,
    report: () => {
      const p = next(60_000).then((o) => o.report as { alive: number; errors: Record<string, number> });
      child.stdin!.write('report\n');
      return p;
    },
    close: async () => {
      child.stdin!.end();
      await stop(child, 'SIGTERM', 3000);
    },
  };
}

// ── One case ─────────────────────────────────────────────────────────────────────────────────────

/** Time after every connection is up and answered before the reading (ms): progressive bursts end, players reach their steady state. */
const SETTLE_MS: Record<CaseName, number> = { idle: 300, request: 500, session: 500, progressive: 6000, classic: 4000, ll: 3000, icecast2: 6000 };

interface CaseResult {
  name: CaseName;
  n: number;
  connections: number;
  ready: { opened: number; answered: number; alive: number; errors: Record<string, number>; ms: number };
  aliveAfter: number;
  socketsAtReading: number;
  socketsAfterSnapshot: number;
  base: Reading | null;
  loaded: { before: Reading; after: Reading } | null;
  rssBase: number;
  rssLoaded: number;
  kernelTcp: number;
  slab: number;
  /** After the listeners left (and their sessions timed out): the reading after GC (its RSS includes the loaded snapshot's leftovers). */
  departed: Reading | null;
  /** Heap snapshot, loaded minus departed: self size and count per listener by constructor. */
  top: Array<{ what: string; bytesPer: number; countPer: number; holders?: Array<[string, number]> }>;
}

async function runCase(work: string, name: CaseName): Promise<CaseResult> {
  const srv = await startServer(work, name);
  const kind = name === 'icecast2' ? 'icecast' : name;
  const cfg = (n: number): ClientConfig => ({ kind, n, host: srv.host, port: srv.port, path: srv.path, url: srv.url(name) });
  try {
    log(`${name}: server pid ${srv.pid}; warm-up with ${WARM}`);
    if (WARM > 0) {
      const w = startClient(cfg(WARM));
      await w.ready;
      await sleep(Math.min(SETTLE_MS[name], 2000));
      await w.close();
      // HLS sessions leave after 3 target durations without a request; progressive ones at once.
      await sleep(name === 'session' || name === 'classic' || name === 'll' ? srv.sessionMs + 1500 : 1000);
    }
    await sleep(500);
    const base = srv.probeOut ? (await memory(srv.pid, srv.probeOut)).after : null;
    let baseSnap: Summary | null = null;
    if (srv.probeOut && RETAINED) {
      const f = path.join(work, `${name}-base.heapsnapshot`);
      await ask(srv.pid, srv.probeOut, `snap ${f}`);
      baseSnap = summarize(f);
      rmSync(f, { force: true });
    }
    const rssBase = vmRss(srv.pid);
    const sock0 = socketCount(srv.pid);
    const tcp0 = kernelTcpBytes();
    const slab0 = slabBytes();
    log(`${name}: baseline RSS ${(rssBase / 2 ** 20).toFixed(1)} MB${base ? `, heapUsed ${(base.heapUsed / 2 ** 20).toFixed(1)} MB` : ''}; ${N} connections…`);
    const client = startClient(cfg(N));
    let closed = false;
    try {
      const ready = await client.ready;
      log(`${name}: ${ready.opened} opened, ${ready.answered} answered in ${(ready.ms / 1000).toFixed(1)} s; errors ${JSON.stringify(ready.errors)}`);
      await sleep(SETTLE_MS[name]);
      const rssLoaded = vmRss(srv.pid);
      const loaded = srv.probeOut ? await memory(srv.pid, srv.probeOut) : null;
      const socketsAtReading = socketCount(srv.pid) - sock0;
      const kernelTcp = kernelTcpBytes() - tcp0;
      const slab = slabBytes() - slab0;
      // Heap snapshots come after every reading: writing one grows the RSS by tens of MB (malloc
      // that glibc keeps), which later allocations would reuse unseen.
      let loadedSnap: Summary | null = null;
      if (srv.probeOut && SNAPSHOTS) {
        const f = path.join(work, `${name}-loaded.heapsnapshot`);
        await ask(srv.pid, srv.probeOut, `snap ${f}`);
        loadedSnap = summarize(f);
        if (KEEP_SNAPSHOT) copyFileSync(f, path.join(KEEP_SNAPSHOT, `${name}-loaded.heapsnapshot`));
        rmSync(f, { force: true });
      }
      const socketsAfterSnapshot = socketCount(srv.pid) - sock0;
      const rep = await client.report();
      await client.close();
      closed = true;
      // What stays after the listeners left (HLS sessions time out after 3 target durations): the
      // heap after a GC, and the snapshot the loaded one is compared with.
      await sleep(name === 'session' || name === 'classic' || name === 'll' ? srv.sessionMs + 1500 : 1500);
      const departed = srv.probeOut ? (await memory(srv.pid, srv.probeOut)).after : null;
      let top: CaseResult['top'] = [];
      if (srv.probeOut && loadedSnap) {
        const f = path.join(work, `${name}-departed.heapsnapshot`);
        await ask(srv.pid, srv.probeOut, `snap ${f}`);
        const departedSnap = summarize(f);
        top = topGrowth(departedSnap.totals, loadedSnap.totals, N, TOP);
        if (baseSnap) {
          const kept = topGrowth(baseSnap.totals, departedSnap.totals, N, TOP);
          const held = departedSnap.holders(kept.filter((t) => t.countPer >= 0.5).map((t) => t.what));
          log(`${name}: JS heap after they left minus baseline, per listener:\n${kept.map((t) => `    ${t.bytesPer.toFixed(1).padStart(8)} B  ${t.countPer.toFixed(2).padStart(6)}×  ${t.what}  ${(held.get(t.what) ?? []).map(([h, c]) => `${h} ×${(c / N).toFixed(2)}`).join(', ')}`).join('\n')}`);
        }
        rmSync(f, { force: true });
        // Who holds the kinds that grew most (edges from the loaded snapshot's nodes).
        const held = loadedSnap.holders(top.filter((t) => t.countPer >= 0.5).map((t) => t.what));
        for (const t of top) t.holders = held.get(t.what) ?? [];
      }
      // Icecast takes arrivals slowly (a listen backlog of 5): when fewer than N got in within the
      // client's 60 s, its RSS is divided by the connections it held at the reading.
      const n = name === 'icecast2' && socketsAtReading > 0 ? Math.min(N, socketsAtReading) : N;
      return { name, n, connections: name === 'll' ? 2 * N : n, ready, aliveAfter: rep.alive, socketsAtReading, socketsAfterSnapshot, base, loaded, departed, rssBase, rssLoaded, kernelTcp, slab, top };
    } finally {
      if (!closed) await client.close();
    }
  } finally {
    for (const ch of srv.children.reverse()) await stop(ch, 'SIGTERM', 3000);
  }
}

// ── Report ───────────────────────────────────────────────────────────────────────────────────────

const kb = (bytes: number) => (Number.isFinite(bytes) ? (bytes / 1024).toFixed(2) : '–');

function table(results: CaseResult[]): string {
  const lines = [
    `| case | server sockets Δ at reading | RSS Δ before GC | RSS Δ after GC | heapUsed Δ | heapTotal Δ | external Δ (arrayBuffers) | native remainder | RssFile+Shmem Δ | kernel TCP mem Δ (both ends) |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
  ];
  for (const r of results) {
    const per = (v: number) => kb(v / r.n);
    if (r.base && r.loaded) {
      const b = r.base;
      const a = r.loaded.after;
      const remainder = a.rss - b.rss - (a.heapTotal - b.heapTotal) - (a.external - b.external);
      lines.push(
        `| ${r.name} | ${r.socketsAtReading} | ${per(r.loaded.before.rss - b.rss)} | ${per(a.rss - b.rss)} | ${per(a.heapUsed - b.heapUsed)} | ${per(a.heapTotal - b.heapTotal)} | ` +
          `${per(a.external - b.external)} (${per(a.arrayBuffers - b.arrayBuffers)}) | ${per(remainder)} | ${per(a.rssFile + a.rssShmem - b.rssFile - b.rssShmem)} | ${per(r.kernelTcp)} |`,
      );
    } else {
      lines.push(`| ${r.name} | ${r.socketsAtReading} | ${per(r.rssLoaded - r.rssBase)} | – | – | – | – | – | – | ${per(r.kernelTcp)} |`);
    }
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const all: CaseName[] = ['idle', 'request', 'session', 'progressive', 'classic', 'll', 'icecast2'];
  const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const cases = all.filter((c) => filters.length === 0 || filters.some((f) => c.includes(f)));
  if (!have('ffmpeg')) throw new Error('ffmpeg is not on PATH: apt-get install -y ffmpeg');
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-memory-'));
  chmodSync(work, 0o755);
  const results: CaseResult[] = [];
  const failures: string[] = [];
  const t0 = Date.now();
  try {
    for (const c of cases) {
      if (c === 'icecast2' && !have('icecast2')) {
        failures.push('icecast2: not installed (apt-get install -y icecast2)');
        continue;
      }
      try {
        const r = await runCase(work, c);
        results.push(r);
        log(`${c}: per connection/listener ÷${r.n}: RSS Δ ${kb((r.loaded ? r.loaded.after.rss - r.base!.rss : r.rssLoaded - r.rssBase) / r.n)} KB; sockets Δ ${r.socketsAtReading} (after the snapshot ${r.socketsAfterSnapshot}); alive at the end ${r.aliveAfter}`);
      } catch (e) {
        failures.push(`${c}: ${(e as Error).message}`);
        log(`${c} FAILED: ${(e as Error).message}`);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const out: string[] = [];
  out.push(`Listener memory, N = ${N} per case (KB per listener; ll: 2 connections per listener), ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  out.push('');
  out.push(table(results));
  out.push('');
  const ice = results.find((r) => r.name === 'icecast2');
  const prog = results.find((r) => r.name === 'progressive');
  if (ice && prog && prog.loaded && prog.base) {
    const sky = (prog.loaded.before.rss - prog.base.rss) / N;
    const ic = (ice.rssLoaded - ice.rssBase) / ice.n;
    out.push(`progressive RSS Δ (no GC) per listener: Skylark ${kb(sky)} KB vs icecast2 ${kb(ic)} KB: ×${(sky / ic).toFixed(2)}`);
    out.push('');
  }
  for (const r of results) {
    out.push(`${r.name}: ${r.ready.opened} opened, ${r.ready.answered} answered, alive at the end ${r.aliveAfter}; server sockets Δ ${r.socketsAtReading} at the reading, ${r.socketsAfterSnapshot} after the snapshot; errors ${JSON.stringify(r.ready.errors)}; slab Δ ${kb(r.slab / r.n)} KB/listener (box-wide, noisy)${r.departed && r.base ? `; heapUsed after they left Δ ${kb((r.departed.heapUsed - r.base.heapUsed) / r.n)} KB/listener` : ''}`);
    if (r.top.length) {
      out.push(`  JS heap, loaded minus after they left, by constructor (self size per listener, objects per listener):`);
      for (const t of r.top) {
        const by = t.holders?.length ? `   held by ${t.holders.map(([h, c]) => `${h} ×${(c / r.n).toFixed(2)}`).join(', ')}` : '';
        out.push(`    ${t.bytesPer.toFixed(1).padStart(8)} B  ${t.countPer.toFixed(2).padStart(6)}×  ${t.what}${by}`);
      }
      if (r.base && r.loaded) {
        const sp = Object.keys(r.loaded.after.spaces)
          .map((k) => [k, (r.loaded!.after.spaces[k]!.size - (r.base!.spaces[k]?.size ?? 0)) / 2 ** 20, (r.loaded!.after.spaces[k]!.used - (r.base!.spaces[k]?.used ?? 0)) / 2 ** 20] as const)
          .filter(([, size, used]) => Math.abs(size) >= 0.25 || Math.abs(used) >= 0.25);
        out.push(`  V8 heap spaces Δ after GC (committed / live, MB, whole case): ${sp.map(([k, size, used]) => `${k} ${size.toFixed(1)} / ${used.toFixed(1)}`).join(', ') || 'none ≥ 0.25 MB'}`);
        const mb = r.loaded.after.maps;
        const m0 = r.base.maps;
        if (mb && m0) out.push(`  resident by mapping Δ after GC (KB per listener): main malloc arena (brk) ${kb((mb.brk - m0.brk) / r.n)}, anonymous (V8 pages, other arenas, large mallocs) ${kb((mb.anon - m0.anon) / r.n)}, file ${kb((mb.file - m0.file) / r.n)}, other ${kb((mb.other - m0.other) / r.n)}`);
        if (mb?.list && m0?.list) out.push(`  anonymous mappings that grew most (start, size, resident Δ in KB per listener): ${anonGrowth(m0.list, mb.list, r.n)}`);
      }
    }
  }
  for (const f of failures) out.push(`FAILED ${f}`);
  process.stdout.write(out.join('\n') + '\n');
  try {
    mkdirSync(path.join(root, 'bench', '.out'), { recursive: true });
    writeFileSync(path.join(root, 'bench', '.out', 'listener-memory.json'), JSON.stringify({ n: N, warm: WARM, results, failures }, null, 2) + '\n');
  } catch {
    /* printing is what matters */
  }
}

if (process.argv[2] === '--client') await clientMain(JSON.parse(process.argv[3] ?? '{}') as ClientConfig);
else {
  await main();
  process.exit(0);
}
