/**
 * Ingest watch and recording (docs/decisions.md "Ingest watch and recording"),
 * with real FFmpeg publishers:
 * - bitrate spike: a `low` (64 kbps) AAC stream fed ~256 kbps raises exactly one `stream.error`
 *   `bitrate_spike` (measuredKbps over 1.5 × nominal) and stays live;
 * - transcoder failure: a server whose FFmpeg cannot run (`SKYLARK_FFMPEG=/nonexistent/ffmpeg`)
 *   raises `stream.error` `transcoder_failed`, lists only the passthrough layer, and that plays;
 * - recording: a stream with `recording: {podcastId}` becomes a draft episode of the podcast with
 *   `sourceStreamId` and the published duration, whose audio decodes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { api, runCli, startCli, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const ffmpeg = ffmpegPath();

/** Publishes `seconds` of AAC over RTMP in real time; noise, so that the encoder spends the whole `kbps`. */
function publishAac(url: string, seconds: number, kbps: number, source = 'anoisesrc=sample_rate=48000:amplitude=0.5'): ChildProcess {
  return spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', source, '-t', String(seconds), '-ac', '2', '-c:a', 'aac', '-b:a', `${kbps}k`, '-f', 'flv', url], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

/** Runs FFmpeg on `args` (bounded); exit code, stderr and the bytes it wrote to stdout. */
function runFfmpeg(args: string[], timeoutMs = 20_000): Promise<{ code: number | string | null; stderr: string; stdoutBytes: number }> {
  return new Promise((resolve) => {
    const p = spawn(ffmpeg, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdoutBytes = 0;
    p.stdout!.on('data', (d: Buffer) => (stdoutBytes += d.length));
    p.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.once('exit', (c, s) => {
      clearTimeout(timer);
      resolve({ code: c ?? s, stderr, stdoutBytes });
    });
  });
}

/** The `stream.error` events of a stream, oldest first, through the events API. */
async function streamErrors(base: string, key: string, streamId: string): Promise<Array<{ code: string; [k: string]: unknown }>> {
  const r = await api(base, key, 'GET', '/v2/events?type=stream.error&limit=100');
  expect(r.status).toBe(200);
  return (r.json.data as Array<{ data: { object: { id: string }; error: { code: string } } }>)
    .filter((e) => e.data.object.id === streamId)
    .map((e) => e.data.error)
    .reverse();
}

describe('ingest watch (in process)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startInProcess();
  });
  afterAll(async () => {
    await t?.close();
  });
  const getStream = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json;

  it('raises one bitrate_spike for a 64 kbps stream fed 256 kbps, and keeps it live', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Too fast', quality: 'low', reconnectWindow: 5 })).json;
    expect(s.quality).toBe('low');
    const pub = publishAac(`${s.rtmpUrl}/${s.streamKey}`, 9, 256);
    try {
      await waitFor(async () => (await getStream(s.id)).status === 'live', 15_000, 100, 'live');
      const errors = await waitFor(async () => {
        const e = await streamErrors(t.http, t.secretKey, s.id);
        return e.length > 0 ? e : null;
      }, 15_000, 200, 'stream.error');
      expect(errors[0]).toMatchObject({ code: 'bitrate_spike', nominalKbps: 64 });
      expect(errors[0]!.measuredKbps).toBeGreaterThan(96);
      expect(typeof errors[0]!.message).toBe('string');
      // Still live, the publisher still connected.
      expect((await getStream(s.id)).status).toBe('live');
      expect(pub.exitCode).toBeNull();
      expect(await exited(pub)).toBe(0); // never disconnected: it published all 9 s
      expect((await getStream(s.id)).status).toBe('live'); // the reconnect window runs
      // At most once a minute: still exactly one after the whole over-rate publish.
      expect((await streamErrors(t.http, t.secretKey, s.id)).map((e) => e.code)).toEqual(['bitrate_spike']);
      const playlist = await fetch(s.hlsUrl);
      expect(playlist.status).toBe(200);
    } finally {
      pub.kill('SIGKILL');
    }
  });

  it('makes a draft episode of a recorded stream when it ends', async () => {
    const pod = await api(t.http, t.secretKey, 'POST', '/v2/podcasts', { title: 'Recorded live' });
    expect(pod.status).toBe(201);
    const created = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Live show', recording: { podcastId: pod.json.id }, reconnectWindow: 1 });
    expect(created.status).toBe(201);
    const s = created.json;
    expect(s.recording).toEqual({ podcastId: pod.json.id });
    const pub = publishAac(`${s.rtmpUrl}/${s.streamKey}`, 6, 128, 'sine=frequency=440:sample_rate=48000');
    expect(await exited(pub)).toBe(0);
    await waitFor(async () => (await getStream(s.id)).status === 'idle', 15_000, 200, 'ended');
    const episodes = await waitFor(async () => {
      const r = await api(t.http, t.secretKey, 'GET', `/v2/podcasts/${pod.json.id}/episodes`);
      // The row appears first; its audio once probed and stored.
      return r.status === 200 && r.json.data.length > 0 && r.json.data[0].audio ? r.json.data : null;
    }, 15_000, 200, 'draft episode with audio');
    expect(episodes).toHaveLength(1);
    const ep = episodes[0];
    expect(ep).toMatchObject({ status: 'draft', sourceStreamId: s.id, podcastId: pod.json.id, title: 'Live show' });
    expect(ep.audio.mimeType).toMatch(/^audio\//);
    expect(Math.abs(ep.audio.durationSeconds - 6)).toBeLessThanOrEqual(1);
    expect(typeof ep.audioUrl).toBe('string');
    // The recorded file decodes end to end (drafts are not public: read it from the media store).
    const file = path.join(t.dataDir, 'media', pod.json.id, path.basename(new URL(ep.audioUrl).pathname));
    const d = await runFfmpeg(['-hide_banner', '-v', 'error', '-i', file, '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1']);
    expect(d.code, d.stderr).toBe(0);
    expect(d.stderr.trim()).toBe('');
    expect(Math.abs(d.stdoutBytes / 2 / 48_000 - 6)).toBeLessThanOrEqual(1);
  });
});

