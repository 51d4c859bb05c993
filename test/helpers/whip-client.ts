/**
 * A WHIP (RFC 9725) publisher for tests, on werift: offers one send-only Opus track, POSTs the
 * offer with a bearer, applies the answer, and once connected sends the Opus packets of a real
 * Ogg Opus file in real time (one RTP packet per Opus packet, RFC 7587: timestamps at 48 kHz).
 * A `lossy` option drops (evenly spread) and reorders packets on the way, as a bad link would.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket } from 'werift';
import { ffmpegPath } from './ffmpeg.js';
import { oggPackets, opusPacketSamples } from './ogg.js';
import { until } from './werift-pair.js';

/** Encodes `seconds` of a `frequency` Hz sine as Ogg Opus (20 ms packets, stereo, 48 kHz) into `dir`; returns its Opus packets. */
export function toneOpusPackets(dir: string, frequency: number, seconds: number): Buffer[] {
  const file = path.join(dir, `tone-${frequency}-${seconds}.ogg`);
  const r = spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=${frequency}:sample_rate=48000:duration=${seconds}`, '-ac', '2', '-c:a', 'libopus', '-b:a', '96k', '-frame_duration', '20', file]);
  if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr}`);
  return oggPackets(readFileSync(file)).slice(2); // OpusHead and OpusTags are not RTP
}

