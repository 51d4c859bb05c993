/**
 * A native send path for HLS segments, prototyped and measured against nginx: what answering a
 * segment GET costs per server CPU-second when the response is written in one of four ways, by a
 * small epoll server in C++ (`bench/native/segment_send_proto.cc`, built here with `g++ -O2` into
 * bench/.out) serving the bytes of a real segment:
 *
 *   two-sends  headers (MSG_MORE), then the body: what the HTTP library does for a segment (baseline)
 *   writev     headers and body in one gathered write
 *   sendfile   headers (MSG_MORE), then sendfile(2) of the body from a tmpfs file, as nginx does
 *   zerocopy   one gathered write with MSG_ZEROCOPY (on loopback the kernel copies anyway)
 *
 * The segment is a real one: a Skylark CLI process, a real account and stream, an FFmpeg AAC
 * publish until the playlist lists 3 segments (`prepareRound` of bench/http-segments.ts); its
 * newest full segment's bytes are what nginx (bench/peers/nginx-static.conf.tmpl, 1 worker) and
 * every prototype serve. Skylark itself is measured in the same rounds (a fresh stream each round,
 * so it stays inside its reconnect window) as the reference the baseline should match.
 *
 * wrk -t1 at 100 and 1000 connections, servers in a rotating order each round, every URL checked
 * (200, same bytes) before and after every run; server CPU from /proc (utime+stime, nginx master +
 * worker). Each row is the median of the rounds. Each prototype counts its system calls (SIGUSR1
 * prints its counters), so the rows also give socket calls per response.
 *
 * Settings (environment), as bench/http-segments.ts: BENCH_HTTP_SECONDS (8 here),
 * BENCH_HTTP_ROUNDS (3), BENCH_HTTP_CONNS ("100,1000"), BENCH_HTTP_WARMUP_SECONDS (2),
 * BENCH_HTTP_THREADS (1); BENCH_SEND_SKYLARK (1: Skylark rows too; 0: nginx and the prototype only).
 *
 * `node --import tsx bench/segment-send.bench.ts` prints the rows as JSON; `npm run bench -- segment-send`
 * prints the table.
 */
import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import type { BenchRow } from './lib/report.js';
import { have, sleep, spawnWithFds, stop } from './lib/proc.js';
import { runWrk, socketErrorCount } from './lib/wrk.js';
import { rawResponseSize } from './lib/http-check.js';
import { createAccount, envNum, errorsOf, measure, median, prepareRound, startNginx, startSkylark, type Measured } from './http-segments.js';

/** Allowed time for the whole part (3 publishes, 6 servers × 2 connection counts × 3 rounds). */
export const timeoutMs = 30 * 60_000;

const root = path.resolve(import.meta.dirname, '..');
const SOURCE = path.join(root, 'bench', 'native', 'segment_send_proto.cc');
const BINARY = path.join(root, 'bench', '.out', 'segment_send_proto');
const MODES = ['two-sends', 'writev', 'sendfile', 'zerocopy'] as const;
type Mode = (typeof MODES)[number];
type Who = 'nginx' | 'skylark' | Mode;
const log = (msg: string) => process.stderr.write(`[segment-send] ${msg}\n`);

/** The prototype's counters (SIGUSR1), as it prints them. */
interface Counters {
  responses: number;
  recv: number;
  send: number;
  sendmsg: number;
  sendfile: number;
  errqueue: number;
  epollWait: number;
  epollCtl: number;
  eagain: number;
  partialWrites: number;
  zcNotified: number;
  zcCopied: number;
  zcNobufs: number;
}

/** A running prototype: its process, URL, and a way to read its counters. */
interface Proto {
  mode: Mode;
  child: ChildProcess;
  url: string;
  counters: () => Promise<Counters>;
}

/** One wrk run, with the counters' difference for a prototype and the box's load average. */
interface Run {
  m: Measured;
  counters: Counters | null;
  load1: number;
}