describe('ladder without a working FFmpeg (CLI server)', () => {
  const tmp = tempDir();
  let server: Awaited<ReturnType<typeof startCli>>;
  let key: string;
  beforeAll(async () => {
    key = JSON.parse(await runCli(['accounts', 'create', '--name', 'NoFfmpeg', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey;
    server = await startCli(tmp.dir, { SKYLARK_FFMPEG: '/nonexistent/ffmpeg' });
  });
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('raises transcoder_failed and keeps serving the passthrough layer, which plays', async () => {
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Passthrough only', reconnectWindow: 1 })).json;
    const pub = publishAac(`${s.rtmpUrl}/${s.streamKey}`, 20, 128, 'sine=frequency=440:sample_rate=48000');
    try {
      const errors = await waitFor(async () => {
        const e = await streamErrors(server.http, key, s.id);
        return e.length > 0 ? e : null;
      }, 15_000, 200, 'stream.error');
      expect(errors.map((e) => e.code)).toEqual(['transcoder_failed']);
      const master = await waitFor(async () => {
        const r = await fetch(s.hlsUrl);
        return r.status === 200 ? r.text() : null;
      }, 15_000, 200, 'multivariant playlist');
      const uris = master.split('\n').filter((l) => l && !l.startsWith('#'));
      expect(uris.map((u) => u.split('/')[0])).toEqual(['a128']);
      expect((master.match(/#EXT-X-STREAM-INF:/g) ?? []).length).toBe(1);
      expect((await fetch(new URL('a64/index.m3u8', s.hlsUrl))).status).toBe(404);
      // The passthrough layer plays (read once it holds a few segments).
      await waitFor(async () => ((await (await fetch(new URL(uris[0]!, s.hlsUrl))).text()).match(/#EXTINF/g) ?? []).length >= 3, 15_000, 200, 'three segments');
      const d = await runFfmpeg(['-hide_banner', '-v', 'error', '-live_start_index', '0', '-i', s.hlsUrl, '-t', '3', '-vn', '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1']);
      expect(d.code, d.stderr).toBe(0);
      expect(d.stdoutBytes / 2 / 48_000).toBeGreaterThanOrEqual(2.9);
      expect(server.stderr()).toMatch(/transcoder|ffmpeg/i);
      expect((await api(server.http, key, 'GET', `/v2/streams/${s.id}`)).json.status).toBe('live');
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });
});
