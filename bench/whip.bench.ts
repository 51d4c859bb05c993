/**
 * WHIP ingest (docs/behaviour.md §18): what WebRTC publishers cost the server against RTMP
 * publishers of the same Opus, how long a packet takes from a WHIP publisher to a WHEP listener,
 * how long a tone takes from a WHIP publisher to an LL-HLS player, and whether 50 WHIP publishers
 * at once are all held without loss.
 *
 * 1. Skylark as its own process (`node bin/skylark.js serve`, ABR ladder off: the passthrough path
 *    alone, as the ingest bench measures it), a paid account from the CLI. An Opus tone (FFmpeg's
 *    libopus, 96 kbit/s, 20 ms packets).
 * 2. CPU: an idle window first as the floor; then for each publisher kind, fresh `opus` streams,
 *    the publishers in this process (WHIP: werift, one RTP packet per Opus packet, RFC 7587; RTMP:
 *    the Enhanced RTMP `Opus` publisher of test/helpers/ertmp-publisher.ts), warm-up, then the
 *    server's CPU (utime + stime of all its threads and children) over one window: one publisher
 *    of each kind, then BENCH_WHIP_MANY (50) of each at once. The rows are server CPU % of one
 *    core; each WHIP row carries the RTMP row of the same count as its peer.
 * 3. Loss at BENCH_WHIP_MANY: every WHIP publisher counts what it sent; the server's RTCP receiver
 *    reports (RFC 3550 §6.4.1) that reach it after its last packet say what the server received
 *    (extended highest sequence number − first + 1 − cumulative lost). Lost = sent − received,
 *    summed; held = publishers still connected at the end.
 * 4. Latency WHIP → WHEP: a werift WHEP listener on the one-publisher stream; the Opus payloads pass
 *    through unchanged, so each packet received is matched to the packet sent by its bytes: delay =
 *    receive time − send time on this machine's clock (no decoder or playout buffer counted).
 *    Median and 95th percentile after the first 2 s.
 * 5. Latency WHIP → LL-HLS (bench/lib/whip-latency.ts): the tone-marker method of
 *    bench/latency.bench.ts with the marker track sent over WHIP into an `opus` stream, played by
 *    hls.js in Chromium with `lowLatencyMode: true`. Skipped when Chromium is not installed.
 *
 * Settings (environment): BENCH_WHIP_WARMUP_SECONDS (5), BENCH_WHIP_WINDOW_SECONDS (20),
 * BENCH_WHIP_MANY (50; 0 skips step 3), BENCH_WHIP_LLHLS (1; 0 skips step 5), BENCH_WHIP_SRTP
 * (`cm`: the publishers offer AES_CM_128_HMAC_SHA1_80 only, as Chromium ends up using; `gcm`:
 * AEAD_AES_128_GCM only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RtcpRrPacket } from 'werift';
import type { BenchRow } from './lib/report.js';
import { cpuMeter, sleep, stop } from './lib/proc.js';
import { createAccount, envNum, startSkylark } from './http-segments.js';
import { whipToLlHls } from './lib/whip-latency.js';
import { makeOpusFile, publishOpus, type OpusFile } from '../test/helpers/ertmp-publisher.js';
import { whepListener, whipConnect, type WhipClient } from '../test/helpers/whip-client.js';

const GROUP = 'WHIP ingest (Opus publishers, passthrough)';
const log = (msg: string) => process.stderr.write(`[whip] ${msg}\n`);

export const timeoutMs = 12 * 60_000;

/**
 * The SRTP protection profile the WHIP publishers offer (BENCH_WHIP_SRTP: `cm`, the default —
 * AES_CM_128_HMAC_SHA1_80, what Chromium negotiates with Skylark — or `gcm`, AEAD_AES_128_GCM).
 */
const PROFILES = process.env.BENCH_WHIP_SRTP === 'gcm' ? [0x0007] : [0x0001];

export interface OpusStream {
  id: string;
  rtmpUrl: string;
  streamKey: string;
  whipUrl: string;
  hlsUrl: string;
}

/** A new `opus` stream (high quality, no reconnect window) of the account `key`. */
export async function opusStream(http: string, key: string, title: string, latencyMode: 'standard' | 'low' = 'standard'): Promise<OpusStream> {
  const res = await fetch(`${http}/v2/streams`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ title, codec: 'opus', quality: 'high', reconnectWindow: 0, latencyMode }) });
  if (res.status !== 201) throw new Error(`POST /v2/streams answered ${res.status}`);
  return (await res.json()) as OpusStream;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

