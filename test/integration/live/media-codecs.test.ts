/**
 * Every codec through the whole ladder: a real client publishes AAC (FFmpeg,
 * classic FLV), MP3 (FFmpeg, classic FLV) and Opus (the E-RTMP test publisher), each at quality
 * `high` so the ladder has three layers (256/128/64, Opus 320/128/64). The three publishes run at
 * the same time; once each publisher has left and every playlist holds its last segment (within
 * the reconnect window: an idle stream's playlists answer 404, docs/streams.md), for EVERY layer:
 * - FFmpeg reads the layer's media playlist as it stands then (closed with EXT-X-ENDLIST into a
 *   local copy whose URIs point at the server) and decodes it without an error, ≥ 6 s of audio, with
 *   the stream's codec and sample rate;
 * - every segment but the last (the publisher's flush) lasts 2 s ± 0.5 s, and FFprobe agrees with
 *   EXTINF on the segment it probes;
 * - the segments with the same media sequence number start at the same PTS in every layer (first
 *   packet of init + segment, within one audio frame), so a player switches without a gap.
 * The multivariant playlist lists every layer, top first, with BANDWIDTH, AVERAGE-BANDWIDTH, CODECS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';
import { makeOpusFile, publishOpus } from '../../helpers/ertmp-publisher.js';

const ffmpeg = ffmpegPath();
const ffprobe = ffmpeg === 'ffmpeg' ? 'ffprobe' : path.join(path.dirname(ffmpeg), 'ffprobe');
const PUBLISH_SECONDS = 11;

interface Case {
  codec: 'aac' | 'mp3' | 'opus';
  /** FFprobe's codec_name of the decoded layers. */
  codecName: string;
  sampleRate: number;
  /** One audio frame (s): the PTS tolerance across layers. */
  frameSeconds: number;
  layers: string[];
  codecs: RegExp;
  ext: 'm4s' | 'ts';
}

const CASES: Case[] = [
  { codec: 'aac', codecName: 'aac', sampleRate: 48_000, frameSeconds: 1024 / 48_000, layers: ['a256', 'a128', 'a64'], codecs: /^mp4a\.40\.2$/, ext: 'm4s' },
  { codec: 'mp3', codecName: 'mp3', sampleRate: 44_100, frameSeconds: 1152 / 44_100, layers: ['a256', 'a128', 'a64'], codecs: /^mp4a\.40\.34$/, ext: 'ts' },
  { codec: 'opus', codecName: 'opus', sampleRate: 48_000, frameSeconds: 0.02, layers: ['a320', 'a128', 'a64'], codecs: /^opus$/, ext: 'm4s' },
];

let t: TestServer;
const tmp = tempDir('skylark-codecs-');
/** Stream objects by codec. */
const streams = new Map<string, any>();
/** The multivariant playlist as fetched while live, by codec. */
const liveMultivariant = new Map<string, string>();
/** Every layer's media playlist once the publisher left and the playlist stopped changing, by codec. */
const finalLayers = new Map<string, Array<{ name: string; url: string; text: string }>>();

const getStream = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json;