export async function run(): Promise<BenchRow[]> {
  const seconds = envNum('BENCH_HTTP_SECONDS', 8);
  const rounds = Math.max(1, Math.round(envNum('BENCH_HTTP_ROUNDS', 3)));
  const warmup = envNum('BENCH_HTTP_WARMUP_SECONDS', 2);
  const threads = Math.max(1, Math.round(envNum('BENCH_HTTP_THREADS', 1)));
  const withSkylark = (process.env.BENCH_SEND_SKYLARK ?? '1') !== '0';
  const connsList = (process.env.BENCH_HTTP_CONNS || '100,1000').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);
  const group = `Segment send paths: native prototype vs nginx, wrk -t${threads} ${seconds} s${rounds > 1 ? `, median of ${rounds}` : ''}`;

  if (!have('g++')) return [{ group, name: 'notes', value: NaN, unit: '', note: 'g++ is not installed (apt-get install -y g++): the prototype was not built, no rows' }];
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  if (!have('ffmpeg')) throw new Error('ffmpeg is not on PATH: apt-get install -y ffmpeg');
  if (!have('nginx') && !existsSync('/usr/sbin/nginx')) throw new Error('nginx is not installed (apt-get install -y nginx): the peer of every row');
  build();

  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-send-'));
  const children: ChildProcess[] = [];
  try {
    const sky = await startSkylark(path.join(work, 'data'));
    children.push(sky.child);
    const secretKey = await createAccount(path.join(work, 'data'), sky.defaultSecretKey);
    const nginxDir = path.join(work, 'nginx');
    const nginx = await startNginx(nginxDir);
    children.push(nginx.child);
    log(`skylark pid ${sky.child.pid} at ${sky.http}; nginx pid ${nginx.child.pid} at ${nginx.base}`);

    // The real segment (round 1's stream): nginx got a copy from prepareRound; the prototypes read it from a file.
    const first = segmentOf(await prepareRound(sky.http, secretKey, { base: nginx.base, dir: nginxDir }, 0));
    const bodyFile = path.join(work, 'segment.m4s');
    writeFileSync(bodyFile, first.bytes);
    const protos: Proto[] = [];
    for (const mode of MODES) {
      const p = await startProto(mode, bodyFile);
      children.push(p.child);
      protos.push(p);
    }
    const heads = await headSizes({ skylark: first.skylark, nginx: first.nginx!, prototype: protos[0]!.url });

    const whos: Who[] = ['nginx', ...(withSkylark ? (['skylark'] as const) : []), ...MODES];
    const results = new Map<string, Run[]>();
    for (let r = 0; r < rounds; r++) {
      // Skylark serves its own round's stream (a fresh one: inside its 300 s reconnect window).
      const skyTarget = r === 0 ? first : withSkylark ? segmentOf(await prepareRound(sky.http, secretKey, null, r)) : first;
      const urlOf = (who: Who) => (who === 'nginx' ? first.nginx! : who === 'skylark' ? skyTarget.skylark : protos.find((p) => p.mode === who)!.url);
      const pidOf = (who: Who) => (who === 'nginx' ? nginx.child.pid! : who === 'skylark' ? sky.child.pid! : protos.find((p) => p.mode === who)!.child.pid!);
      if (r === 0 && warmup > 0) {
        for (const who of whos) await runWrk(urlOf(who), { threads, connections: 100, seconds: warmup }).catch(() => {});
      }
      // A different server goes first each round.
      const order = whos.map((_, i) => whos[(i + r) % whos.length]!);
      for (const conns of connsList) {
        for (const who of order) {
          const proto = protos.find((p) => p.mode === who);
          const before = proto ? await proto.counters() : null;
          const load1 = loadavg()[0]!;
          const m = await measure(urlOf(who), pidOf(who), who === 'skylark' ? skyTarget.bytes : first.bytes, { threads, connections: conns, seconds });
          const after = proto ? await proto.counters() : null;
          const counters = before && after ? diff(after, before) : null;
          const key = `${who}|${conns}`;
          results.set(key, [...(results.get(key) ?? []), { m, counters, load1 }]);
          log(
            `round ${r + 1}/${rounds} c=${conns} ${who}: ${Math.round(m.wrk.reqPerSec)} req/s, server CPU ${m.serverCpu.toFixed(0)} %, ` +
              `${Math.round(perCpu(m))} req/CPU-s, wrk CPU ${m.wrk.wrkCpuPercent?.toFixed(0) ?? '?'} %, box ${m.boxCpu.toFixed(0)} %, load ${load1.toFixed(2)}` +
              (counters ? `, ${callsPerResponse(counters).toFixed(2)} socket calls/response` : '') +
              (m.wrk.non2xx3xx ? `, NON-2xx/3xx ${m.wrk.non2xx3xx}` : '') +
              (socketErrorCount(m.wrk) ? `, socket errors ${JSON.stringify(m.wrk.socketErrors)}` : '') +
              (m.invalid.length ? `, INVALID: ${m.invalid.join('; ')}` : ''),
          );
          await sleep(1000);
        }
      }
    }
    return toRows(group, results, whos, connsList, rounds, heads, first.bytes.byteLength);
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}

