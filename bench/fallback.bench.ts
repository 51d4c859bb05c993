/**
 * The stream fallback (docs/streams.md "Fallback"): what a stream on fallback costs, and how long a
 * listener hears nothing when the station switches between live audio and the fallback.
 *
 * One Skylark (the CLI, `node bin/skylark.js serve`), one `medium` AAC stream (ladder 128 + 64
 * kbps) whose fallback is one 60 s MP3 episode made by FFmpeg.
 * - CPU, same run, as % of one core from /proc over BENCH_FALLBACK_SECONDS (20) windows: the
 *   fallback FFmpeg (`ffmpeg -re …`) of the first run, which encodes the episode live while its
 *   cached rendition is built (docs/streams.md "Fallback"), and the server process itself; then,
 *   once a run plays the cached rendition (paced in the server: no fallback FFmpeg runs), the
 *   server process and the ladder process (the lower layer); then the same stream published live
 *   by FFmpeg (RTMP, AAC 128k): the ladder process alone. The requirement's yardstick is one ladder
 *   layer: the live ladder encodes one layer (64 kbps) here, so the live ladder process is that
 *   figure. The pacer's own cost is too small for the server's /proc ticks (10 ms): it is measured
 *   apart, BENCH_FALLBACK_PACERS (20) pacers on the cached rendition in the bench process, per stream.
 * - The one-off build of a rendition: the same FFmpeg command the cache runs
 *   (`renditionBuildArgs`), timed by the shell (`times`: user + system CPU of the child), as
 *   CPU-seconds per minute of audio; median of 3.
 * - Switches, from the first listener's point of view: a `/listen` client reads the stream the
 *   whole time and stamps every chunk it receives; the longest gap between two chunks around a
 *   switch is the silence the listener lived through: publisher killed (live → fallback) and
 *   publisher back (fallback → live). A `/listen` chunk is one segment, so chunks normally come
 *   once per segment duration: the peer column is that interval measured on air, and a gap near
 *   it means the listener lost nothing. Median of BENCH_FALLBACK_ROUNDS (3) rounds;
 *   BENCH_FALLBACK_STAMPS=1 prints the chunk times around each switch.
 */
import { execFileSync } from 'node:child_process';
import { renditionBuildArgs } from '../src/live/ingest/fallback-cache.js';
import { paceRendition } from '../src/live/ingest/rendition-pacer.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { CLK_TCK, childPids, have, processTicks, sleep, spawnWithFds, stop } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';

const GROUP = "Stream fallback: CPU per stream, and the gaps a /listen listener sees at a switch";
const log = (msg: string) => process.stderr.write(`[fallback] ${msg}\n`);
const SECONDS = Number(process.env.BENCH_FALLBACK_SECONDS || 20);
const ROUNDS = Number(process.env.BENCH_FALLBACK_ROUNDS || 3);

/** The server's FFmpeg children, by role (from their command lines). */
function ffmpegChildren(serverPid: number): { fallback: number[]; ladder: number[] } {
  const out = { fallback: [] as number[], ladder: [] as number[] };
  for (const pid of childPids(serverPid)) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      continue;
    }
    if (!/ffmpeg/.test(cmd)) continue;
    if (cmd.includes(' -re ')) out.fallback.push(pid);
    else if (cmd.includes('pipe:0')) out.ladder.push(pid);
  }
  return out;
}

