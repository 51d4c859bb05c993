/**
 * Opus over Enhanced RTMP from a real FFmpeg 8.1 (the `node-av` package's libraries; FFmpeg 5.1
 * cannot put Opus in FLV): the stream goes live, every HLS layer decodes, and the E-RTMP messages
 * FFmpeg 8 sends besides SequenceStart and CodedFrames (AudioPacketType 4, MultichannelConfig, for
 * stereo and 5.1 layouts) are skipped, never fatal (docs/behaviour.md §2, issue "Radio").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { api, repoRoot, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const publisher = path.join(repoRoot, 'test', 'helpers', 'ffmpeg8-publish.mjs');

/** Publishes `file` with FFmpeg 8.1 (a child process) to `url` for `seconds`. */
function ffmpeg8(file: string, url: string, seconds: number) {
  const p = spawn(process.execPath, [publisher, file, url, String(seconds)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr!.on('data', (d) => (err += d));
  return Object.assign(p, { errors: () => err });
}

describe('Opus over E-RTMP from FFmpeg 8.1', () => {
  let t: TestServer;
  const tmp = tempDir('skylark-ffmpeg8-');
  beforeAll(async () => {
    t = await startInProcess();
  });
  afterAll(async () => {
    await t?.close();
    tmp.cleanup();
  });

  for (const [layout, channels] of [['stereo', 2], ['5.1', 6]] as const) {
    it(`${layout}: live, every layer decodes, nothing fatal`, async () => {
      const ogg = path.join(tmp.dir, `${layout}.ogg`);
      const made = spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '12', '-ac', String(channels), '-c:a', 'libopus', '-b:a', '128k', ogg], { encoding: 'utf8' });
      expect(made.status, made.stderr).toBe(0);
      const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `FFmpeg 8 ${layout}`, codec: 'opus', quality: 'high' })).json;
      const p = ffmpeg8(ogg, `${s.rtmpUrl}/${s.streamKey}`, 10);
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 20_000, 100, `live (${p.errors()})`);
      // Wait for whole segments in every layer, then decode each.
      const layers = await waitFor(async () => {
        const mv = await fetch(s.hlsUrl);
        if (mv.status !== 200) return null;
        const uris = (await mv.text()).split('\n').filter((l) => l && !l.startsWith('#'));
        for (const u of uris) {
          const media = await fetch(new URL(u, s.hlsUrl));
          if (media.status !== 200 || !(await media.text()).includes('#EXTINF')) return null;
        }
        return uris.length > 0 ? uris : null;
      }, 20_000, 250, 'segments in every layer');
      for (const u of layers) {
        const d = spawn(ffmpegPath(), ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', new URL(u, s.hlsUrl).href, '-t', '2', '-f', 'null', '-'], { stdio: ['ignore', 'ignore', 'pipe'] });
        let errors = '';
        d.stderr!.on('data', (x) => (errors += x));
        expect({ code: await exited(d), errors }).toEqual({ code: 0, errors: '' });
      }
      expect(await exited(p), p.errors()).toBe(0);
      const events = (await api(t.http, t.secretKey, 'GET', '/v2/events?type=stream.error')).json.data as Array<{ data: { object: { id: string }; error: { code: string } } }>;
      expect(events.filter((e) => e.data.object.id === s.id && e.data.error.code !== 'transcoder_failed')).toEqual([]);
    }, 60_000);
  }
});
