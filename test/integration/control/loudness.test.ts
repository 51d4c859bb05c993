/**
 * Episode loudness (docs/podcasts.md "Loudness"), checked on what the server serves over HTTP with
 * FFmpeg's own `ebur128` meter (ITU-R BS.1770-4), never on what the server says it computed:
 * - tones and speech-like signals (pink noise with level changes) at −30, −20 and −8 LUFS, mono and
 *   stereo, MP3, M4A (AAC) and ADTS AAC, uploaded to a podcast with the default target: the served
 *   `audioUrl` measures −16 ± 1 LUFS with true peak ≤ −1 dBTP (± 0.5), keeps the codec, bit rate,
 *   sample rate and channels; `originalAudioUrl` serves the upload byte for byte; the episode's
 *   `loudness` numbers agree with the meter; the feed lists the original as
 *   `podcast:alternateEnclosure`;
 * - with `loudnessTarget: null` the upload is only measured: `audioUrl` serves it unchanged;
 * - new audio while the last is still being processed: the newest upload ends measured and
 *   normalised, and no file of the first is left;
 * - `loudnessTarget` defaults, validation (−24…−10, null) and PATCH.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';

let s: TestServer;
let key: string;
const ffmpeg = ffmpegPath();

/** FFmpeg's BS.1770-4 meter on `file`: integrated LUFS, true peak dBTP, LRA LU. */
async function meter(file: string): Promise<{ i: number; tp: number; lra: number }> {
  const r = await run(ffmpeg, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true:framelog=verbose', '-f', 'null', '-'], 60_000);
  expect(r.code, r.stderr.slice(-500)).toBe(0);
  const summary = r.stderr.slice(r.stderr.lastIndexOf('Summary:'));
  const i = Number(/I:\s+(-?[\d.]+) LUFS/.exec(summary)![1]);
  const lra = Number(/LRA:\s+(-?[\d.]+) LU/.exec(summary)![1]);
  const tp = Number(/True peak:\s*\n\s*Peak:\s+(-?[\d.]+)/.exec(summary)![1]);
  return { i, tp, lra };
}

/** FFmpeg's description of the first audio stream: codec, sample rate, channel layout, kb/s. */
async function streamOf(file: string): Promise<{ codec: string; rate: number; layout: string; kbps: number | null; format: string }> {
  const r = await run(ffmpeg, ['-hide_banner', '-i', file]);
  const m = /Stream #0:\d+\S*: Audio: ([a-z0-9]+)[^,\n]*, (\d+) Hz, ([^,\n]+), [^,\n]+(?:, (\d+) kb\/s)?/.exec(r.stderr)!;
  return { codec: m[1]!, rate: Number(m[2]), layout: m[3]!, kbps: m[4] ? Number(m[4]) : null, format: /Input #0, ([^\s,]+)/.exec(r.stderr)![1]! };
}

/** Downloads `url` into the data dir; the bytes and their file. */
async function download(url: string, name: string): Promise<{ file: string; bytes: Buffer }> {
  const r = await fetch(url);
  expect(r.status, url).toBe(200);
  const bytes = Buffer.from(await r.arrayBuffer());
  const file = path.join(s.dataDir, name);
  writeFileSync(file, bytes);
  return { file, bytes };
}

interface Case {
  name: string;
  /** lavfi source: a tone, or pink noise whose level changes every second (speech-like). */
  signal: 'tone' | 'speech';
  lufs: number;
  channels: 1 | 2;
  ext: 'mp3' | 'm4a' | 'aac';
  kbps: number;
}

const SOURCES = {
  tone: 'sine=frequency=997:sample_rate=44100:duration=10',
  speech: "anoisesrc=color=pink:sample_rate=44100:amplitude=0.3:duration=10:seed=7,volume='if(lt(mod(t,1.3),0.8),1,0.12)':eval=frame",
};
const CODEC = { mp3: ['-c:a', 'libmp3lame'], m4a: ['-c:a', 'aac', '-f', 'mp4'], aac: ['-c:a', 'aac', '-f', 'adts'] };
const MIME = { mp3: 'audio/mpeg', m4a: 'audio/x-m4a', aac: 'audio/aac' };

/** ~10 s of `c.signal` at `c.lufs` (the level set from FFmpeg's own meter of the raw signal), encoded as asked. */
async function makeAudio(c: Case): Promise<Buffer> {
  const raw = path.join(s.dataDir, `${c.name}.wav`);
  execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', SOURCES[c.signal], '-ac', String(c.channels), '-c:a', 'pcm_f32le', raw], { timeout: 30_000 });
  let gain = c.lufs - (await meter(raw)).i;
  const out = path.join(s.dataDir, `${c.name}.${c.ext}`);
  // A hot signal is soft-clipped like a loud master and loses some loudness to it: correct the gain from the encoded file's meter.
  for (let tries = 0; ; tries++) {
    execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-i', raw, '-af', `volume=${gain.toFixed(2)}dB,asoftclip=type=tanh`, ...CODEC[c.ext], '-b:a', `${c.kbps}k`, out], { timeout: 30_000 });
    const m = await meter(out);
    if (Math.abs(m.i - c.lufs) < 0.5 || tries === 3) {
      expect(Math.abs(m.i - c.lufs), `${c.name} is made at ${c.lufs} LUFS`).toBeLessThan(1);
      return readFileSync(out);
    }
    gain += c.lufs - m.i;
  }
}

async function createPodcast(body: object): Promise<string> {
  const p = await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Loudness show', ...body });
  expect(p.status, p.text).toBe(201);
  return p.json.id;
}

/** Creates an episode, uploads `bytes`, and waits for its `loudness` to appear. */
async function uploadAndMeasure(pid: string, title: string, bytes: Buffer, ext: Case['ext']): Promise<{ uploaded: any; measured: any }> {
  const e = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title })).json;
  const r = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${e.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': MIME[ext] }, body: bytes });
  const uploaded = (await r.json()) as any;
  expect(r.status, JSON.stringify(uploaded)).toBe(200);
  const measured = await waitFor(async () => {
    const g = await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${e.id}`);
    return g.json.loudness ? g.json : null;
  }, 60_000, 200, `loudness of ${title}`);
  return { uploaded, measured };
}

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
});
afterAll(async () => {
  await s?.close();
});

describe('loudnessTarget', () => {
  it('defaults to −16 LUFS, takes −24…−10 or null, and PATCH changes it', async () => {
    const dflt = await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Default target' });
    expect(dflt.json.loudnessTarget).toBe(-16);
    const off = await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Off', loudnessTarget: null });
    expect(off.json.loudnessTarget).toBeNull();
    for (const bad of [-25, -9, 'loud']) {
      const r = await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Bad', loudnessTarget: bad });
      expect(r.status, r.text).toBe(400);
      expect(r.json.error.param).toBe('loudnessTarget');
    }
    const p = await api(s.http, key, 'PATCH', `/v2/podcasts/${dflt.json.id}`, { loudnessTarget: -23 });
    expect(p.status, p.text).toBe(200);
    expect(p.json.loudnessTarget).toBe(-23);
    expect((await api(s.http, key, 'PATCH', `/v2/podcasts/${dflt.json.id}`, { loudnessTarget: null })).json.loudnessTarget).toBeNull();
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${dflt.json.id}`)).json.loudnessTarget).toBeNull();
  });
});