/** CPU % of one core used by the server's FFmpeg children of each role over `seconds`. */
async function childCpu(serverPid: number, seconds: number): Promise<{ fallback: number; ladder: number; server: number; fallbackProcesses: number }> {
  const sum = (pids: number[]) => pids.reduce((a, p) => a + (processTicks(p) ?? 0), 0);
  const before = ffmpegChildren(serverPid);
  const f0 = sum(before.fallback);
  const l0 = sum(before.ladder);
  const s0 = processTicks(serverPid) ?? 0;
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const after = ffmpegChildren(serverPid);
  const secs = (performance.now() - t0) / 1000;
  // A child that started or ended within the window counts from what /proc shows of it.
  const pct = (ticks: number) => Math.max(0, (ticks / CLK_TCK / secs) * 100);
  const same = (a: number[], b: number[]) => a.length === b.length && a.every((p) => b.includes(p));
  return {
    fallbackProcesses: Math.max(before.fallback.length, after.fallback.length),
    server: pct((processTicks(serverPid) ?? 0) - s0),
    fallback: same(before.fallback, after.fallback) ? pct(sum(after.fallback) - f0) : pct(sum(after.fallback)),
    ladder: same(before.ladder, after.ladder) ? pct(sum(after.ladder) - l0) : pct(sum(after.ladder)),
  };
}

/** A `/listen` reader stamping every chunk (performance.now(), ms). */
function listener(url: string): { stamps: number[]; stop: () => void } {
  const stamps: number[] = [];
  const ac = new AbortController();
  void (async () => {
    try {
      // The stream is on air once its first segment exists: until then /listen answers 404.
      let res = await fetch(url, { signal: ac.signal });
      while (res.status !== 200) {
        await res.body?.cancel();
        await sleep(200);
        res = await fetch(url, { signal: ac.signal });
      }
      for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>) stamps.push(performance.now());
    } catch {
      // stopped
    }
  })();
  return { stamps, stop: () => ac.abort() };
}

/** The longest gap (ms) between two chunks received within [from − 2.5 s, from + spanMs] (chunks come once per segment). */
function longestGap(stamps: number[], from: number, spanMs: number): number {
  let prev: number | null = null;
  let worst = 0;
  for (const s of stamps) {
    if (s < from - 2500) continue;
    if (s > from + spanMs) break;
    if (prev !== null) worst = Math.max(worst, s - prev);
    prev = s;
  }
  return worst;
}

function publishTone(rtmpUrl: string): ChildProcess {
  return spawnWithFds(['ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', rtmpUrl]);
}

