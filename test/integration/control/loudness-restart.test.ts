/**
 * Loudness work is durable (docs/podcasts.md "Loudness"): the episode row says what is left, and
 * the next start does it. Two servers in turn on one data dir; between them the rows are set back
 * to what an interrupted start leaves: audio stored before measurement existed (`measure`, as
 * migration 011 marks it) and audio whose normalisation was cut off (`normalize`, the upload still
 * in place). The second server measures the first and normalises the second; the served copy
 * measures −16 ± 1 LUFS on FFmpeg's `ebur128`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import Sqlite from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';

const ffmpeg = ffmpegPath();
const tmp = tempDir('skylark-loudness-restart-');
let server: TestServer | undefined;
afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

async function integrated(file: string): Promise<number> {
  const r = await run(ffmpeg, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true:framelog=verbose', '-f', 'null', '-'], 60_000);
  expect(r.code).toBe(0);
  return Number(/I:\s+(-?[\d.]+) LUFS/.exec(r.stderr.slice(r.stderr.lastIndexOf('Summary:')))![1]);
}

describe('loudness work across a restart', () => {
  it('is resumed by the next start: measured, and normalised where it was cut off', async () => {
    const env = { SKYLARK_DATA_DIR: tmp.dir };
    const mp3File = path.join(tmp.dir, 'in.mp3');
    // A 997 Hz tone of amplitude 0.05, about −29 LUFS: far from the −16 target.
    execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=997:duration=6,volume=0.4', '-c:a', 'libmp3lame', '-b:a', '96k', mp3File], { timeout: 30_000 });
    const mp3 = readFileSync(mp3File);

    server = await startInProcess(env);
    const key = server.secretKey;
    let base = server.http;
    const pid = (await api(base, key, 'POST', '/v2/podcasts', { title: 'Restarted', loudnessTarget: null })).json.id;
    const ids: string[] = [];
    for (const title of ['Measured later', 'Normalised later']) {
      const e = (await api(base, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title })).json;
      const r = await fetch(`${base}/v2/podcasts/${pid}/episodes/${e.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: mp3 });
      expect(r.status).toBe(200);
      ids.push(e.id);
    }
    const uploadedUrl = (await waitFor(async () => {
      const g = (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${ids[1]}`)).json;
      return g.loudness ? g.audioUrl : null;
    }, 60_000, 200, 'first measurement')) as string;
    await waitFor(async () => (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${ids[0]}`)).json.loudness, 60_000, 200, 'first measurement');
    await server.close();
    server = undefined;

    // What a cut-off run leaves behind.
    const db = new Sqlite(path.join(tmp.dir, 'skylark.db'));
    db.prepare(`UPDATE episodes SET loudness = NULL, loudness_state = 'measure' WHERE id = ?`).run(ids[0]);
    db.prepare(`UPDATE episodes SET loudness = NULL, loudness_state = 'normalize' WHERE id = ?`).run(ids[1]);
    db.prepare('UPDATE podcasts SET loudness_target = -16 WHERE id = ?').run(pid);
    db.close();

    server = await startInProcess(env);
    base = server.http;
    const measured = await waitFor(async () => (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${ids[0]}`)).json.loudness, 60_000, 200, 'resumed measurement');
    expect(measured).toMatchObject({ normalized: false, originalAudioUrl: null });
    const ep = await waitFor(async () => {
      const g = (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${ids[1]}`)).json;
      return g.loudness ? g : null;
    }, 60_000, 200, 'resumed normalisation');
    expect(ep.loudness).toMatchObject({ normalized: true, target: -16 });
    expect(new URL(ep.loudness.originalAudioUrl).pathname).toBe(new URL(uploadedUrl).pathname);
    expect((await api(base, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id })).status).toBe(200);
    const r = await fetch(ep.audioUrl);
    expect(r.status).toBe(200);
    const served = path.join(tmp.dir, 'served.mp3');
    writeFileSync(served, Buffer.from(await r.arrayBuffer()));
    expect(Math.abs((await integrated(served)) - -16)).toBeLessThanOrEqual(1);
  });
});
