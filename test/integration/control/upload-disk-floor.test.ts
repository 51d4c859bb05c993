/**
 * The disk floor of uploads (docs/behaviour.md §13): on a real small volume (an 8 MiB tmpfs as the data
 * dir), an upload that would leave less than `SKYLARK_MIN_FREE_DISK_BYTES` free is refused with
 * 507 `insufficient_storage` — before the first byte when `Content-Length` says so, while writing
 * when it is chunked — and a write failing with ENOSPC (floor 0, the volume fills up) answers the
 * same clean 507. Each time: the client reads the answer, no partial file is left, the episode keeps
 * its audio, the hit is counted as `disk_free`, and the server keeps serving.
 *
 * Needs `mount -t tmpfs` (root with CAP_SYS_ADMIN); skipped with a message where it is not permitted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, startInProcess, waitFor } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { sendFrom, type Outcome } from '../base/body-client.js';

const MiB = 1024 * 1024;
const VOLUME = '8m';

/** Mounts a fresh tmpfs of `size`; null when mounting is not permitted here. */
function mountTmpfs(size: string): { dir: string; unmount: () => void } | null {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-floor-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  return {
    dir,
    unmount: () => {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const probe = mountTmpfs('1m');
probe?.unmount();
if (!probe) console.warn('upload-disk-floor.test.ts: skipped, `mount -t tmpfs` is not permitted here (needs root with CAP_SYS_ADMIN)');

const free = (dir: string) => {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
};

/** A short MP3 (a few KiB) made by FFmpeg. */
function smallMp3(): Buffer {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-mp3-'));
  try {
    const out = path.join(dir, 'a.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=1', '-c:a', 'libmp3lame', '-b:a', '32k', out], { timeout: 30_000 });
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A server on a fresh tmpfs with the disk floor `floor` (bytes), one podcast and an episode with audio. */
async function setUp(floor: number) {
  const vol = mountTmpfs(VOLUME)!;
  const s = await startInProcess({ SKYLARK_DATA_DIR: vol.dir, SKYLARK_MIN_FREE_DISK_BYTES: String(floor) });
  const key = s.secretKey;
  const mp3 = smallMp3();
  // No loudness target: a normalisation of the first upload would write its own temporary file
  // beside the uploads' while these tests look for what a refused upload left behind.
  const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Full disk', loudnessTarget: null })).json.id as string;
  const eid = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Kept' })).json.id as string;
  const audioPath = `/v2/podcasts/${pid}/episodes/${eid}/audio`;
  const put = (body: Buffer) => fetch(`${s.http}${audioPath}`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body });
  const first = await put(mp3);
  expect(first.status, await first.clone().text()).toBe(200);
  const audio = ((await first.json()) as { audio: unknown }).audio;
  return { vol, s, key, mp3, pid, eid, audioPath, put, audio };
}

type Env = Awaited<ReturnType<typeof setUp>>;

/** Uploads `total` bytes of spaces from a client in its own process. */
async function upload(e: Env, total: number, chunked: boolean): Promise<Outcome> {
  return (await sendFrom([{ url: e.s.http + e.audioPath, method: 'PUT', headers: { Authorization: `Bearer ${e.key}`, 'Content-Type': 'audio/mpeg' }, total, chunked }]))[0]!;
}

/** The upload was refused with a clean 507 and left nothing behind. */
async function expectRefused(e: Env, r: Outcome, hitsBefore: number): Promise<void> {
  expect(r.error, `the client saw ${r.error} instead of the 507 (sent ${r.sent} bytes)`).toBeUndefined();
  expect(r.status, r.text).toBe(507);
  const err = JSON.parse(r.text!).error;
  expect(err).toMatchObject({ type: 'api_error', code: 'insufficient_storage' });
  expect(err.requestId).toBe(r.headers!['x-request-id']);
  expect(readdirSync(path.join(e.vol.dir, 'media', '.tmp'))).toEqual([]);
  const ep = await api(e.s.http, e.key, 'GET', `/v2/podcasts/${e.pid}/episodes/${e.eid}`);
  expect(ep.json.audio).toEqual(e.audio); // the episode is as it was
  expect(e.s.server.limits.count('disk_free')).toBeGreaterThan(hitsBefore);
}

/** The partial file's space comes back (its unlinked descriptor closes right after the answer). */
async function spaceBack(e: Env, before: number): Promise<void> {
  await waitFor(() => free(e.vol.dir) >= before - 64 * 1024, 5_000, 20, `free space back to ${before} bytes`);
}

describe.skipIf(!probe)('disk floor: an upload that would cross it is refused (507)', () => {
  const FLOOR = 4 * MiB;
  let e: Env;
  beforeAll(async () => {
    e = await setUp(FLOOR);
  });
  afterAll(async () => {
    await e?.s.close();
    e?.vol.unmount();
  });

  it('with Content-Length: refused before the first byte is written', async () => {
    const size = free(e.vol.dir) - FLOOR + 64 * 1024; // just over what the floor leaves
    const hits = e.s.server.limits.count('disk_free');
    await expectRefused(e, await upload(e, size, false), hits);
  });

  it('chunked: refused while writing, the partial file removed', async () => {
    const before = free(e.vol.dir);
    const hits = e.s.server.limits.count('disk_free');
    await expectRefused(e, await upload(e, 5_000_000, true), hits);
    await spaceBack(e, before);
  });

  it('an upload that fits above the floor is stored', async () => {
    const r = await e.put(e.mp3);
    expect(r.status).toBe(200);
    const ep = (await r.json()) as { audio: unknown };
    expect(ep.audio).toMatchObject({ mimeType: 'audio/mpeg', sizeBytes: e.mp3.length });
    e.audio = ep.audio;
  });
});

describe.skipIf(!probe)('a full volume (floor 0): ENOSPC mid-upload answers 507', () => {
  let e: Env;
  beforeAll(async () => {
    e = await setUp(0);
  });
  afterAll(async () => {
    await e?.s.close();
    e?.vol.unmount();
  });

  it('a body larger than the volume, chunked and with Content-Length: 507, no partial file, the space back', async () => {
    const before = free(e.vol.dir);
    for (const chunked of [true, false]) {
      const hits = e.s.server.limits.count('disk_free');
      await expectRefused(e, await upload(e, 10 * MiB, chunked), hits);
      await spaceBack(e, before);
    }
  });

  it('a volume already full: 507 at the first write; the server keeps serving once space is back', async () => {
    const filler = path.join(e.vol.dir, 'filler');
    try {
      writeFileSync(filler, Buffer.alloc(free(e.vol.dir)));
    } catch {
      // ENOSPC on the last bytes: the volume is full either way
    }
    const hits = e.s.server.limits.count('disk_free');
    await expectRefused(e, await upload(e, 256 * 1024, true), hits);
    rmSync(filler, { force: true });
    expect((await api(e.s.http, e.key, 'POST', '/v2/podcasts', { title: 'After the full disk' })).status).toBe(201);
    const r = await e.put(e.mp3);
    expect(r.status).toBe(200);
  });
});