/** One WHIP publisher sending `packets` in real time, and the server's receiver reports it gets. */
interface Publisher {
  streamId: string;
  c: WhipClient;
  sending: Promise<{ sent: number }>;
  /** The last receiver report block on this publisher's SSRC. */
  last: { highest: number; lost: number; at: number } | null;
}

/** Connects a WHIP publisher to `s` and starts sending `packets` (sequence numbers from 1000, test/helpers/whip-client.ts). */
async function whipPublisher(s: OpusStream, packets: Buffer[], onSent?: (p: Buffer, at: number) => void): Promise<Publisher> {
  const c = await whipConnect(s.whipUrl, s.streamKey, { srtpProfiles: PROFILES });
  if (c.status !== 201) throw new Error(`WHIP answered ${c.status}: ${c.body}`);
  const sender = c.pc.getTransceivers()[0]!.sender;
  const p: Publisher = { streamId: s.id, c, sending: c.send(packets, null, onSent), last: null };
  sender.onRtcp.subscribe((r) => {
    if (!(r instanceof RtcpRrPacket)) return;
    const b = r.reports.find((x) => x.ssrc === sender.ssrc);
    if (b) p.last = { highest: b.highestSequence, lost: b.packetsLost, at: performance.now() };
  });
  return p;
}

async function closePublisher(http: string, p: Publisher): Promise<void> {
  if (p.c.location) await fetch(new URL(p.c.location, http), { method: 'DELETE' }).catch(() => {});
  await p.c.close();
  await p.sending.catch(() => {});
}

/** Server CPU over a window of `windowS` after `warmup` s (% of one core). */
async function window(pid: number, warmup: number, windowS: number): Promise<number> {
  await sleep(warmup * 1000);
  const m = cpuMeter(pid);
  await sleep(windowS * 1000);
  return m().serverPercent;
}