/** `g++ -O2` of the prototype into bench/.out (about a second). */
function build(): void {
  mkdirSync(path.dirname(BINARY), { recursive: true });
  execFileSync('g++', ['-O2', '-std=c++17', '-Wall', '-Wextra', '-o', BINARY, SOURCE], { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The segment target of a round (prepareRound gives the segment and the playlist). */
function segmentOf(targets: Awaited<ReturnType<typeof prepareRound>>) {
  const t = targets.find((x) => x.kind === 'segment');
  if (!t) throw new Error('prepareRound gave no segment target');
  return t;
}

/** Starts the prototype in `mode` serving the bytes of `bodyFile`; waits for its port line. */
async function startProto(mode: Mode, bodyFile: string): Promise<Proto> {
  const child = spawnWithFds([BINARY, mode, bodyFile, existsSync('/dev/shm') ? '/dev/shm' : tmpdir()]);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines: string[] = [];
  const waiters: Array<(line: string) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const w = waiters.shift();
    if (w) w(line);
    else lines.push(line);
  });
  const nextLine = (what: string) =>
    new Promise<string>((resolve, reject) => {
      const ready = lines.shift();
      if (ready !== undefined) return resolve(ready);
      const waiter = (line: string) => {
        clearTimeout(timer);
        resolve(line);
      };
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        reject(new Error(`prototype ${mode} printed no ${what} in 5 s${child.exitCode !== null ? ` (exited with ${child.exitCode}: ${stderr.trim()})` : ''}`));
      }, 5000);
      waiters.push(waiter);
    });
  const port = Number(await nextLine('port line'));
  if (!(port > 0)) throw new Error(`prototype ${mode}: no port (${stderr.trim()})`);
  const counters = async () => {
    const line = nextLine('counters');
    child.kill('SIGUSR1');
    return JSON.parse(await line) as Counters;
  };
  return { mode, child, url: `http://127.0.0.1:${port}/seg-0.m4s`, counters };
}

/** Header bytes of each server's segment response, as wrk reads it. */
async function headSizes(urls: Record<string, string>): Promise<string> {
  const out: string[] = [];
  for (const [who, url] of Object.entries(urls)) {
    const r = await rawResponseSize(url);
    log(`${who} response head (${r.headerBytes} B):\n${r.head}`);
    out.push(`${who} ${r.headerBytes} B`);
  }
  return out.join(', ');
}

const diff = (a: Counters, b: Counters): Counters => {
  const out = { ...a };
  for (const k of Object.keys(out) as Array<keyof Counters>) out[k] = a[k] - b[k];
  return out;
};