describe('normalisation to the default −16 LUFS, measured on the served audio', () => {
  const cases: Case[] = [
    { name: 'speech-stereo-mp3-quiet', signal: 'speech', lufs: -30, channels: 2, ext: 'mp3', kbps: 128 },
    { name: 'speech-mono-m4a-mid', signal: 'speech', lufs: -20, channels: 1, ext: 'm4a', kbps: 64 },
    { name: 'tone-stereo-aac-loud', signal: 'tone', lufs: -8, channels: 2, ext: 'aac', kbps: 128 },
    { name: 'tone-mono-mp3-quiet', signal: 'tone', lufs: -30, channels: 1, ext: 'mp3', kbps: 96 },
    { name: 'speech-stereo-m4a-loud', signal: 'speech', lufs: -8, channels: 2, ext: 'm4a', kbps: 128 },
  ];
  let pid: string;
  beforeAll(async () => {
    pid = await createPodcast({});
  });

  for (const c of cases) {
    it(`${c.name}: ${c.lufs} LUFS ${c.channels === 1 ? 'mono' : 'stereo'} ${c.ext} → −16 LUFS, true peak ≤ −1 dBTP`, async () => {
      const bytes = await makeAudio(c);
      const { uploaded, measured } = await uploadAndMeasure(pid, c.name, bytes, c.ext);
      expect(uploaded.loudness).toBeNull(); // measured after the upload answered
      const l = measured.loudness;
      expect(l).toMatchObject({ normalized: true, target: -16, originalAudioUrl: uploaded.audioUrl });
      expect(['linear', 'dynamic']).toContain(l.method);
      expect(measured.audioUrl).not.toBe(uploaded.audioUrl);
      expect(measured.audio.mimeType).toBe(MIME[c.ext]);

      const pub = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: measured.id });
      expect(pub.status, pub.text).toBe(200);
      expect(pub.json.audioUrl).toBe(measured.audioUrl);

      // What is served: −16 ± 1 LUFS, true peak ≤ −1 dBTP (± 0.5), as the episode says.
      const served = await download(measured.audioUrl, `${c.name}-served.${c.ext}`);
      expect(served.bytes.length).toBe(measured.audio.sizeBytes);
      const m = await meter(served.file);
      expect(Math.abs(m.i - -16), `integrated ${m.i} LUFS`).toBeLessThanOrEqual(1);
      expect(m.tp, `true peak ${m.tp} dBTP`).toBeLessThanOrEqual(-0.5);
      expect(Math.abs(l.integratedLufs - m.i)).toBeLessThanOrEqual(0.2);
      expect(Math.abs(l.truePeakDbtp - m.tp)).toBeLessThanOrEqual(0.2);
      expect(Math.abs(l.lraLu - m.lra)).toBeLessThanOrEqual(0.2);

      // Same codec, container, sample rate and channels; the bit rate of the upload.
      const before = await streamOf(path.join(s.dataDir, `${c.name}.${c.ext}`));
      const after = await streamOf(served.file);
      expect({ codec: after.codec, rate: after.rate, layout: after.layout, format: after.format }).toEqual({ codec: before.codec, rate: before.rate, layout: before.layout, format: before.format });
      if (c.ext !== 'aac') expect(Math.abs(after.kbps! - c.kbps)).toBeLessThanOrEqual(c.kbps * 0.1);

      // The original, byte for byte, and its measurement.
      const original = await download(l.originalAudioUrl, `${c.name}-original.${c.ext}`);
      expect(original.bytes.equals(bytes)).toBe(true);
      const om = await meter(original.file);
      expect(Math.abs(l.original.integratedLufs - om.i)).toBeLessThanOrEqual(0.2);
      expect(Math.abs(l.original.integratedLufs - c.lufs)).toBeLessThanOrEqual(1);

      // The feed: the normalised file is the enclosure, the original an alternate enclosure.
      const xml = await (await fetch(`${s.http}/feed/${pid}.xml`)).text();
      const item = xml.split('<item>').find((x) => x.includes(`<title>${c.name}</title>`))!;
      expect(item).toContain(`<enclosure url="${measured.audioUrl}" length="${measured.audio.sizeBytes}" type="${MIME[c.ext]}"/>`);
      expect(item).toMatch(new RegExp(`<podcast:alternateEnclosure type="${MIME[c.ext].replace('/', '\\/')}" length="${bytes.length}"[^>]*>\\s*<podcast:source uri="${l.originalAudioUrl.replace(/[.?]/g, '\\$&')}"/>`));
    });
  }
});