/** How long the listener is watched after a switch (ms): several segments. */
const AFTER_SWITCH_MS = 8000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function api(base: string, key: string, method: string, p: string, body?: unknown): Promise<any> {
  const r = await fetch(`${base}/v2${p}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json();
}

async function waitSource(base: string, key: string, id: string, want: string, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if ((await api(base, key, 'GET', `/streams/${id}`)).source === want) return;
    await sleep(100);
  }
  throw new Error(`the stream's source did not become ${want}`);
}

export async function run(): Promise<BenchRow[]> {
  if (!have('ffmpeg')) return [{ group: GROUP, name: 'skipped', value: 0, unit: '', note: 'needs ffmpeg' }];
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-bench-fallback-'));
  const sk = await startSkylark(path.join(dir, 'data'));
  const publishers: ChildProcess[] = [];
  let reader: { stop: () => void } | null = null;
  try {
    const key = await createAccount(path.join(dir, 'data'), sk.defaultSecretKey);
    const mp3 = path.join(dir, 'episode.mp3');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=330:sample_rate=44100:duration=60', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', mp3]);
    const pod = await api(sk.http, key, 'POST', '/podcasts', { title: 'Bench reruns' });
    const ep = await api(sk.http, key, 'POST', `/podcasts/${pod.id}/episodes`, { title: 'Rerun' });
    const put = await fetch(`${sk.http}/v2/podcasts/${pod.id}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'audio/mpeg' }, body: readFileSync(mp3) });
    if (put.status !== 200) throw new Error(`episode audio: ${put.status}`);
    const s = await api(sk.http, key, 'POST', '/streams', { title: 'Bench station', codec: 'aac', quality: 'medium', reconnectWindow: 0, fallback: { episodeIds: [ep.id], order: 'sequential', silenceSeconds: null } });
    await waitSource(sk.http, key, s.id, 'fallback');
    const l = listener(s.listenUrl);
    reader = l;
    for (let i = 0; i < 100 && l.stamps.length < 2; i++) await sleep(200);
    if (l.stamps.length < 2) throw new Error('/listen delivered nothing on the fallback');
    const encoding = await childCpu(sk.child.pid!, SECONDS);
    if (encoding.fallbackProcesses === 0) throw new Error('no fallback FFmpeg in the first run: the rendition cache was not empty');
    log(`on fallback, first run (live encode): fallback process ${encoding.fallback.toFixed(2)} %, ladder ${encoding.ladder.toFixed(2)} %, server process ${encoding.server.toFixed(2)} % of a core`);
    // A later run plays the rendition built meanwhile, paced in the server (no FFmpeg): the next one
    // (after the 60 s episode), or the one after when the episode's loudness-normalised audio (new
    // audio) was not built in time. No fallback FFmpeg for 2 s in a row: a paced run (runs follow each other within ms).
    let quiet = 0;
    for (let i = 0; i < 2400 && quiet < 20; i++) {
      quiet = ffmpegChildren(sk.child.pid!).fallback.length === 0 ? quiet + 1 : 0;
      await sleep(100);
    }
    const onFallback = await childCpu(sk.child.pid!, SECONDS);
    if (onFallback.fallbackProcesses !== 0) throw new Error('the fallback did not play a cached rendition within 240 s');
    log(`on fallback, cached rendition (paced in the server): ladder ${onFallback.ladder.toFixed(2)} %, server process ${onFallback.server.toFixed(2)} % of a core`);
    const rendition = readdirSync(path.join(dir, 'data', 'fallback-cache')).find((f) => f.endsWith('.aac'));
    if (!rendition) throw new Error('no AAC rendition in the cache');
    const pacer = await pacerCpu(path.join(dir, 'data', 'fallback-cache', rendition), PACERS, SECONDS);
    log(`${PACERS} pacers in one process: ${pacer.toFixed(3)} % of a core per stream`);
    const build = median([0, 1, 2].map(() => buildCpuSeconds(mp3, dir)));
    log(`rendition build: ${build.toFixed(3)} CPU-s for the 60 s episode`);
    const cadence = median(l.stamps.slice(1).map((x, i) => x - l.stamps[i]!).filter((g) => g > 100));

    const toFallback: number[] = [];
    const toLive: number[] = [];
    let liveLadder = NaN;
    for (let round = 0; round < ROUNDS; round++) {
      const pub = publishTone(`${s.rtmpUrl}/${s.streamKey}`);
      publishers.push(pub);
      const startedAt = performance.now();
      await waitSource(sk.http, key, s.id, 'live');
      await sleep(AFTER_SWITCH_MS);
      toLive.push(longestGap(l.stamps, startedAt, performance.now() - startedAt));
      if (round === 0) {
        liveLadder = (await childCpu(sk.child.pid!, SECONDS)).ladder;
        log(`live: ladder ${liveLadder.toFixed(2)} % of a core`);
      }
      const killedAt = performance.now();
      await stop(pub, 'SIGKILL', 1000);
      await waitSource(sk.http, key, s.id, 'fallback');
      await sleep(AFTER_SWITCH_MS);
      toFallback.push(longestGap(l.stamps, killedAt, performance.now() - killedAt));
      if (process.env.BENCH_FALLBACK_STAMPS) log(`stamps around the kill: ${l.stamps.filter((x) => x > killedAt - 6000).map((x) => Math.round(x - killedAt)).join(' ')}; around the start: ${l.stamps.filter((x) => x > startedAt - 6000 && x < killedAt).map((x) => Math.round(x - startedAt)).join(' ')}`);
      log(`round ${round + 1}: longest gap live → fallback ${toFallback.at(-1)!.toFixed(0)} ms, fallback → live ${toLive.at(-1)!.toFixed(0)} ms`);
    }
    const note = `medium AAC (ladder 128 + 64), ${SECONDS} s windows, gaps: median of ${ROUNDS}`;
    return [
      { group: GROUP, name: 'fallback from the cached rendition (paced in JS), per stream', value: round3(pacer), unit: '% of a core', peer: { name: 'one live ladder layer', value: round2(liveLadder) }, note: `${PACERS} pacers in one process, ${SECONDS} s` },
      { group: GROUP, name: 'fallback live encode (FFmpeg, before the cache), per stream', value: round2(encoding.fallback), unit: '% of a core', peer: { name: 'one live ladder layer', value: round2(liveLadder) }, note },
      { group: GROUP, name: 'server process while on fallback: cached rendition', value: round2(onFallback.server), unit: '% of a core', peer: { name: 'live encode', value: round2(encoding.server) }, note: 'the Skylark process itself, FFmpeg children apart' },
      { group: GROUP, name: 'rendition build, once per episode', value: Math.round(build * 1000) / 1000, unit: 'CPU-s per minute of audio', note: 'AAC 128k from a 60 s MP3, median of 3' },
      { group: GROUP, name: 'ladder process while on fallback, per stream', value: round2(onFallback.ladder), unit: '% of a core' },
      { group: GROUP, name: 'longest gap between chunks, live → fallback', value: Math.round(median(toFallback)), unit: 'ms', peer: { name: 'chunk interval on air', value: Math.round(cadence) }, note: 'a /listen chunk is a segment: a gap near the interval is no silence' },
      { group: GROUP, name: 'longest gap between chunks, fallback → live', value: Math.round(median(toLive)), unit: 'ms', peer: { name: 'chunk interval on air', value: Math.round(cadence) } },
    ];
  } finally {
    reader?.stop();
    for (const p of publishers) await stop(p, 'SIGKILL', 1000);
    await stop(sk.child, 'SIGTERM', 5000);
    rmSync(dir, { recursive: true, force: true });
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** Streams paced at once by `pacerCpu`. */
const PACERS = Number(process.env.BENCH_FALLBACK_PACERS || 20);

/**
 * CPU % of one core per stream of `n` runs of the rendition pacer (src/live/ingest/rendition-pacer.ts)
 * on `file` in this process over `seconds` (the messages go nowhere: the hub's cost is the same
 * for either source), from process.cpuUsage less the same time idle.
 */
async function pacerCpu(file: string, n: number, seconds: number): Promise<number> {
  const cpu = async (during: () => Array<{ stop(): void }>) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const runs = during();
    await sleep(seconds * 1000);
    for (const r of runs) r.stop();
    const c = process.cpuUsage(c0);
    return ((c.user + c.system) / 1000 / (performance.now() - t0)) * 100;
  };
  const idle = await cpu(() => []);
  let messages = 0;
  const paced = await cpu(() => Array.from({ length: n }, () => paceRendition(file, 'aac', { audio: () => void messages++, end: () => {} })));
  if (messages === 0) throw new Error('the pacers handed nothing on');
  return Math.max(0, paced - idle) / n;
}

/** CPU-seconds (user + system) of one rendition build of `source` (AAC 128k), from the shell's `times`. */
function buildCpuSeconds(source: string, dir: string): number {
  const out = path.join(dir, 'rendition.part');
  const args = ['ffmpeg', ...renditionBuildArgs({ episodeId: 'ep_bench', path: source, codec: 'aac', kbps: 128, format: { sampleRate: 48000, channels: 2 } }, out)];
  const text = execFileSync('bash', ['-c', '"$@" >/dev/null 2>&1; times', 'bash', ...args]).toString();
  // `times` prints the shell's user/system times, then its children's: "0m1.234s 0m0.056s".
  const child = text.trim().split('\n')[1] ?? '';
  return [...child.matchAll(/(\d+)m([\d.]+)s/g)].reduce((a, m) => a + Number(m[1]) * 60 + Number(m[2]), 0);
}
