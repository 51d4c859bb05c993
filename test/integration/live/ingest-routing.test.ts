/**
 * Routed ingest end to end with the ABR ladder off (`SKYLARK_ABR_LADDER=0`: passthrough layer
 * only, no codec process; docs/decisions.md "Ingest I/O"). A real FFmpeg publishes AAC over RTMP;
 * once live, the connection is routed in 'segmenter' mode (socket → native segmenter, JS sees only
 * its events). A werift WHEP listener in this process joins (→ 'frames': every frame also reaches
 * JS, and the peer receives Opus RTP), then DELETEs its session (→ 'segmenter' again). After the
 * publish ends, the passthrough layer's playlist and media are checked across both switches:
 * - every listed segment lasts 94 AAC frames (2.005 s) but the last, media sequence numbers are
 *   contiguous, no EXT-X-DISCONTINUITY; the playlist kept growing while the peer was connected;
 * - init + every listed segment decodes without an error, to the listed duration;
 * - packet timestamps run on without a gap or overlap (pts = previous pts + duration);
 * - the whole stream (listed segments plus the one that left the window) carries exactly the AAC
 *   packets FFmpeg encodes for the same input, byte for byte: no frame lost or doubled at a switch;
 * - Skylark logged no error.
 * The routing mode is read from ingest's state (observed only, nothing is replaced).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { RTCPeerConnection, RTCRtpCodecParameters } from 'werift';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';

const ffmpeg = ffmpegPath();
const ffprobe = ffmpeg === 'ffmpeg' ? 'ffprobe' : path.join(path.dirname(ffmpeg), 'ffprobe');
const PUBLISH_SECONDS = 14;
/** One 2 s segment of 48 kHz AAC: the first frame boundary at or past 2 s (94 × 1024 samples). */
const SEGMENT_SECONDS = (94 * 1024) / 48_000;
/** The publisher's encoder arguments (publish()'s default), also used for the reference encode. */
const AAC_ARGS = ['-ac', '2', '-c:a', 'aac', '-b:a', '128k'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Segment {
  seq: number;
  duration: number;
  uri: string;
}
/** Segment (sequence, EXTINF, uri) entries of a media playlist. */
function segmentsOf(text: string): Segment[] {
  const first = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(text)![1]);
  const out: Segment[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^#EXTINF:([\d.]+),/.exec(lines[i]!);
    if (m) out.push({ seq: first + out.length, duration: Number(m[1]), uri: lines[i + 1]! });
  }
  return out;
}
/** The media sequence number of the segment in progress (the preload hint's), or -1. */
const inProgress = (text: string) => Number(/#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\./.exec(text)?.[1] ?? -1);

/** Per-packet "size md5" of the audio stream of `file`, stream-copied (FFmpeg's framemd5). */
async function packetHashes(file: string): Promise<string[]> {
  const r = await run(ffmpeg, ['-hide_banner', '-v', 'error', '-i', file, '-map', '0:a', '-c', 'copy', '-f', 'framemd5', '-']);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.split(',').map((f) => f.trim()))
    .map((f) => `${f[4]} ${f[5]}`);
}

let t: TestServer;
const tmp = tempDir('skylark-routing-');
let pub: ChildProcess | null = null;
let pc: RTCPeerConnection | null = null;
/** The reference encode (same FFmpeg arguments as the publisher, to a file): its packet hashes. */
let reference: Promise<string[]>;

/** Error lines Skylark logged (startInProcess logs errors only, as JSON lines on stderr). */
const serverErrors: string[] = [];
const stderrWrite = process.stderr.write;

/** How ingest currently routes the stream's publisher (Publishing.ingestRoute). */
function routed(streamId: string): string | undefined {
  return t.server.ingest.ingestRoute(streamId) ?? undefined;
}

beforeAll(async () => {
  process.stderr.write = function (this: unknown, chunk: unknown, ...rest: unknown[]) {
    if (String(chunk).includes('"component":"skylark')) serverErrors.push(String(chunk));
    return (stderrWrite as (...a: unknown[]) => boolean).call(process.stderr, chunk, ...rest);
  } as typeof process.stderr.write;
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
  const refFile = path.join(tmp.dir, 'reference.flv');
  reference = run(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', String(PUBLISH_SECONDS), ...AAC_ARGS, '-f', 'flv', refFile]).then(
    (r) => {
      if (r.code !== 0) throw new Error(`reference encode failed: ${r.stderr}`);
      return packetHashes(refFile);
    },
  );
});

