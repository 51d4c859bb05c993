/**
 * RTMP ingest + HLS remux, Skylark vs nginx-rtmp in the same run (docs/bench/method.md "The peers
 * measured alone" says how nginx-rtmp was measured alone; docs/bench/method.md "RTMP ingest → HLS
 * vs nginx-rtmp" says what each row means).
 *
 * 1. Skylark as its own process (`node bin/skylark.js serve`, temp data dir, log level warn), a
 *    paid account from `skylark accounts create --json`; nginx + nginx-rtmp from
 *    bench/peers/nginx-rtmp.conf.tmpl (1 worker, `hls on; hls_fragment 2s`). Both on loopback.
 * 2. For each N (1, 50, 200): N AAC 128 kbit/s publishers from ONE light replayer process
 *    (bench/lib/rtmp-replayer.ts: a recorded FLV replayed in real time, one timer for all), to
 *    Skylark (N fresh streams, `POST /v2/streams`, reconnectWindow 5) and to nginx-rtmp, one
 *    server after the other (the order alternates per N). Warm-up, then the server's CPU (utime +
 *    stime of all threads, plus its child processes) over W windows; the row is the median. Then
 *    every stream's HLS is checked (playlist lists a segment, the segment answers 200).
 * 3. Publish → first playable segment, T trials per server with the same replayer in this process
 *    (the clock starts at the TCP connect), and → first LL-HLS part once playlists carry parts.
 *
 * Settings (environment): BENCH_INGEST_N ("1,50,200"), BENCH_INGEST_WARMUP_SECONDS (8),
 * BENCH_INGEST_WINDOW_SECONDS (10), BENCH_INGEST_WINDOWS (3; N=1 uses one window of 6 × the
 * window seconds instead: its CPU is near the 100 Hz tick resolution), BENCH_INGEST_TRIALS (5), BENCH_INGEST_TICK_MS (10),
 * SKYLARK_BENCH_CPU_PROF (a directory: Skylark runs with `node --cpu-prof`, see http-segments.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { CLK_TCK, sleep, stop } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { ReplayPool, readFlvAudio, type PublishTarget } from './lib/rtmp-replayer.js';
import { createStream, nginxRtmpMissing, skylarkTarget, startNginxRtmp, type SkylarkStream } from './lib/ingest-servers.js';
import { envNum, f1, median, runPhase, ticksOf, type Phase, type Server, type Window } from './lib/ingest-phase.js';
import { mapLimit, nginxHlsOk, pollFirstPlayable, skylarkHlsOk, type FirstPlayable } from './lib/ingest-hls.js';

const root = path.resolve(import.meta.dirname, '..');
const FLV = path.join(root, 'test', 'fixtures', 'aac', 'sine48k_stereo_128k.flv');
const log = (msg: string) => process.stderr.write(`[ingest] ${msg}\n`);

type Who = 'skylark' | 'nginx';

export async function run(): Promise<BenchRow[]> {
  const nList = (process.env.BENCH_INGEST_N || '1,50,200').split(',').map((s) => Math.round(Number(s.trim()))).filter((x) => x > 0);
  const warmup = envNum('BENCH_INGEST_WARMUP_SECONDS', 8);
  const windowS = envNum('BENCH_INGEST_WINDOW_SECONDS', 10) || 10;
  const windows = Math.max(1, Math.round(envNum('BENCH_INGEST_WINDOWS', 3)));
  const trials = Math.round(envNum('BENCH_INGEST_TRIALS', 5));
  const tickMs = envNum('BENCH_INGEST_TICK_MS', 10) || 10;
  const media = readFlvAudio(FLV);
  const t00 = performance.now();

  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-ingest-'));
  const children: ChildProcess[] = [];
  const notes: string[] = [];
  try {
    const dataDir = path.join(work, 'data');
    // The passthrough path against nginx-rtmp (which does no transcoding): the ABR ladder is off
    // here; its FFmpeg cost is measured on its own below.
    const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0' });
    children.push(sky.child);
    const secretKey = await createAccount(dataDir, sky.defaultSecretKey);
    log(`skylark pid ${sky.child.pid} at ${sky.http}, rtmp ${sky.rtmp}`);
    const streamsOf = new Map<string, SkylarkStream[]>();
    const skylark: Server = {
      who: 'skylark',
      pid: sky.child.pid!,
      async prepare(n, label) {
        const streams = await mapLimit(Array.from({ length: n }), 8, (_, i) => createStream(sky.http, secretKey, `bench ${label} #${i + 1}`, 5));
        streamsOf.set(label, streams);
        return { targets: streams.map(skylarkTarget), hls: (i) => skylarkHlsOk(streams[i]!.hlsUrl) };
      },
    };

    let nginx: Server | null = null;
    let nginxBase = '';
    let nginxRtmpPort = 0;
    const missing = nginxRtmpMissing();
    if (missing) {
      notes.push(missing);
      log(`${missing}: Skylark rows only`);
    } else {
      try {
        const n = await startNginxRtmp(path.join(work, 'nginx'));
        children.push(n.child);
        nginxBase = n.base;
        nginxRtmpPort = n.rtmpPort;
        log(`nginx-rtmp pid ${n.child.pid}: rtmp 127.0.0.1:${n.rtmpPort}, http ${n.base}`);
        nginx = {
          who: 'nginx',
          pid: n.child.pid!,
          async prepare(count, label) {
            const names = Array.from({ length: count }, (_, i) => `${label}-${i + 1}`);
            return {
              targets: names.map((name) => ({ host: '127.0.0.1', port: n.rtmpPort, app: 'live', name })),
              hls: (i) => nginxHlsOk(`${n.base}/hls/${names[i]!}.m3u8`),
            };
          },
        };
      } catch (e) {
        notes.push(`nginx-rtmp failed to start: ${(e as Error).message}`);
        log(`nginx-rtmp failed to start: ${(e as Error).message}`);
      }
    }

    // ── idle: both servers, same 3 s window ─────────────────────────────────────────────────
    const idle = await (async () => {
      const t0 = performance.now();
      const a0 = ticksOf(skylark.pid);
      const n0 = nginx ? ticksOf(nginx.pid) : null;
      await sleep(3000);
      const secs = (performance.now() - t0) / 1000;
      const a1 = ticksOf(skylark.pid);
      const n1 = nginx ? ticksOf(nginx.pid) : null;
      const pct = (t: number) => (t / CLK_TCK / secs) * 100;
      return { skylark: pct(a1.self + a1.children - a0.self - a0.children), nginx: n0 && n1 ? pct(n1.self + n1.children - n0.self - n0.children) : NaN };
    })();

    // ── load phases ─────────────────────────────────────────────────────────────────────────
    const phases: Phase[] = [];
    for (const [k, n] of nList.entries()) {
      const order = (k % 2 === 0 ? [skylark, nginx] : [nginx, skylark]).filter((s): s is Server => s !== null);
      for (const server of order) {
        try {
          // N=1 spends ~0.2 % of a core: one window 6× as long (60 s by default) instead of W
          // windows, so a 100 Hz clock tick is 0.017 % of the result rather than 0.1 %.
          phases.push(await runPhase(server, n, { workDir: work, flv: FLV, log, warmup, windowS: n === 1 ? windowS * 6 : windowS, windows: n === 1 ? 1 : windows, tickMs }));
        } catch (e) {
          notes.push(`${server.who} N=${n} failed: ${(e as Error).message}`);
          log(`${server.who} N=${n} FAILED: ${(e as Error).message}`);
        }
      }
    }

    // ── publish → first playable segment ────────────────────────────────────────────────────
    const timing: Record<Who, Array<FirstPlayable & { publishMs: number }>> = { skylark: [], nginx: [] };
    if (trials > 0) {
      const pool = new ReplayPool(media, tickMs);
      for (let t = 0; t < trials; t++) {
        const order: Who[] = t % 2 === 0 ? ['skylark', 'nginx'] : ['nginx', 'skylark'];
        for (const who of order) {
          if (who === 'nginx' && !nginx) continue;
          try {
            let target: PublishTarget;
            let entry: string;
            if (who === 'skylark') {
              const s = await createStream(sky.http, secretKey, `bench first-segment #${t + 1}`, 5);
              target = skylarkTarget(s);
              entry = s.hlsUrl;
            } else {
              const name = `first-${t + 1}`;
              target = { host: '127.0.0.1', port: nginxRtmpPort, app: 'live', name };
              entry = `${nginxBase}/hls/${name}.m3u8`;
            }
            const t0 = performance.now();
            const { publisher, started } = pool.publish(target);
            const [times, r] = await Promise.all([started, pollFirstPlayable(entry, who === 'skylark' ? 'multivariant' : 'media', t0, 10_000, 10)]);
            publisher.close();
            timing[who].push({ ...r, publishMs: times.publishAt - t0 });
            log(
              `first segment ${who} #${t + 1}: publish accepted ${f1(times.publishAt - t0)} ms, playlist ${f1(r.playlistMs ?? NaN)} ms, ` +
                `segment 200 ${f1(r.segmentMs ?? NaN)} ms, first part ${r.firstPartMs === null ? 'none' : f1(r.firstPartMs) + ' ms'} (${r.polls} polls)`,
            );
          } catch (e) {
            notes.push(`first-segment trial ${who} #${t + 1} failed: ${(e as Error).message}`);
            log(`first-segment trial ${who} #${t + 1} FAILED: ${(e as Error).message}`);
          }
          await sleep(300);
        }
      }
      pool.close();
    }
    log(`done in ${((performance.now() - t00) / 1000).toFixed(0)} s`);
    const rows = toRows(phases, timing, idle, { warmup, windowS, windows, tickMs, media: `${media.kbps.toFixed(0)} kbit/s AAC, ${media.sampleRate} Hz ${media.channels} ch` }, notes);

    // ── the ABR ladder's own cost: a second Skylark with the ladder on (medium: 128 passthrough
    //    + 64 kbps encoded by one FFmpeg codec process per stream) ─────────────────────────────
    const ladderN = Math.round(envNum('BENCH_INGEST_LADDER_N', 10));
    if (ladderN > 0) {
      try {
        const dir2 = path.join(work, 'data-ladder');
        const sky2 = await startSkylark(dir2);
        children.push(sky2.child);
        const key2 = await createAccount(dir2, sky2.defaultSecretKey);
        const server2: Server = {
          who: 'skylark',
          pid: sky2.child.pid!,
          async prepare(n, label) {
            const streams = await mapLimit(Array.from({ length: n }), 8, (_, i) => createStream(sky2.http, key2, `bench ${label} #${i + 1}`, 5));
            return { targets: streams.map(skylarkTarget), hls: (i) => skylarkHlsOk(streams[i]!.hlsUrl) };
          },
        };
        const p = await runPhase(server2, ladderN, { workDir: work, flv: FLV, log, warmup, windowS, windows: 1, tickMs });
        const w = p.windows[0];
        const group = 'ABR ladder cost (Skylark, ladder on: 128 passthrough + 64 encoded per stream)';
        if (w) {
          rows.push({ group, name: `N=${ladderN}: server CPU incl. FFmpeg codec processes`, value: w.server, unit: '% core', note: `${p.hlsOk}/${ladderN} HLS OK` });
          rows.push({ group, name: `N=${ladderN}: FFmpeg codec processes per stream`, value: w.children / ladderN, unit: '% core', note: 'the ladder; the passthrough path is the rows above' });
          rows.push({ group, name: `N=${ladderN}: Skylark itself per stream (ladder on)`, value: (w.server - w.children) / ladderN, unit: '% core' });
        }
        await stop(sky2.child, 'SIGTERM', 5000);
      } catch (e) {
        notes.push(`ladder phase failed: ${(e as Error).message}`);
      }
    }
    return rows;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}

function toRows(
  phases: Phase[],
  timing: Record<Who, Array<FirstPlayable & { publishMs: number }>>,
  idle: { skylark: number; nginx: number },
  o: { warmup: number; windowS: number; windows: number; tickMs: number; media: string },
  notes: string[],
): BenchRow[] {
  const rows: BenchRow[] = [];
  const group = `RTMP ingest → HLS: Skylark vs nginx-rtmp (1 worker, hls_fragment 2s), light replayer, median of ${o.windows} × ${o.windowS} s after ${o.warmup} s`;
  const get = (who: Who, n: number) => phases.find((p) => p.who === who && p.n === n);
  const med = (p: Phase | undefined, f: (w: Window) => number) => (p ? median(p.windows.map(f)) : NaN);
  const withPeer = (row: BenchRow, peer: number | undefined) => {
    if (peer !== undefined && Number.isFinite(peer)) row.peer = { name: 'nginx-rtmp', value: peer };
    return row;
  };
  rows.push(withPeer({ group, name: 'idle (no publisher): server CPU', value: idle.skylark, unit: '% core', note: '3 s, before any publish' }, idle.nginx));
  const ns = [...new Set(phases.map((p) => p.n))].sort((a, b) => a - b);
  for (const n of ns) {
    const s = get('skylark', n);
    const x = get('nginx', n);
    const each = (p: Phase | undefined) => (p ? p.windows.map((w) => f1(w.server)).join('/') : '–');
    const cpuS = med(s, (w) => w.server);
    const cpuX = med(x, (w) => w.server);
    const childS = med(s, (w) => w.children);
    rows.push(
      withPeer(
        {
          group,
          name: `N=${n}: server CPU`,
          value: cpuS,
          unit: '% core',
          note: `each window: skylark ${each(s)}, nginx ${each(x)}; skylark child processes ${f1(childS)} % (ladder FFmpeg; 0 = no ladder running)`,
        },
        cpuX,
      ),
    );
    rows.push(withPeer({ group, name: `N=${n}: CPU per stream`, value: cpuS / n, unit: '% core', note: n === 1 ? `one ${o.windowS * 6} s window: ±${(1 / (o.windowS * 6)).toFixed(3)} % tick resolution` : '' }, cpuX / n));
    rows.push(withPeer({ group, name: `N=${n}: CPU-seconds per stream per minute`, value: (cpuS / n / 100) * 60, unit: 'CPU-s/min' }, (cpuX / n / 100) * 60));
    const hlsNote = (p: Phase | undefined, who: string) =>
      p
        ? `${who} ${p.hlsOk}/${p.n} HLS OK, ${p.published}/${p.n} published${p.failed.length ? ` (failed: ${p.failed[0]})` : ''}${p.dropped ? `, ${p.dropped} dropped (${p.dropReasons[0]})` : ''}${p.hlsWhy.length ? ` (${p.hlsWhy.join('; ')})` : ''}`
        : `${who} –`;
    rows.push(withPeer({ group, name: `N=${n}: streams with working HLS`, value: s?.hlsOk ?? NaN, unit: 'streams', note: `${hlsNote(s, 'skylark')}; ${hlsNote(x, 'nginx')}` }, x?.hlsOk));
    rows.push(
      withPeer(
        {
          group,
          name: `N=${n}: replayer CPU (all N publishers)`,
          value: med(s, (w) => w.replayer),
          unit: '% core',
          note: `one process, ${o.tickMs} ms tick; max write lateness skylark ${f1(Math.max(...(s?.windows.map((w) => w.maxLateMs) ?? [NaN])))} ms, nginx ${f1(Math.max(...(x?.windows.map((w) => w.maxLateMs) ?? [NaN])))} ms`,
        },
        med(x, (w) => w.replayer),
      ),
    );
    rows.push(
      withPeer(
        { group, name: `N=${n}: other load on the box`, value: med(s, (w) => w.box - w.server - w.replayer), unit: '% core', note: 'whole box busy (of 200) − server − replayer: the neighbours' },
        med(x, (w) => w.box - w.server - w.replayer),
      ),
    );
  }
  // Marginal cost between the two largest N: the fixed cost (idle timers, GC) drops out.
  if (ns.length >= 2) {
    const [a, b] = [ns[ns.length - 2]!, ns[ns.length - 1]!];
    const m = (who: Who) => (med(get(who, b), (w) => w.server) - med(get(who, a), (w) => w.server)) / (b - a);
    rows.push(withPeer({ group, name: `marginal CPU per stream, N=${a}→${b}`, value: m('skylark'), unit: '% core', note: '(CPU at N2 − CPU at N1) / (N2 − N1)' }, m('nginx')));
  }
  // First playable segment.
  const tg = `Publish → first playable HLS: Skylark vs nginx-rtmp (2 s segments), light replayer in-process, clock from TCP connect, polls every 10 ms`;
  const secs = (xs: Array<number | null>) => xs.filter((x): x is number => x !== null).map((x) => x / 1000);
  const range = (xs: number[]) => (xs.length ? `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)} s` : '–');
  const sk = timing.skylark;
  const nx = timing.nginx;
  if (sk.length || nx.length) {
    const sSeg = secs(sk.map((r) => r.segmentMs));
    const nSeg = secs(nx.map((r) => r.segmentMs));
    rows.push(
      withPeer(
        {
          group: tg,
          name: `first playable segment, median of ${sk.length}`,
          value: median(sSeg),
          unit: 's',
          note: `target ≤ 2.3 s; range skylark ${range(sSeg)} (${sSeg.length}/${sk.length} found), nginx ${range(nSeg)} (${nSeg.length}/${nx.length})`,
        },
        nx.length ? median(nSeg) : undefined,
      ),
    );
    rows.push(
      withPeer(
        { group: tg, name: 'playlist lists the first segment, median', value: median(secs(sk.map((r) => r.playlistMs))), unit: 's', note: `range skylark ${range(secs(sk.map((r) => r.playlistMs)))}, nginx ${range(secs(nx.map((r) => r.playlistMs)))}` },
        nx.length ? median(secs(nx.map((r) => r.playlistMs))) : undefined,
      ),
    );
    rows.push(withPeer({ group: tg, name: 'connect → NetStream.Publish.Start, median', value: median(sk.map((r) => r.publishMs)), unit: 'ms', note: 'handshake + connect + createStream + publish' }, nx.length ? median(nx.map((r) => r.publishMs)) : undefined));
    const parts = secs(sk.map((r) => r.firstPartMs));
    rows.push({
      group: tg,
      name: 'first LL-HLS part (EXT-X-PART listed and fetched), median',
      value: median(parts),
      unit: 's',
      note: parts.length ? `target ≤ 1 s; range ${range(parts)} (${parts.length}/${sk.length})` : 'no EXT-X-PART in Skylark playlists yet (hook: bench/lib/ingest-hls.ts pollFirstPlayable reports it once parts exist); target ≤ 1 s',
    });
  }
  if (notes.length) rows.push({ group, name: 'notes', value: NaN, unit: '', note: notes.join('; ') });
  return rows;
}

// `npx tsx bench/ingest.bench.ts` prints this part's rows alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatReport, machineInfo } = await import('./lib/format.js');
  const started = new Date();
  const machine = machineInfo();
  const rows = await run();
  process.stdout.write('\n' + formatReport(rows, [], machine, started) + '\n');
  process.exit(0);
}
