/**
 * Live audio end to end with real parts: the CLI creates an account, `skylark serve` runs as a
 * child process, a stream is created over HTTP, a real FFmpeg publishes AAC over RTMP, the stream
 * goes live, FFmpeg reads the HLS back and decodes it, and the stream ends after its window.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const ffmpeg = ffmpegPath();

/** Publishes a 440 Hz sine as AAC in FLV over RTMP in real time for `seconds`. */
function publish(url: string, seconds: number): ChildProcess {
  return spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000`, '-t', String(seconds),
    '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', url], { stdio: ['ignore', 'ignore', 'pipe'] });
}

function exited(p: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (p.exitCode !== null ? resolve(p.exitCode) : p.once('exit', (c) => resolve(c))));
}

describe('live AAC over RTMP to HLS', () => {
  const tmp = tempDir();
  let server: CliServer;
  let key: string;

  beforeAll(async () => {
    const out = JSON.parse(await runCli(['accounts', 'create', '--name', 'Radio', '--plan', 'paid', '--json', '--data-dir', tmp.dir]));
    key = out.secretKey;
    expect(key).toMatch(/^svc_sk_/);
    server = await startCli(tmp.dir);
  });
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('publishes, goes live, serves decodable HLS, and ends after the reconnect window', async () => {
    const created = await api(server.http, key, 'POST', '/v2/streams', { title: 'Sine', reconnectWindow: 2, latencyMode: 'low' });
    expect(created.status).toBe(201);
    const stream = created.json;
    expect(stream.rtmpUrl).toBe(`${server.rtmp}/live/${stream.id}`);

    const pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, 14);
    await waitFor(async () => (await api(server.http, key, 'GET', `/v2/streams/${stream.id}`)).json.status === 'live', 15_000, 100, 'live');
    const live = (await api(server.http, key, 'GET', `/v2/streams/${stream.id}`)).json;
    expect(typeof live.startedAt).toBe('string');

    // Multivariant: the ladder of a medium stream — the ingest passed through (128) and 64 kbps.
    const master = await waitFor(async () => {
      const r = await fetch(stream.hlsUrl);
      return r.status === 200 ? r : null;
    }, 15_000, 200, 'multivariant playlist');
    expect(master.headers.get('content-type')).toBe('application/vnd.apple.mpegurl');
    const masterText = await master.text();
    const variants = [...masterText.matchAll(/#EXT-X-STREAM-INF:BANDWIDTH=(\d+),AVERAGE-BANDWIDTH=(\d+),CODECS="mp4a\.40\.2"\n(\S+)/g)];
    expect(variants.map((v) => v[3]!.split('?')[0])).toEqual(['a128/index.m3u8', 'a64/index.m3u8']);
    expect(Number(variants[0]![1])).toBeGreaterThan(Number(variants[1]![1]));

    for (const v of variants) {
      const mediaUrl = new URL(v[3]!, stream.hlsUrl).toString();
      const media = await waitFor(async () => {
        const r = await fetch(mediaUrl);
        const text = await r.text();
        return (text.match(/#EXTINF/g) ?? []).length >= 3 ? { r, text } : null;
      }, 20_000, 250, 'three segments');
      // Low-Latency HLS on the fMP4 layers (classic players read the same playlist).
      expect(media.text).toContain('#EXT-X-TARGETDURATION:2');
      expect(media.text).toMatch(/#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=[\d.]+/);
      expect(media.text).toMatch(/#EXT-X-PART-INF:PART-TARGET=0\.5\d*/);
      // docs/behaviour.md §12: media object URIs are the same for every listener (no session id on them).
      expect(media.text).toMatch(/#EXT-X-PART:DURATION=[\d.]+,URI="\d+\.\d+\.m4s",INDEPENDENT=YES/);
      expect(media.text).toMatch(/#EXT-X-PRELOAD-HINT:TYPE=PART,URI="\d+\.\d+\.m4s"/);
      for (const d of media.text.matchAll(/#EXTINF:([\d.]+),/g)) expect(Math.abs(Number(d[1]) - 2)).toBeLessThanOrEqual(0.5);
      // EXT-X-PROGRAM-DATE-TIME on every segment, in step with EXTINF (docs/behaviour.md §11), near now.
      const lines = media.text.split('\n');
      const dated: Array<{ at: number; dur: number }> = [];
      lines.forEach((l, i) => {
        if (!l.startsWith('#EXT-X-PROGRAM-DATE-TIME:')) return;
        const inf = lines.slice(i).find((x) => x.startsWith('#EXTINF:'))!;
        dated.push({ at: Date.parse(l.slice('#EXT-X-PROGRAM-DATE-TIME:'.length)), dur: Number(/#EXTINF:([\d.]+)/.exec(inf)![1]) * 1000 });
      });
      expect(dated.length).toBe((media.text.match(/#EXTINF/g) ?? []).length);
      for (let i = 1; i < dated.length; i++) expect(Math.abs(dated[i]!.at - (dated[i - 1]!.at + dated[i - 1]!.dur))).toBeLessThanOrEqual(1);
      expect(Math.abs(dated[dated.length - 1]!.at + dated[dated.length - 1]!.dur - Date.now())).toBeLessThan(5000);

      // Init + one segment: immutable, audio only (no phantom video track), the same URI for everyone.
      const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(media.text)![1]!;
      expect(init).toMatch(/^init-[0-9a-f]{16}\.mp4$/);
      const segName = media.text.split('\n').find((l) => /^\d+\.m4s$/.test(l))!;
      const [initRes, seg] = await Promise.all([fetch(new URL(init, mediaUrl)), fetch(new URL(segName, mediaUrl))]);
      expect(initRes.status).toBe(200);
      expect(seg.status).toBe(200);
      expect(seg.headers.get('content-type')).toBe('video/iso.segment');
      expect(seg.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(seg.headers.get('x-request-id')).toMatch(/^req_/);
      const segFile = path.join(tmp.dir, `seg-${v[3]!.split('/')[0]}.mp4`);
      writeFileSync(segFile, Buffer.concat([Buffer.from(await initRes.arrayBuffer()), Buffer.from(await seg.arrayBuffer())]));
      const probe = spawnSync(ffmpeg, ['-hide_banner', '-i', segFile, '-f', 'null', '-'], { encoding: 'utf8' });
      expect(probe.status).toBe(0);
      const streams = probe.stderr.split('\n').filter((l) => /Stream #\d+:\d+.*: Audio/.test(l) && l.includes('Input') === false);
      expect(probe.stderr).toMatch(/Audio: aac/);
      expect(probe.stderr).not.toMatch(/Video:/);
      expect(streams.length).toBeGreaterThan(0);
    }

    // FFmpeg plays the live playlist from the start of the window until the broadcast ends (the
    // media playlist answers 404 while the stream is idle: docs/streams.md) and decodes it.
    const reader = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-live_start_index', '0', '-i', stream.hlsUrl, '-vn', '-ac', '1', '-ar', '48000', '-f', 's16le', 'pipe:1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let decodedBytes = 0;
    let readerErr = '';
    reader.stdout!.on('data', (d: Buffer) => (decodedBytes += d.length));
    reader.stderr!.on('data', (d) => (readerErr += d));

    expect(await exited(pub)).toBe(0);
    // After the publisher stops: idle once the 2 s reconnect window passes; its playlists answer 404.
    await waitFor(async () => (await api(server.http, key, 'GET', `/v2/streams/${stream.id}`)).json.status === 'idle', 15_000, 200, 'idle');
    expect((await fetch(stream.hlsUrl.replace('index.m3u8', 'a128/index.m3u8'))).status).toBe(404);

    const code = await Promise.race([exited(reader), new Promise<string>((r) => setTimeout(() => r('timeout'), 30_000))]);
    if (code === 'timeout') reader.kill('SIGKILL');
    expect(code).not.toBe('timeout');
    const decodedSeconds = decodedBytes / (48_000 * 2);
    expect(decodedSeconds).toBeGreaterThanOrEqual(6);
    expect(readerErr).not.toMatch(/decod|invalid/i);

    // The same key goes live again: the stream's next broadcast.
    const again = publish(`${stream.rtmpUrl}/${stream.streamKey}`, 2);
    await waitFor(async () => (await api(server.http, key, 'GET', `/v2/streams/${stream.id}`)).json.status === 'live', 15_000, 100, 'live again');
    expect(await exited(again)).toBe(0);
  });

  it('refuses a wrong stream key and leaves the stream idle', async () => {
    const stream = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Locked' })).json;
    const pub = publish(`${stream.rtmpUrl}/sk_euw1_wrongwrongwrongwrongwrongwrongwrong`, 3);
    let err = '';
    pub.stderr!.on('data', (d) => (err += d));
    expect(await exited(pub)).not.toBe(0);
    expect((await api(server.http, key, 'GET', `/v2/streams/${stream.id}`)).json.status).toBe('idle');
    expect(server.stderr()).not.toContain('sk_euw1_wrong');
    expect(server.stderr()).toContain('publish refused');
    expect((await fetch(stream.hlsUrl)).status).toBe(404);
  });
});
