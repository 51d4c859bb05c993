/**
 * The daily download-client cap is shared fairly per podcast (docs/podcasts.md "Download counting",
 * docs/behaviour.md §13): with `SKYLARK_DOWNLOAD_CLIENTS_PER_DAY=10`, one podcast flooded by 30
 * made-up clients (addresses via a trusted `X-Forwarded-For`, each fetching less than a minute)
 * holds the whole cap, and another podcast's listeners, fetched with curl, are still counted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../../src/base/config.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { api, tempDir, testLogger } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const run = promisify(execFile);
const UA = 'Overcast/3.0 (+http://overcast.fm/; iOS podcast app)';
const { dir, cleanup } = tempDir('skylark-downloads-cap-');
let server: RunningServer;
let base: string;
let key: string;
let closeLogs = () => {};

/** A published podcast with one episode of `audio`; its id and the episode's audio URL. */
async function podcast(title: string, audio: Buffer): Promise<{ id: string; url: string }> {
  const id = (await api(base, key, 'POST', '/v2/podcasts', { title, loudnessTarget: null })).json.id as string;
  const episodeId = (await api(base, key, 'POST', `/v2/podcasts/${id}/episodes`, { title: `${title} 1` })).json.id as string;
  const up = await fetch(`${base}/v2/podcasts/${id}/episodes/${episodeId}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: audio });
  expect(up.status).toBe(200);
  const url = `${base}${new URL(((await up.json()) as { audioUrl: string }).audioUrl).pathname}`;
  expect((await api(base, key, 'POST', `/v2/podcasts/${id}/publish`, { episodeId })).status).toBe(200);
  return { id, url };
}

/** curl `url` as a client at `ip` (optionally a range); the body length. */
async function get(url: string, ip: string, range?: string): Promise<number> {
  const { stdout } = await run('curl', ['-s', '-o', '-', '-A', UA, '-H', `X-Forwarded-For: ${ip}`, ...(range ? ['-r', range] : []), '--max-time', '20', url], { encoding: 'buffer', maxBuffer: 64 << 20 });
  return stdout.length;
}

const downloads = async (id: string) => (await api(base, key, 'GET', `/v2/podcasts/${id}/stats`)).json.downloads as number;

beforeAll(async () => {
  const logs = testLogger();
  closeLogs = logs.close;
  server = await startServer(
    loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: dir, SKYLARK_LOG_LEVEL: 'error', SKYLARK_TRUSTED_PROXIES: '127.0.0.1', SKYLARK_DOWNLOAD_CLIENTS_PER_DAY: '10' }),
    logs.log,
  );
  base = `http://127.0.0.1:${server.httpPort}`;
  key = (await server.accounts.create({ name: 'Cap', plan: 'paid', region: 'eu-west-1' })).secretKey;
}, 60_000);
afterAll(async () => {
  await server?.close();
  closeLogs();
  cleanup();
});

describe('the daily download-client cap', () => {
  it('is shared fairly per podcast: one podcast\'s flood does not stop another\'s counting', async () => {
    const file = path.join(dir, 'ep.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=120', '-ac', '1', '-c:a', 'libmp3lame', '-b:a', '64k', file], { timeout: 60_000 });
    const audio = readFileSync(file);
    const flooded = await podcast('Flooded', audio);
    const quiet = await podcast('Quiet', audio);

    // 30 made-up clients of the flooded podcast, each short of its first minute: they fill the cap.
    for (let i = 0; i < 30; i++) expect(await get(flooded.url, `203.0.113.${i + 1}`, '0-9999')).toBe(10_000);
    expect(await downloads(flooded.id)).toBe(0);

    // The quiet podcast's listeners are counted all the same.
    for (let i = 0; i < 3; i++) expect(await get(quiet.url, `198.51.100.${i + 1}`)).toBe(audio.length);
    expect(await downloads(quiet.id)).toBe(3);
  }, 120_000);
});