/** System calls on connections per response: reads, writes, error-queue reads (not epoll_wait, shared by many connections). */
const callsPerResponse = (c: Counters) => (c.responses > 0 ? (c.recv + c.send + c.sendmsg + c.sendfile + c.errqueue) / c.responses : NaN);

const perCpu = (m: Measured) => (m.serverCpu > 0 ? m.wrk.reqPerSec / (m.serverCpu / 100) : NaN);

function toRows(group: string, results: Map<string, Run[]>, whos: Who[], connsList: number[], rounds: number, heads: string, bodyBytes: number): BenchRow[] {
  const rows: BenchRow[] = [];
  const each = (runs: Run[], f: (r: Run) => number) => runs.map((r) => Math.round(f(r) / 100) / 10 + 'k').join('/');
  for (const conns of connsList) {
    const peerRuns = results.get(`nginx|${conns}`) ?? [];
    const peer = (f: (m: Measured) => number) => ({ name: 'nginx', value: median(peerRuns.map((r) => f(r.m))) });
    for (const who of whos) {
      if (who === 'nginx') continue;
      const runs = results.get(`${who}|${conns}`) ?? [];
      if (!runs.length) continue;
      const label = who === 'skylark' ? 'Skylark' : `prototype ${who}`;
      rows.push({
        group,
        name: `segment ${conns} conns, ${label}: req per server CPU-second`,
        value: median(runs.map((r) => perCpu(r.m))),
        unit: 'req/CPU-s',
        peer: peer(perCpu),
        note:
          `server CPU ${Math.round(median(runs.map((r) => r.m.serverCpu)))} % (nginx ${Math.round(median(peerRuns.map((r) => r.m.serverCpu)))} %)` +
          (rounds > 1 ? `; each run ${each(runs, (r) => perCpu(r.m))}, nginx ${each(peerRuns, (r) => perCpu(r.m))}` : '') +
          `; ${errorsOf(runs.map((r) => r.m))}`,
      });
      rows.push({ group, name: `segment ${conns} conns, ${label}: req/s`, value: median(runs.map((r) => r.m.wrk.reqPerSec)), unit: 'req/s', peer: peer((m) => m.wrk.reqPerSec) });
      const counted = runs.map((r) => r.counters).filter((c): c is Counters => c !== null);
      if (counted.length) {
        const sum = counted.reduce((a, c) => {
          const out = { ...a };
          for (const k of Object.keys(out) as Array<keyof Counters>) out[k] = a[k] + c[k];
          return out;
        });
        const per = (n: number) => (n / sum.responses).toFixed(2);
        rows.push({
          group,
          name: `segment ${conns} conns, ${label}: socket calls per response`,
          value: median(counted.map(callsPerResponse)),
          unit: 'calls',
          note:
            `recv ${per(sum.recv)}, send ${per(sum.send)}, sendmsg ${per(sum.sendmsg)}, sendfile ${per(sum.sendfile)}, error queue ${per(sum.errqueue)}; ` +
            `epoll_wait ${per(sum.epollWait)}, partial writes ${per(sum.partialWrites)}` +
            (who === 'zerocopy' ? `; zerocopy sends completed ${sum.zcNotified}, of them copied by the kernel ${sum.zcCopied}, ENOBUFS ${sum.zcNobufs}` : ''),
        });
      }
    }
  }
  const all = [...results.values()].flat();
  const loads = all.map((r) => r.load1);
  const other = all.map((r) => r.m.boxCpu - r.m.serverCpu - (r.m.wrk.wrkCpuPercent ?? NaN)).filter(Number.isFinite);
  rows.push({
    group,
    name: 'notes',
    value: NaN,
    unit: '',
    note:
      `segment body ${bodyBytes} B; response headers ${heads}; ` +
      `box load average (1 min) at the runs' starts ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}; ` +
      `other load on the box (box CPU − server − wrk) median ${Math.round(median(other))} % of a core`,
  });
  return rows;
}

// `node --import tsx bench/segment-send.bench.ts`: the rows as JSON.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await run();
  process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
  process.exit(0);
}