describe('without a target', () => {
  it('measures the upload and serves it as it came', async () => {
    const pid = await createPodcast({ loudnessTarget: null });
    const c: Case = { name: 'speech-stereo-mp3-off', signal: 'speech', lufs: -20, channels: 2, ext: 'mp3', kbps: 96 };
    const bytes = await makeAudio(c);
    const { uploaded, measured } = await uploadAndMeasure(pid, c.name, bytes, c.ext);
    expect(measured.audioUrl).toBe(uploaded.audioUrl);
    expect(measured.loudness).toMatchObject({ normalized: false, target: null, method: null, originalAudioUrl: null, original: null });
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: measured.id })).status).toBe(200);
    const served = await download(measured.audioUrl, `${c.name}-served.mp3`);
    expect(served.bytes.equals(bytes)).toBe(true);
    const m = await meter(served.file);
    expect(Math.abs(measured.loudness.integratedLufs - m.i)).toBeLessThanOrEqual(0.2);
    expect(Math.abs(measured.loudness.truePeakDbtp - m.tp)).toBeLessThanOrEqual(0.2);
    expect(Math.abs(measured.loudness.lraLu - m.lra)).toBeLessThanOrEqual(0.2);
    expect(await (await fetch(`${s.http}/feed/${pid}.xml`)).text()).not.toContain('podcast:alternateEnclosure');
  });
});

describe('new audio while the last is still being processed', () => {
  it('ends with the newest upload measured and normalised, and no file of the first left', async () => {
    const pid = await createPodcast({});
    const first = await makeAudio({ name: 'replaced-first', signal: 'tone', lufs: -30, channels: 1, ext: 'mp3', kbps: 64 });
    const second = await makeAudio({ name: 'replaced-second', signal: 'speech', lufs: -20, channels: 1, ext: 'mp3', kbps: 64 });
    const e = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Replaced' })).json;
    const put = (body: Buffer) => fetch(`${s.http}/v2/podcasts/${pid}/episodes/${e.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body });
    expect((await put(first)).status).toBe(200);
    const up = (await (await put(second)).json()) as any;
    const ep = await waitFor(async () => {
      const g = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${e.id}`)).json;
      return g.loudness ? g : null;
    }, 60_000, 200, 'loudness of the second upload');
    expect(ep.loudness).toMatchObject({ normalized: true, originalAudioUrl: up.audioUrl });
    expect(Math.abs(ep.loudness.original.integratedLufs - -20)).toBeLessThanOrEqual(1);
    // Only the second upload and its copy are on disk for this episode.
    const files = readdirSync(path.join(s.dataDir, 'media', pid)).filter((f) => f.startsWith(`${e.id}-`));
    expect(files.sort()).toEqual([path.basename(new URL(ep.audioUrl).pathname), path.basename(new URL(up.audioUrl).pathname)].sort());
    expect(readFileSync(path.join(s.dataDir, 'media', pid, path.basename(new URL(up.audioUrl).pathname))).equals(second)).toBe(true);
  });
});
