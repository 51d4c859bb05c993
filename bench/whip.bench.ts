/**
 * WHIP ingest (docs/behaviour.md §18): what one WebRTC publisher costs the server against one RTMP
 * publisher of the same Opus, and how long a packet takes from a WHIP publisher to a WHEP listener.
 *
 * 1. Skylark as its own process (`node bin/skylark.js serve`, ABR ladder off: the passthrough path
 *    alone, as the ingest bench measures it), a paid account from the CLI. An Opus tone (FFmpeg's
 *    libopus, 96 kbit/s, 20 ms packets).
 * 2. CPU: for each publisher kind, a fresh `opus` stream, the publisher in this process (WHIP:
 *    werift, one RTP packet per Opus packet, RFC 7587; RTMP: the Enhanced RTMP `Opus` publisher of
 *    test/helpers/ertmp-publisher.ts), warm-up, then the server's CPU (utime + stime of all its
 *    threads and children) over one window; an idle window first as the floor. The rows are
 *    server CPU % of one core; the WHIP row carries the RTMP row as its peer.
 * 3. Latency WHIP → WHEP: then a werift WHEP listener on the same stream; the Opus payloads pass through
 *    unchanged, so each packet received is matched to the packet sent by its bytes: delay = receive
 *    time − send time on this machine's clock (no decoder or playout buffer counted). Median and
 *    95th percentile after the first 2 s.
 *
 * Settings (environment): BENCH_WHIP_WARMUP_SECONDS (5), BENCH_WHIP_WINDOW_SECONDS (20).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchRow } from './lib/report.js';
import { cpuMeter, sleep, stop } from './lib/proc.js';
import { createAccount, envNum, startSkylark } from './http-segments.js';
import { makeOpusFile, publishOpus } from '../test/helpers/ertmp-publisher.js';
import { whepListener, whipConnect } from '../test/helpers/whip-client.js';

const GROUP = 'WHIP ingest (one Opus publisher, passthrough)';
const log = (msg: string) => process.stderr.write(`[whip] ${msg}\n`);

export const timeoutMs = 8 * 60_000;

async function opusStream(http: string, key: string, title: string): Promise<{ id: string; rtmpUrl: string; streamKey: string; whipUrl: string }> {
  const res = await fetch(`${http}/v2/streams`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ title, codec: 'opus', quality: 'high', reconnectWindow: 0 }) });
  if (res.status !== 201) throw new Error(`POST /v2/streams answered ${res.status}`);
  return (await res.json()) as { id: string; rtmpUrl: string; streamKey: string; whipUrl: string };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

export async function run(): Promise<BenchRow[]> {
  const warmup = envNum('BENCH_WHIP_WARMUP_SECONDS', 5);
  const windowS = envNum('BENCH_WHIP_WINDOW_SECONDS', 20) || 20;
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-whip-'));
  const rows: BenchRow[] = [];
  const sky = await startSkylark(path.join(work, 'data'), { SKYLARK_ABR_LADDER: '0' });
  try {
    const key = await createAccount(path.join(work, 'data'), sky.defaultSecretKey);
    const seconds = warmup + windowS + 20;
    const file = makeOpusFile(path.join(work, 'tone.ogg'), seconds, 660);
    const pid = sky.child.pid!;

    let m = cpuMeter(pid);
    await sleep(windowS * 1000);
    const idle = m().serverPercent;
    log(`idle: ${idle.toFixed(2)} %`);

    const rtmpStream = await opusStream(sky.http, key, 'RTMP');
    const rtmp = publishOpus(rtmpStream.rtmpUrl, rtmpStream.streamKey, file, seconds);
    await sleep(warmup * 1000);
    m = cpuMeter(pid);
    await sleep(windowS * 1000);
    const rtmpCpu = m().serverPercent;
    rtmp.stop();
    log(`rtmp: ${rtmpCpu.toFixed(2)} %`);
    await sleep(2000);

    const whipStream = await opusStream(sky.http, key, 'WHIP');
    const c = await whipConnect(whipStream.whipUrl, whipStream.streamKey);
    if (c.status !== 201) throw new Error(`WHIP answered ${c.status}: ${c.body}`);
    const sent = new Map<string, number>();
    const delays: number[] = [];
    const sending = c.send(file.packets, null, (p, at) => void sent.set(p.toString('base64'), at));
    await sleep(warmup * 1000);
    m = cpuMeter(pid);
    await sleep(windowS * 1000);
    const whipCpu = m().serverPercent;
    log(`whip: ${whipCpu.toFixed(2)} %`);
    // Then a WHEP listener: packet delays over 10 s, after its first 2 s.
    let joined = 0;
    const whep = await whepListener(sky.http, whipStream.id, (p, at) => {
      const t0 = sent.get(p.toString('base64'));
      if (!joined) joined = at;
      if (t0 !== undefined && at - joined > 2000) delays.push(at - t0);
    });
    await sleep(12_000);
    await whep.close();
    await fetch(new URL(c.location!, sky.http), { method: 'DELETE' });
    await c.close();
    await sending.catch(() => {});

    const note = `ABR ladder off; ${windowS} s window after ${warmup} s warm-up; idle server ${idle.toFixed(2)} %`;
    rows.push({ group: GROUP, name: 'server CPU, one WHIP publisher', value: Number(whipCpu.toFixed(2)), unit: '% of a core', peer: { name: 'one E-RTMP Opus publisher', value: Number(rtmpCpu.toFixed(2)) }, note });
    rows.push({ group: GROUP, name: 'WHIP → WHEP packet delay, median', value: Number(pct(delays, 50).toFixed(1)), unit: 'ms', note: `n = ${delays.length}; same Opus payload matched by bytes; no decode or playout buffer` });
    rows.push({ group: GROUP, name: 'WHIP → WHEP packet delay, p95', value: Number(pct(delays, 95).toFixed(1)), unit: 'ms' });
    return rows;
  } finally {
    await stop(sky.child);
    rmSync(work, { recursive: true, force: true });
  }
}
