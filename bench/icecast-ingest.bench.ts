/**
 * Icecast source ingest vs RTMP ingest, Skylark, same run: CPU per Icecast source against CPU per
 * RTMP publisher (docs/benchmarks.md "Icecast source ingest vs RTMP ingest").
 *
 * One Skylark process (the CLI, ABR ladder off: the passthrough path of both ingests). For each N
 * (50, 200 by default): N fresh AAC streams publish the SAME 128 kbit/s AAC frames
 * (test/fixtures/aac/sine48k_stereo_128k.flv) from one light replayer process — once over RTMP
 * (bench/lib/rtmp-replayer.ts: FLV audio tags in chunk streams) and once as Icecast sources
 * (bench/lib/icecast-replayer.ts: `PUT /live/<id>`, the frames as ADTS, unchunked) — one after
 * the other, the order alternating per N. Warm-up, then Skylark's CPU (all threads + children)
 * over W windows, the median; then every stream's HLS is checked. Both paths end in the same
 * segmenter, so the difference is the ingest's own cost: the RTMP chunk parser and AMF0 against
 * the HTTP head, the ADTS framer and a frame timestamp made from the sample count.
 *
 * Settings (environment): BENCH_ICECAST_INGEST_N ("50,200"), BENCH_INGEST_WARMUP_SECONDS (8),
 * BENCH_INGEST_WINDOW_SECONDS (10), BENCH_INGEST_WINDOWS (3), BENCH_INGEST_TICK_MS (10).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { stop } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { readFlvAudio } from './lib/rtmp-replayer.js';
import { createStream, skylarkIcecastTarget, skylarkTarget } from './lib/ingest-servers.js';
import { envNum, f1, median, runPhase, type Phase, type Server } from './lib/ingest-phase.js';
import { mapLimit, skylarkHlsOk } from './lib/ingest-hls.js';

const root = path.resolve(import.meta.dirname, '..');
const FLV = path.join(root, 'test', 'fixtures', 'aac', 'sine48k_stereo_128k.flv');
const log = (msg: string) => process.stderr.write(`[icecast-ingest] ${msg}\n`);

export async function run(): Promise<BenchRow[]> {
  const nList = (process.env.BENCH_ICECAST_INGEST_N || '50,200').split(',').map((s) => Math.round(Number(s.trim()))).filter((x) => x > 0);
  const warmup = envNum('BENCH_INGEST_WARMUP_SECONDS', 8);
  const windowS = envNum('BENCH_INGEST_WINDOW_SECONDS', 10) || 10;
  const windows = Math.max(1, Math.round(envNum('BENCH_INGEST_WINDOWS', 3)));
  const tickMs = envNum('BENCH_INGEST_TICK_MS', 10) || 10;
  const media = readFlvAudio(FLV);
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-icecast-ingest-'));
  const children: ChildProcess[] = [];
  const notes: string[] = [];
  try {
    const dataDir = path.join(work, 'data');
    const max = String(Math.max(...nList) * 2 + 10);
    const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0', SKYLARK_ICECAST_MAX_CONNECTIONS: max, SKYLARK_ICECAST_MAX_CONNECTIONS_PER_IP: max });
    children.push(sky.child);
    const secretKey = await createAccount(dataDir, sky.defaultSecretKey);
    log(`skylark pid ${sky.child.pid} at ${sky.http}, rtmp ${sky.rtmp}`);
    const server = (protocol: 'rtmp' | 'icecast'): Server => ({
      who: protocol,
      pid: sky.child.pid!,
      async prepare(n, label) {
        const streams = await mapLimit(Array.from({ length: n }), 8, (_, i) => createStream(sky.http, secretKey, `bench ${label} #${i + 1}`, 5));
        return {
          protocol,
          targets: protocol === 'icecast' ? streams.map(skylarkIcecastTarget) : streams.map(skylarkTarget),
          hls: (i) => skylarkHlsOk(streams[i]!.hlsUrl),
        };
      },
    });
    const phases: Phase[] = [];
    for (const [k, n] of nList.entries()) {
      const order: Array<'rtmp' | 'icecast'> = k % 2 === 0 ? ['icecast', 'rtmp'] : ['rtmp', 'icecast'];
      for (const protocol of order) {
        try {
          phases.push(await runPhase(server(protocol), n, { workDir: work, flv: FLV, log, warmup, windowS, windows, tickMs }));
        } catch (e) {
          notes.push(`${protocol} N=${n} failed: ${(e as Error).message}`);
          log(`${protocol} N=${n} FAILED: ${(e as Error).message}`);
        }
      }
    }

    const rows: BenchRow[] = [];
    const group = `Icecast source ingest vs RTMP ingest (Skylark, same ${media.kbps.toFixed(0)} kbit/s AAC frames, ladder off), median of ${windows} × ${windowS} s after ${warmup} s`;
    const get = (p: string, n: number) => phases.find((x) => x.who === p && x.n === n);
    const cpu = (p: Phase | undefined) => (p ? median(p.windows.map((w) => w.server)) : NaN);
    const status = (p: Phase | undefined, who: string) =>
      p ? `${who} ${p.published}/${p.n} published, ${p.hlsOk}/${p.n} HLS OK${p.dropped ? `, ${p.dropped} dropped (${p.dropReasons[0]})` : ''}${p.failed.length ? ` (failed: ${p.failed[0]})` : ''}` : `${who} –`;
    const ns = [...new Set(phases.map((p) => p.n))].sort((a, b) => a - b);
    for (const n of ns) {
      const ice = get('icecast', n);
      const rtmp = get('rtmp', n);
      const each = (p: Phase | undefined) => (p ? p.windows.map((w) => f1(w.server)).join('/') : '–');
      const peer = (v: number) => (Number.isFinite(v) ? { peer: { name: 'RTMP ingest', value: v } } : {});
      rows.push({ group, name: `N=${n}: Skylark CPU, Icecast sources`, value: cpu(ice), unit: '% core', ...peer(cpu(rtmp)), note: `each window: icecast ${each(ice)}, rtmp ${each(rtmp)}` });
      rows.push({ group, name: `N=${n}: CPU per Icecast source`, value: cpu(ice) / n, unit: '% core', ...peer(cpu(rtmp) / n), note: `${status(ice, 'icecast')}; ${status(rtmp, 'rtmp')}` });
      rows.push({
        group,
        name: `N=${n}: connect → accepted, median`,
        value: ice?.publishMs ?? NaN,
        unit: 'ms',
        ...peer(rtmp?.publishMs ?? NaN),
        note: 'Icecast: TCP connect → 200 OK; RTMP: TCP connect → NetStream.Publish.Start',
      });
    }
    if (ns.length >= 2) {
      const [a, b] = [ns[ns.length - 2]!, ns[ns.length - 1]!];
      const m = (p: string) => (cpu(get(p, b)) - cpu(get(p, a))) / (b - a);
      rows.push({ group, name: `marginal CPU per source, N=${a}→${b}`, value: m('icecast'), unit: '% core', ...(Number.isFinite(m('rtmp')) ? { peer: { name: 'RTMP ingest', value: m('rtmp') } } : {}), note: '(CPU at N2 − CPU at N1) / (N2 − N1)' });
    }
    if (notes.length) rows.push({ group, name: 'notes', value: NaN, unit: '', note: notes.join('; ') });
    return rows;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 5000);
    rmSync(work, { recursive: true, force: true });
  }
}