/** `n` RTMP publishers, then `n` WHIP publishers, of the same Opus at once: CPU of each, and what the WHIP ones lost. */
async function many(http: string, key: string, pid: number, file: OpusFile, n: number, warmup: number, windowS: number): Promise<BenchRow[]> {
  const rtmpStreams = await Promise.all(Array.from({ length: n }, (_, i) => opusStream(http, key, `RTMP ${i}`)));
  const rtmp = rtmpStreams.map((s) => publishOpus(s.rtmpUrl, s.streamKey, file, warmup + windowS + 10));
  const rtmpCpu = await window(pid, warmup, windowS);
  for (const r of rtmp) r.stop();
  log(`${n} rtmp: ${rtmpCpu.toFixed(2)} %`);
  await sleep(3000);

  const streams = await Promise.all(Array.from({ length: n }, (_, i) => opusStream(http, key, `WHIP ${i}`)));
  const t0 = performance.now();
  const pubs: Publisher[] = [];
  // Offers in batches (werift's ICE gathering on both sides); each sends (warm-up + window + 2 s) of audio from when it connected.
  const packets = file.packets.slice(0, Math.ceil(((warmup + windowS + 2) * 1000) / 20) + Math.ceil(n / 5) * 100);
  let failed = 0;
  for (let i = 0; i < n; i += 5) {
    const got = await Promise.allSettled(streams.slice(i, i + 5).map((s) => whipPublisher(s, packets)));
    for (const g of got) {
      if (g.status === 'fulfilled') pubs.push(g.value);
      else {
        failed++;
        log(`a WHIP publisher did not connect: ${(g.reason as Error).message}`);
      }
    }
  }
  const connectS = (performance.now() - t0) / 1000;
  log(`${pubs.length} of ${n} whip publishers connected in ${connectS.toFixed(1)} s`);
  const whipCpu = await window(pid, warmup, windowS);
  // Held: connected, and the server has the stream live (every publisher still sends).
  const status = async (id: string) => ((await (await fetch(`${http}/v2/streams/${id}`, { headers: { Authorization: `Bearer ${key}` } })).json()) as { status?: string }).status;
  const live = await Promise.all(pubs.map(async (p) => p.c.pc.connectionState === 'connected' && (await status(p.streamId).catch(() => null)) === 'live'));
  const held = live.filter(Boolean).length;
  log(`${n} whip: ${whipCpu.toFixed(2)} %, held ${held}`);
  const sent = (await Promise.all(pubs.map((p) => p.sending))).map((r) => r.sent);
  const end = performance.now();
  // A receiver report comes every 0.5–1.5 s: wait for one after the last packet of each.
  for (let i = 0; i < 40 && pubs.some((p) => !p.last || p.last.at < end + 100); i++) await sleep(100);
  let lost = 0;
  let reported = 0;
  pubs.forEach((p, i) => {
    if (!p.last) return;
    reported++;
    const received = p.last.highest - 1000 + 1 - p.last.lost;
    lost += sent[i]! - received;
  });
  const total = sent.reduce((a, b) => a + b, 0);
  log(`${n} whip: sent ${total}, lost ${lost} (reports from ${reported})`);
  await Promise.all(pubs.map((p) => closePublisher(http, p)));
  const note = `${windowS} s window after ${warmup} s warm-up, every publisher sending`;
  return [
    { group: GROUP, name: `server CPU, ${n} WHIP publishers`, value: Number(whipCpu.toFixed(2)), unit: '% of a core', peer: { name: `${n} E-RTMP Opus publishers`, value: Number(rtmpCpu.toFixed(2)) }, note },
    { group: GROUP, name: `${n} WHIP publishers: held (connected and live) after the window`, value: held, unit: 'publishers', note: `${failed} did not connect; connecting took ${connectS.toFixed(0)} s in batches of 5` },
    { group: GROUP, name: `${n} WHIP publishers: packets lost (server's receiver reports)`, value: lost, unit: 'packets', note: `of ${total} sent; reports from ${reported} of ${n}` },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const warmup = envNum('BENCH_WHIP_WARMUP_SECONDS', 5);
  const windowS = envNum('BENCH_WHIP_WINDOW_SECONDS', 20) || 20;
  const n = envNum('BENCH_WHIP_MANY', 50);
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-whip-'));
  const rows: BenchRow[] = [];
  const sky = await startSkylark(path.join(work, 'data'), { SKYLARK_ABR_LADDER: '0' });
  try {
    const key = await createAccount(path.join(work, 'data'), sky.defaultSecretKey);
    const seconds = warmup + windowS + 20 + Math.ceil(n / 5) * 2;
    const file = makeOpusFile(path.join(work, 'tone.ogg'), seconds, 660);
    const pid = sky.child.pid!;

    const idle = await window(pid, 0, windowS);
    log(`idle: ${idle.toFixed(2)} %`);

    const rtmpStream = await opusStream(sky.http, key, 'RTMP');
    const rtmp = publishOpus(rtmpStream.rtmpUrl, rtmpStream.streamKey, file, seconds);
    const rtmpCpu = await window(pid, warmup, windowS);
    rtmp.stop();
    log(`rtmp: ${rtmpCpu.toFixed(2)} %`);
    await sleep(2000);

    const whipStream = await opusStream(sky.http, key, 'WHIP');
    const sent = new Map<string, number>();
    const delays: number[] = [];
    const pub = await whipPublisher(whipStream, file.packets, (p, at) => void sent.set(p.toString('base64'), at));
    const profile = (pub.c.pc.dtlsTransports[0]?.srtp as unknown as { localContext?: { profile?: number } } | undefined)?.localContext?.profile;
    log(`SRTP protection profile ${profile} (1: AES_CM_128_HMAC_SHA1_80, 7: AEAD_AES_128_GCM)`);
    const whipCpu = await window(pid, warmup, windowS);
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
    await closePublisher(sky.http, pub);

    const note = `ABR ladder off; SRTP profile ${profile}; ${windowS} s window after ${warmup} s warm-up; idle server ${idle.toFixed(2)} %`;
    rows.push({ group: GROUP, name: 'server CPU, one WHIP publisher', value: Number(whipCpu.toFixed(2)), unit: '% of a core', peer: { name: 'one E-RTMP Opus publisher', value: Number(rtmpCpu.toFixed(2)) }, note });
    rows.push({ group: GROUP, name: 'WHIP → WHEP packet delay, median', value: Number(pct(delays, 50).toFixed(1)), unit: 'ms', note: `n = ${delays.length}; same Opus payload matched by bytes; no decode or playout buffer` });
    rows.push({ group: GROUP, name: 'WHIP → WHEP packet delay, p95', value: Number(pct(delays, 95).toFixed(1)), unit: 'ms' });

    if (n > 0) rows.push(...(await many(sky.http, key, pid, file, n, warmup, windowS)));
    if (envNum('BENCH_WHIP_LLHLS', 1) > 0) {
      const s = await opusStream(sky.http, key, 'WHIP latency', 'low');
      rows.push(...(await whipToLlHls(s, work, GROUP, log)));
    }
    return rows;
  } finally {
    await stop(sky.child);
    rmSync(work, { recursive: true, force: true });
  }
}