afterAll(async () => {
  await pc?.close().catch(() => {});
  if (pub && pub.exitCode === null && pub.signalCode === null) {
    pub.kill('SIGKILL');
    await exited(pub);
  }
  await t?.close();
  process.stderr.write = stderrWrite;
  tmp.cleanup();
});

describe('routed ingest with the ladder off', () => {
  it("switches 'segmenter' → 'frames' (WHEP peer) → 'segmenter' without a gap in the HLS", async () => {
    const created = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Routing', codec: 'aac', reconnectWindow: 20, latencyMode: 'low' });
    expect(created.status).toBe(201);
    const stream = created.json;
    const getStream = async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}`)).json;

    pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: PUBLISH_SECONDS, codecArgs: AAC_ARGS });
    const pubExit = exited(pub);
    await waitFor(async () => (await getStream()).status === 'live', 15_000, 100, 'live');
    const liveAt = Date.now();

    // Ladder off: the multivariant playlist has the passthrough layer only.
    const master = await waitFor(async () => {
      const r = await fetch(stream.hlsUrl);
      return r.status === 200 ? r.text() : null;
    }, 15_000, 200, 'multivariant playlist');
    const uris = master.split('\n').filter((l) => l && !l.startsWith('#'));
    expect(uris.map((u) => u.split('?')[0])).toEqual(['a128/index.m3u8']);
    const mediaUrl = new URL(uris[0]!, stream.hlsUrl).toString();
    const media = async () => (await fetch(mediaUrl)).text();

    // Live, codec checked, nothing in JS needs frames: straight to the native segmenter.
    await waitFor(() => routed(stream.id) === 'segmenter', 5000, 20, "'segmenter' routing");

    // ~3 s live, then a WHEP listener (werift, recvonly Opus, non-trickle).
    await sleep(Math.max(0, 3000 - (Date.now() - liveAt)));
    expect(routed(stream.id)).toBe('segmenter');
    pc = new RTCPeerConnection({
      codecs: { audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 })], video: [] },
      headerExtensions: { audio: [], video: [] },
      iceUseIpv6: false,
      iceAdditionalHostAddresses: ['127.0.0.1'],
    });
    const rtp: Array<{ at: number }> = [];
    const transceiver = pc.addTransceiver('audio', { direction: 'recvonly' });
    transceiver.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe(() => rtp.push({ at: Date.now() }));
    });
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise<void>((resolve) => {
      if (pc!.iceGatheringState === 'complete') return resolve();
      pc!.iceGatheringStateChange.subscribe((s) => s === 'complete' && resolve());
    });
    const whepUrl = `${t.http}/whep/${stream.id}`;
    const beforeJoin = await media();
    const res = await fetch(whepUrl, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription!.sdp });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/sdp');
    const location = new URL(res.headers.get('location')!, whepUrl).toString();
    expect(location).toMatch(new RegExp(`/whep/${stream.id}/[A-Za-z0-9]+$`));
    await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });

    // A tap: every frame reaches JS too ('frames'), and the peer gets RTP from them.
    await waitFor(() => routed(stream.id) === 'frames', 5000, 20, "'frames' routing");
    await waitFor(() => rtp.length > 0, 15_000, 50, 'first RTP packet');
    const firstRtpAt = rtp[0]!.at;
    const duringFirst = segmentsOf(await media());
    await sleep(3000); // A fixed wait on purpose: the peer's RTP is counted over 3 s.
    const received = rtp.filter((p) => p.at >= firstRtpAt && p.at < firstRtpAt + 3000).length;
    // 60 ms Opus packets (src/delivery/webrtc/transcoder.ts FRAME_MS): ~50 in 3 s; a loaded machine may delay some.
    expect(received).toBeGreaterThanOrEqual(35);
    expect(routed(stream.id)).toBe('frames');
    // HLS kept serving while the peer was connected: new segments were listed.
    const duringLast = segmentsOf(await media());
    expect(duringLast.at(-1)!.seq).toBeGreaterThan(duringFirst.at(-1)?.seq ?? -1);

    // The listener leaves: back to the segmenter only.
    const del = await fetch(location, { method: 'DELETE' });
    expect(del.status).toBe(200);
    await pc.close();
    pc = null;
    await waitFor(() => routed(stream.id) === 'segmenter', 5000, 20, "'segmenter' routing after the peer left");
    const afterLeave = await media();

    // The publish ends; within the reconnect window the playlist holds every segment (the last one
    // closed when the publisher left) and stops changing, and every segment is still served.
    expect(await pubExit).toBe(0);
    pub = null;
    const final = await waitFor(async () => {
      const a = await media();
      await sleep(1000);
      return (await media()) === a ? a : null;
    }, 6000, 0, 'the last segment listed');
    expect(final).not.toMatch(/^#EXT-X-DISCONTINUITY$/m);
    expect(final).toContain('#EXT-X-DISCONTINUITY-SEQUENCE:0\n');
    const segs = segmentsOf(final);
    expect(segs.length).toBeGreaterThanOrEqual(5);
    for (let i = 0; i < segs.length; i++) expect(segs[i]!.uri).toMatch(new RegExp(`^${segs[i]!.seq}\\.m4s(\\?|$)`));
    for (const s of segs.slice(0, -1)) expect(Math.abs(s.duration - SEGMENT_SECONDS), `EXTINF of ${s.seq}`).toBeLessThan(0.002);
    expect(segs.at(-1)!.duration).toBeGreaterThan(0);
    expect(segs.at(-1)!.duration).toBeLessThan(SEGMENT_SECONDS + 0.002);
    // Both switches fall inside the listed segments.
    const joinSeq = inProgress(beforeJoin);
    const leaveSeq = inProgress(afterLeave);
    expect(joinSeq).toBeGreaterThanOrEqual(segs[0]!.seq);
    expect(leaveSeq).toBeGreaterThan(joinSeq);
    expect(leaveSeq).toBeLessThanOrEqual(segs.at(-1)!.seq);

    // init + every listed segment, as one file.
    const mapUri = /#EXT-X-MAP:URI="([^"]+)"/.exec(final)![1]!;
    const download = async (uri: string) => {
      const r = await fetch(new URL(uri, mediaUrl));
      expect(r.status, uri).toBe(200);
      return Buffer.from(await r.arrayBuffer());
    };
    const init = await download(mapUri);
    const bodies = await Promise.all(segs.map((s) => download(s.uri)));
    const file = path.join(tmp.dir, 'listed.mp4');
    writeFileSync(file, Buffer.concat([init, ...bodies]));

    // Decodes without an error, to the listed duration.
    const decode = spawn(ffmpeg, ['-hide_banner', '-v', 'error', '-i', file, '-ac', '1', '-ar', '48000', '-f', 's16le', 'pipe:1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let pcmBytes = 0;
    let decodeErr = '';
    decode.stdout!.on('data', (d: Buffer) => (pcmBytes += d.length));
    decode.stderr!.on('data', (d) => (decodeErr += d));
    expect(await exited(decode)).toBe(0);
    expect(decodeErr).toBe('');
    const listed = segs.reduce((n, s) => n + s.duration, 0);
    const decoded = pcmBytes / (48_000 * 2);
    expect(Math.abs(decoded - listed)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(decoded - ((segs.length - 1) * SEGMENT_SECONDS + segs.at(-1)!.duration))).toBeLessThanOrEqual(0.1);

    // Packet timestamps run on across the segments (and the switches): no gap, no overlap.
    const probe = await run(ffprobe, ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'packet=pts,duration', '-of', 'json', file]);
    expect(probe.code, probe.stderr).toBe(0);
    expect(probe.stderr).toBe('');
    const packets = (JSON.parse(probe.stdout) as { packets: Array<{ pts: number; duration?: number }> }).packets;
    expect(packets.length).toBe(Math.round((listed * 48_000) / 1024));
    // Every AAC frame lasts 1024 samples (timescale 48000). FFmpeg 5.1's fragmented-MP4 demuxer
    // gives the very first packet no duration (as for any fMP4 file): it is 1024 like the rest.
    for (const [i, p] of packets.entries()) if (i > 0 || p.duration !== undefined) expect(p.duration, `duration of packet ${i}`).toBe(1024);
    for (let i = 1; i < packets.length; i++) {
      const prev = packets[i - 1]!;
      expect(packets[i]!.pts, `pts of packet ${i}`).toBe(prev.pts + (prev.duration ?? 1024));
    }

    // The whole stream — the segment(s) that left the window are still served — is exactly what
    // the publisher's encoder made: no AAC frame lost, doubled or altered at a routing switch.
    const earlier: Buffer[] = [];
    const query = new URL(segs[0]!.uri, mediaUrl).search;
    for (let seq = 0; seq < segs[0]!.seq; seq++) earlier.push(await download(`${seq}.m4s${query}`));
    const whole = path.join(tmp.dir, 'whole.mp4');
    writeFileSync(whole, Buffer.concat([init, ...earlier, ...bodies]));
    const got = await packetHashes(whole);
    const want = await reference;
    expect(got.length).toBe(want.length);
    expect(got).toEqual(want);

    expect(serverErrors).toEqual([]);
  }, 90_000);
});