/** A WHEP/WHIP-style offer of a send-only Opus track (and, when asked, a video section). */
export function whipPeer(video = false): RTCPeerConnection {
  const opus = new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 });
  const vp8 = new RTCRtpCodecParameters({ mimeType: 'video/VP8', clockRate: 90000, payloadType: 96 });
  return new RTCPeerConnection({ codecs: { audio: [opus], video: video ? [vp8] : [] }, headerExtensions: { audio: [], video: [] }, iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'], iceServers: [] });
}

export interface WhipClient {
  status: number;
  location: string | null;
  /** The answer body (SDP, or the JSON error). */
  body: string;
  headers: Headers;
  pc: RTCPeerConnection;
  /** Sends `packets` in real time (20 ms each; `lossy`: drops `drop` of them, evenly spread, and swaps some neighbours). Resolves when all were sent. */
  send(packets: Buffer[], lossy?: { drop: number; swapEvery: number } | null, onSent?: (payload: Buffer, atMs: number) => void): Promise<{ sent: number; dropped: number; swapped: number }>;
  close(): Promise<void>;
}

/**
 * Offers to `url` with `bearer`; on 201 applies the answer (unless `apply: false`) and waits for the
 * connection (≤ 10 s). `srtpProfiles`: the DTLS-SRTP protection profiles (RFC 5764 §4.1.2 numbers)
 * this publisher offers, in its order (werift's default: AEAD_AES_128_GCM, then
 * AES_CM_128_HMAC_SHA1_80 — which Chromium ends up with against Skylark).
 */
export async function whipConnect(url: string, bearer: string | null, o: { video?: boolean; offerSdp?: (sdp: string) => string; apply?: boolean; srtpProfiles?: number[] } = {}): Promise<WhipClient> {
  const pc = whipPeer(o.video);
  const tr = pc.addTransceiver('audio', { direction: 'sendonly' });
  if (o.video) pc.addTransceiver('video', { direction: 'sendonly' });
  await pc.setLocalDescription(await pc.createOffer());
  if (o.srtpProfiles) for (const d of pc.dtlsTransports) (d as unknown as { srtpProfiles: number[] }).srtpProfiles = o.srtpProfiles;
  await until(() => pc.iceGatheringState === 'complete', 5000, 'client gathering');
  let sdp = pc.localDescription!.sdp;
  if (o.offerSdp) sdp = o.offerSdp(sdp);
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/sdp', ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}) }, body: sdp });
  const body = await res.text();
  const location = res.headers.get('location');
  if (res.status === 201 && o.apply !== false) {
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    await until(() => pc.connectionState === 'connected', 10_000, 'WHIP peer connected');
  }
  let seq = 1000;
  let ts = 123_456;
  const send: WhipClient['send'] = async (packets, lossy, onSent) => {
    const start = Date.now();
    let sent = 0;
    let dropped = 0;
    let swapped = 0;
    let held: RtpPacket | null = null;
    let i = 0;
    while (i < packets.length) {
      const due = start + i * 20;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const p = packets[i]!;
      const pkt = new RtpPacket(new RtpHeader({ sequenceNumber: seq & 0xffff, timestamp: ts >>> 0, payloadType: 111, marker: i === 0 }), p);
      seq++;
      ts += opusPacketSamples(p);
      i++;
      // Drops spread evenly (`drop` of every stretch of packets), not drawn at random: the share of
      // concealed audio in any few seconds, which the tests' decoded tone depends on, is then the
      // same every run. The last packet is never dropped (the tests read the highest sequence number).
      if (lossy && i < packets.length && Math.floor(i * lossy.drop + 0.5) > Math.floor((i - 1) * lossy.drop + 0.5)) {
        dropped++;
        continue;
      }
      if (lossy && !held && i % lossy.swapEvery === 0) {
        held = pkt; // sent after the next one
        swapped++;
        continue;
      }
      onSent?.(p, performance.now());
      await tr.sender.sendRtp(pkt);
      sent++;
      if (held) {
        await tr.sender.sendRtp(held);
        held = null;
        sent++;
      }
    }
    if (held) await tr.sender.sendRtp(held);
    return { sent, dropped, swapped };
  };
  return {
    status: res.status,
    location,
    body,
    headers: res.headers,
    pc,
    send,
    close: async () => {
      await pc.close().catch(() => {});
    },
  };
}

/**
 * The dominant frequency (Hz) and RMS level (0–1) of `seconds` of audio that FFmpeg decodes from
 * `input` (an HLS playlist, a `/listen` URL or a file), from the zero crossings of the mono 48 kHz
 * signal (a pure tone: exact to a few Hz). Asynchronous: the server may run in this process.
 * @throws Error when fewer than 0.1 s could be decoded
 */
export async function decodedFrequency(input: string, seconds: number, extra: string[] = []): Promise<{ hz: number; rms: number }> {
  const p = spawn(ffmpegPath(), ['-nostdin', '-hide_banner', '-loglevel', 'error', ...extra, '-i', input, '-t', String(seconds), '-vn', '-ac', '1', '-ar', '48000', '-f', 's16le', 'pipe:1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: Buffer[] = [];
  let err = '';
  p.stdout!.on('data', (d: Buffer) => chunks.push(d));
  p.stderr!.on('data', (d: Buffer) => (err += d));
  const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
  await new Promise((r) => p.once('close', r));
  clearTimeout(timer);
  const pcm = Buffer.concat(chunks);
  const n = Math.floor(pcm.length / 2);
  if (n < 4800) throw new Error(`decoded ${n} samples from ${input}: ${err}`);
  let crossings = 0;
  let sum = 0;
  let prev = pcm.readInt16LE(0);
  for (let i = 1; i < n; i++) {
    const v = pcm.readInt16LE(i * 2);
    sum += v * v;
    if ((prev < 0 && v >= 0) || (prev >= 0 && v < 0)) crossings++;
    prev = v;
  }
  return { hz: crossings / 2 / (n / 48000), rms: Math.sqrt(sum / n) / 32768 };
}

/** A werift WHEP listener (RFC 9725) of stream `id` on `http`: every RTP payload it receives, with its receive time. */
export async function whepListener(http: string, id: string, onPayload: (payload: Buffer, atMs: number) => void): Promise<RTCPeerConnection> {
  const pc = whipPeer();
  pc.addTransceiver('audio', { direction: 'recvonly' });
  pc.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((p) => onPayload(p.payload, performance.now())));
  await pc.setLocalDescription(await pc.createOffer());
  await until(() => pc.iceGatheringState === 'complete', 5000, 'WHEP gathering');
  const res = await fetch(`${http}/whep/${id}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription!.sdp });
  const body = await res.text();
  if (res.status !== 201) throw new Error(`WHEP answered ${res.status}: ${body}`);
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  await until(() => pc.connectionState === 'connected', 10_000, 'WHEP connected');
  return pc;
}
