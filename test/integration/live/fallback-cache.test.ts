/**
 * The fallback's rendition cache (docs/streams.md "Fallback") against a real server, real FFmpeg
 * and real episode audio:
 * - a fallback set on a stream builds one rendition per episode in `<dataDir>/fallback-cache`; the
 *   fallback then plays them from the cache (`fallbackPlaying`: `rendition`, and no FFmpeg process
 *   plays), titles still change with the episodes, and `/listen` audio still decodes (ffprobe);
 * - an episode taken out of the plan, and a deleted episode, lose their entries;
 * - after a restart, a damaged rendition (same size, other bytes) is never played: it is read back,
 *   removed and built again, and only then played from the cache.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { episodeWithAudio, toneMp3 } from '../../helpers/episodes.js';

let t: TestServer;
let podcastId: string;
let x: string;
let y: string;
let tones: string;

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);
const stream = async (id: string) => (await v2('GET', `/streams/${id}`)).json;
const cacheFiles = (dataDir: string) => {
  const d = path.join(dataDir, 'fallback-cache');
  return existsSync(d) ? readdirSync(d).filter((f) => f !== '.part') : [];
};

/** The command lines of this process's FFmpeg children that play a fallback (`-re`). */
function fallbackProcesses(): string[] {
  const out: string[] = [];
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    const kids = readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').trim();
    for (const pid of kids ? kids.split(/\s+/) : []) {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
        if (cmd.includes('ffmpeg') && cmd.includes(' -re ')) out.push(cmd);
      } catch {
        // ended meanwhile
      }
    }
  }
  return out;
}

/** The first `bytes` of `url`'s body. */
async function firstBytes(url: string, bytes: number): Promise<Buffer> {
  const ac = new AbortController();
  const res = await fetch(url, { signal: ac.signal });
  const chunks: Buffer[] = [];
  let n = 0;
  const reader = res.body!.getReader();
  while (n < bytes) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(Buffer.from(value));
    n += value.byteLength;
  }
  ac.abort();
  return Buffer.concat(chunks);
}