beforeAll(async () => {
  t = await startInProcess();
  const opusFile = makeOpusFile(path.join(tmp.dir, 'sine.ogg'), 4);
  const publishers: Array<Promise<unknown>> = [];
  for (const c of CASES) {
    const r = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `Ladder ${c.codec}`, codec: c.codec, quality: 'high', reconnectWindow: 300 });
    expect(r.status).toBe(201);
    const s = r.json;
    streams.set(c.codec, s);
    const url = `${s.rtmpUrl}/${s.streamKey}`;
    if (c.codec === 'aac') publishers.push(exited(publish(url, { seconds: PUBLISH_SECONDS, codecArgs: ['-ac', '2', '-c:a', 'aac', '-b:a', '256k'] })));
    else if (c.codec === 'mp3') publishers.push(exited(publish(url, { seconds: PUBLISH_SECONDS, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '256k'] })));
    else publishers.push(publishOpus(s.rtmpUrl, s.streamKey, opusFile, PUBLISH_SECONDS).done);
  }
  // While live: the multivariant playlist once every layer has measured segments.
  await Promise.all(
    CASES.map(async (c) => {
      const s = streams.get(c.codec);
      liveMultivariant.set(
        c.codec,
        await waitFor(async () => {
          const r = await fetch(s.hlsUrl);
          if (r.status !== 200) return null;
          const text = await r.text();
          const uris = text.split('\n').filter((l) => l && !l.startsWith('#'));
          if (uris.length < c.layers.length) return null;
          for (const u of uris) {
            const m = await (await fetch(new URL(u, s.hlsUrl))).text();
            if ((m.match(/#EXTINF/g) ?? []).length < 2) return null;
          }
          // Fetched again: BANDWIDTH is measured now.
          return (await fetch(s.hlsUrl)).text();
        }, 25_000, 250, `${c.codec}: every layer with two segments`),
      );
    }),
  );
  const results = await Promise.all(publishers);
  for (const r of results) expect(r === 0 || (typeof r === 'object' && (r as { ok: boolean }).ok)).toBe(true);
  // Within the reconnect window: every layer's last segment is listed once its playlists stop changing.
  await Promise.all(
    CASES.map(async (c) => {
      const s = streams.get(c.codec);
      expect((await getStream(s.id)).status).toBe('live');
      const final = await waitFor(async () => {
        // Compared without the session query each listing carries.
        const bare = (ls: Array<{ text: string }>) => ls.map((l) => l.text.replace(/\?[^"\n]*/g, '')).join('\n');
        const a = bare(await layerPlaylists(s));
        await sleep(1500);
        const b = await layerPlaylists(s);
        return bare(b) === a ? b : null;
      }, 20_000, 0, `${c.codec}: playlists final`);
      finalLayers.set(c.codec, final);
    }),
  );
}, 90_000);

afterAll(async () => {
  await t?.close();
  tmp.cleanup();
});

/** The layers' (media playlist URL, text) of a stream, from its multivariant playlist. */
async function layerPlaylists(s: any): Promise<Array<{ name: string; url: string; text: string }>> {
  const master = await (await fetch(s.hlsUrl)).text();
  const out = [];
  for (const uri of master.split('\n').filter((l) => l && !l.startsWith('#'))) {
    const url = new URL(uri, s.hlsUrl).toString();
    out.push({ name: uri.split('/')[0]!, url, text: await (await fetch(url)).text() });
  }
  return out;
}

/** Segment (sequence, duration, uri) entries of a media playlist. */
function segmentsOf(text: string): Array<{ seq: number; duration: number; uri: string }> {
  const first = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(text)![1]);
  const out: Array<{ seq: number; duration: number; uri: string }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^#EXTINF:([\d.]+),/.exec(lines[i]!);
    if (m) out.push({ seq: first + out.length, duration: Number(m[1]), uri: lines[i + 1]! });
  }
  return out;
}

/** First packet PTS (s) and the summed packet durations (s) of one segment (with its init section). */
async function probeSegment(file: string): Promise<{ firstPts: number; duration: number; codec: string; sampleRate: number }> {
  const r = await run(ffprobe, ['-v', 'error', '-show_entries', 'packet=pts_time,duration_time:stream=codec_name,sample_rate,codec_type', '-of', 'json', file]);
  expect(r.code, r.stderr).toBe(0);
  const j = JSON.parse(r.stdout) as { packets: Array<{ pts_time: string; duration_time?: string }>; streams: Array<{ codec_name: string; sample_rate: string; codec_type: string }> };
  // No phantom video track: the audio, and in MPEG-TS the timed ID3 stream the PMT declares for
  // now playing (docs/behaviour.md §11; ffprobe: a `timed_id3` data stream).
  const kinds = j.streams.map((s) => (s.codec_type === 'data' ? `data:${s.codec_name}` : s.codec_type));
  expect(kinds.filter((k) => k !== 'data:timed_id3')).toEqual(['audio']);
  expect(j.packets.length).toBeGreaterThan(0);
  // FFmpeg 5.1's MP4 demuxer gives Opus packets no duration: then take it from the PTS steps.
  const pts = j.packets.map((p) => Number(p.pts_time));
  const known = j.packets.every((p) => p.duration_time !== undefined && p.duration_time !== 'N/A');
  const duration = known
    ? j.packets.reduce((n, p) => n + Number(p.duration_time), 0)
    : pts.length < 2
      ? 0
      : ((pts[pts.length - 1]! - pts[0]!) * pts.length) / (pts.length - 1);
  return {
    firstPts: pts[0]!,
    duration,
    codec: j.streams[0]!.codec_name,
    sampleRate: Number(j.streams[0]!.sample_rate),
  };
}

describe.each(CASES)('$codec through the ladder', (c) => {
  it('lists every layer in the multivariant playlist with BANDWIDTH, AVERAGE-BANDWIDTH and CODECS', () => {
    const text = liveMultivariant.get(c.codec)!;
    expect(text.startsWith('#EXTM3U\n')).toBe(true);
    const variants = [...text.matchAll(/^#EXT-X-STREAM-INF:(.*)\n(\S+)$/gm)].map((m) => ({
      attrs: Object.fromEntries([...m[1]!.matchAll(/([A-Z-]+)=("[^"]*"|[^,]*)/g)].map((a) => [a[1]!, a[2]!.replace(/^"|"$/g, '')])),
      uri: m[2]!,
    }));
    expect(variants.map((v) => v.uri.split('/')[0])).toEqual(c.layers);
    for (const v of variants) {
      expect(Number(v.attrs.BANDWIDTH)).toBeGreaterThan(0);
      expect(Number(v.attrs['AVERAGE-BANDWIDTH'])).toBeGreaterThan(0);
      expect(Number(v.attrs['AVERAGE-BANDWIDTH'])).toBeLessThanOrEqual(Number(v.attrs.BANDWIDTH));
      expect(v.attrs.CODECS).toMatch(c.codecs);
    }
    // Lower layers are lower: the encoded ones are measured near their nominal bitrate.
    const bw = variants.map((v) => Number(v.attrs['AVERAGE-BANDWIDTH']));
    expect(bw[1]).toBeGreaterThan(bw[2]!);
    expect(bw[2]).toBeGreaterThan(64_000 * 0.6);
    expect(bw[2]).toBeLessThan(64_000 * 1.5);
  });

  it('every layer decodes with FFmpeg for ≥ 6 s, with the right codec and sample rate, in 2 s segments', async () => {
    const layers = finalLayers.get(c.codec)!;
    expect(layers.map((l) => l.name)).toEqual(c.layers);
    await Promise.all(
      layers.map(async (l) => {
        const vod = closedCopy(l, `${c.codec}-${l.name}.m3u8`);
        const segs = segmentsOf(l.text);
        expect(segs.length).toBeGreaterThanOrEqual(4);
        for (const seg of segs.slice(0, -1)) expect(Math.abs(seg.duration - 2), `${c.codec}/${l.name} #${seg.seq}: ${seg.duration}`).toBeLessThanOrEqual(0.5);
        for (const seg of segs) expect(seg.uri.split('?')[0]).toBe(`${seg.seq}.${c.ext}`);

        const d = await decode(vod, c.sampleRate);
        expect(d.code, `${c.codec}/${l.name}: ${d.stderr}`).toBe(0);
        expect(d.stderr.trim(), `${c.codec}/${l.name}`).toBe('');
        expect(d.seconds, `${c.codec}/${l.name}`).toBeGreaterThanOrEqual(6);
        const info = await run(ffprobe, ['-v', 'error', '-protocol_whitelist', 'file,http,tcp', '-show_entries', 'stream=codec_name,sample_rate,codec_type', '-of', 'json', vod]);
        expect(info.code, info.stderr).toBe(0);
        const j = JSON.parse(info.stdout);
        const streams = j.streams.filter((x: any) => !(x.codec_type === 'data' && x.codec_name === 'timed_id3'));
        expect(streams.map((x: any) => [x.codec_type, x.codec_name, Number(x.sample_rate)])).toEqual([['audio', c.codecName, c.sampleRate]]);
      }),
    );
  });

  it('cuts every layer at the same media sequence numbers and PTS', async () => {
    const layers = finalLayers.get(c.codec)!;
    const bySeq = layers.map((l) => new Map(segmentsOf(l.text).map((x) => [x.seq, x])));
    // The sequence numbers every layer has, but not the last (flushed) segment.
    const common = [...bySeq[0]!.keys()].filter((q) => bySeq.every((m) => m.has(q) && m.has(q + 1)));
    expect(common.length).toBeGreaterThanOrEqual(2);
    for (const seq of [common[0]!, common[common.length - 1]!]) {
      const probes = await Promise.all(
        layers.map(async (l, i) => {
          const seg = bySeq[i]!.get(seq)!;
          const body = Buffer.from(await (await fetch(new URL(seg.uri, l.url))).arrayBuffer());
          let bytes = body;
          if (c.ext === 'm4s') {
            const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(l.text)![1]!;
            bytes = Buffer.concat([Buffer.from(await (await fetch(new URL(init, l.url))).arrayBuffer()), body]);
          }
          const file = path.join(tmp.dir, `${c.codec}-${l.name}-${seq}.${c.ext === 'm4s' ? 'mp4' : 'ts'}`);
          writeFileSync(file, bytes);
          const p = await probeSegment(file);
          expect(p.codec).toBe(c.codecName);
          expect(p.sampleRate).toBe(c.sampleRate);
          // The playlist's EXTINF is the segment's real duration (within a frame).
          expect(Math.abs(p.duration - seg.duration), `${c.codec}/${l.name} #${seq}: probed ${p.duration}, EXTINF ${seg.duration}`).toBeLessThanOrEqual(c.frameSeconds + 0.001);
          return p;
        }),
      );
      for (const p of probes.slice(1)) {
        expect(Math.abs(p.firstPts - probes[0]!.firstPts), `${c.codec} #${seq}: ${probes.map((x) => x.firstPts).join(' / ')}`).toBeLessThanOrEqual(c.frameSeconds + 0.001);
      }
    }
  });
});

/**
 * A local copy of a layer's media playlist, closed with EXT-X-ENDLIST, whose URIs point at the
 * server (FFmpeg reads it to its end, as it read an ended stream's playlist). Returns its path.
 */
function closedCopy(l: { url: string; text: string }, name: string): string {
  const abs = (u: string) => new URL(u, l.url).toString();
  const lines = l.text
    .trim()
    .split('\n')
    .map((x) => (x && !x.startsWith('#') ? abs(x) : x.replace(/URI="([^"]+)"/, (_m, u: string) => `URI="${abs(u)}"`)))
    .filter((x) => !x.startsWith('#EXT-X-PRELOAD-HINT') && !x.startsWith('#EXT-X-SERVER-CONTROL'));
  const file = path.join(tmp.dir, name);
  writeFileSync(file, `${lines.join('\n')}\n#EXT-X-ENDLIST\n`);
  return file;
}

/** Decodes `url` (or a local playlist) with FFmpeg to mono PCM at `sampleRate`: exit code, stderr, seconds decoded. */
function decode(url: string, sampleRate: number): Promise<{ code: number | string | null; stderr: string; seconds: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(ffmpeg, ['-hide_banner', '-v', 'error', '-protocol_whitelist', 'file,http,tcp', '-i', url, '-vn', '-f', 's16le', '-ac', '1', '-ar', String(sampleRate), 'pipe:1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let bytes = 0;
    let stderr = '';
    p.stdout!.on('data', (d: Buffer) => (bytes += d.length));
    p.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    p.once('error', reject);
    p.once('exit', (c, sig) => {
      clearTimeout(timer);
      resolve({ code: c ?? sig, stderr, seconds: bytes / 2 / sampleRate });
    });
  });
}