beforeAll(async () => {
  t = await startInProcess({});
  tones = t.dataDir;
  const p = await v2('POST', '/podcasts', { title: 'Reruns' });
  podcastId = p.json.id;
  x = await episodeWithAudio(t.http, t.secretKey, podcastId, 'Rerun X', toneMp3(tones, 'x.mp3', 6, 440));
  y = await episodeWithAudio(t.http, t.secretKey, podcastId, 'Rerun Y', toneMp3(tones, 'y.mp3', 6, 660));
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe('the fallback rendition cache', () => {
  it('builds each episode once, plays it from the cache with its title, and drops entries of episodes gone from the plan or deleted', async () => {
    const s = (await v2('POST', '/streams', { title: 'Rerun station', reconnectWindow: 0, fallback: { episodeIds: [x, y], order: 'sequential' } })).json;
    expect(s.source).toBe('fallback');
    // Both renditions are built (one at a time) while the first run encodes live.
    const files = await waitFor(() => (cacheFiles(t.dataDir).length === 2 ? cacheFiles(t.dataDir) : null), 90_000, 100, 'two cached renditions');
    expect(files.some((f) => f.startsWith(`${x}.`) && f.endsWith('.aac'))).toBe(true);
    expect(files.some((f) => f.startsWith(`${y}.`) && f.includes('.aac128-48000-2.'))).toBe(true);

    // From a later run on, the fallback plays each episode from its cached file (no FFmpeg process),
    // with the episode's title. (Audio normalised meanwhile is new audio: built again, then used.)
    const titles = new Set<string>();
    await waitFor(async () => {
      const p = t.server.ingest.fallbackPlaying(s.id);
      if (p?.from !== 'rendition') return false;
      expect(fallbackProcesses()).toEqual([]);
      const ep = p.episodeId === x ? 'Rerun X' : 'Rerun Y';
      if ((await stream(s.id)).nowPlaying?.title === ep && t.server.ingest.fallbackPlaying(s.id)?.episodeId === p.episodeId) titles.add(ep);
      return titles.size === 2;
    }, 90_000, 100, 'both episodes played from the cache, with their titles');

    // The audio still decodes: 48 kHz AAC from /listen.
    const audio = await firstBytes(s.listenUrl, 48_000);
    const file = path.join(tones, 'listened.aac');
    writeFileSync(file, audio);
    const probe = execFileSync(ffmpegPath().replace(/ffmpeg$/, 'ffprobe'), ['-v', 'error', '-show_entries', 'stream=codec_name,sample_rate', '-of', 'csv=p=0', file]).toString().trim();
    expect(probe).toBe('aac,48000');

    // Y out of the plan: its entry goes at once; X stays.
    const patched = await v2('PATCH', `/streams/${s.id}`, { fallback: { episodeIds: [x], order: 'sequential' } });
    expect(patched.status, patched.text).toBe(200);
    expect(cacheFiles(t.dataDir).filter((f) => f.startsWith(`${y}.`))).toEqual([]);
    await waitFor(() => cacheFiles(t.dataDir).map((f) => f.split('.')[0]).join() === x, 90_000, 100, 'X alone in the cache');

    // X deleted: its entry goes too (the cache holds nothing of a plan without playable episodes).
    const del = await v2('DELETE', `/podcasts/${podcastId}/episodes/${x}`);
    expect(del.status, del.text).toBe(200);
    expect(cacheFiles(t.dataDir)).toEqual([]);
    await v2('DELETE', `/streams/${s.id}`);
  }, 240_000);

  it('never plays a damaged rendition after a restart: it is built again first', async () => {
    const data = tempDir();
    let a: TestServer | null = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
    let b: TestServer | null = null;
    try {
      const key = a.secretKey;
      const call = (srv: TestServer, method: string, p: string, body?: unknown) => api(srv.http, key, method, `/v2${p}`, body);
      const pod = (await call(a, 'POST', '/podcasts', { title: 'Archive' })).json;
      const ep = await episodeWithAudio(a.http, key, pod.id, 'Loop', readFileSync(path.join(tones, 'y.mp3')));
      const s = (await call(a, 'POST', '/streams', { title: 'Night loop', fallback: { episodeIds: [ep] } })).json;
      await waitFor(() => cacheFiles(data.dir).length === 1, 90_000, 100, 'the rendition');
      await a.server.close();
      a = null;

      const name = cacheFiles(data.dir)[0]!;
      const full = path.join(data.dir, 'fallback-cache', name);
      const bytes = readFileSync(full);
      bytes.fill(0x55, 1000, 1600);
      writeFileSync(full, bytes);
      const digestOk = () => {
        const f = cacheFiles(data.dir)[0];
        if (!f) return false;
        const digest = createHash('sha1').update(readFileSync(path.join(data.dir, 'fallback-cache', f))).digest('hex').slice(0, 16);
        return f.split('.')[4] === digest;
      };
      expect(digestOk()).toBe(false);

      b = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
      const srv = b;
      // Until the rendition is whole again, no run plays from it: the live encode plays.
      let playedDamaged = false;
      let encoded = false;
      await waitFor(() => {
        const ok = digestOk();
        const p = srv.server.ingest.fallbackPlaying(s.id);
        if (!ok && p?.from === 'rendition') playedDamaged = true;
        if (p?.from === 'encode') encoded = true;
        return ok;
      }, 90_000, 20, 'the rendition built again');
      expect(playedDamaged).toBe(false);
      expect(encoded).toBe(true);
      await waitFor(() => srv.server.ingest.fallbackPlaying(s.id)?.from === 'rendition', 60_000, 100, 'the rebuilt rendition on air');
      expect((await api(srv.http, key, 'GET', `/v2/streams/${s.id}`)).json.nowPlaying?.title).toBe('Loop');
    } finally {
      await a?.server.close();
      await b?.server.close();
      data.cleanup();
    }
  }, 240_000);
});
