/**
 * Recordings stop at the free-space floor, and the events that say so are never lost to a full
 * disk (docs/behaviour.md §13), on a real small filesystem: the data dir on a 64 MiB tmpfs, the
 * floor (`SKYLARK_MIN_FREE_DISK_BYTES`) at 8 MiB, a live stream recording what FFmpeg publishes.
 * - at start the node makes its disk reserve (16 MiB of real blocks in the data dir);
 * - another writer takes the volume under the floor (1 MiB under it): the recording stops within a
 *   second or so with `stream.error` `recording_stopped` (`reason: "disk_free"`), checked as it
 *   writes, not after its own next quarter megabyte;
 * - the writer fills the volume to its last byte and the publisher leaves: the `stream.ended` is in
 *   `GET /v2/events` while the disk is still full (SQLite found the disk full, the reserve was
 *   released, the event committed);
 * - once space is back, the reserve is made again.
 * Needs root (mount); skipped otherwise.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../../src/base/config.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { api, tempDir, testLogger, waitFor, fillVolume } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { DISK_RESERVE_BYTES, DISK_RESERVE_FILE } from '../../../src/base/disk-reserve.js';

const tmp = tempDir('skylark-disk-floor-');
const vol = path.join(tmp.dir, 'vol');
let mounted = false;
let server: RunningServer | null = null;
let pub: ChildProcess | null = null;
let closeLogs = () => {};

beforeAll(() => {
  mkdirSync(vol, { recursive: true });
  mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', vol]).status === 0;
});
afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await server?.close();
  closeLogs();
  if (mounted) spawnSync('umount', [vol]);
  tmp.cleanup();
});


type Ev = { type: string; data: { object: { id: string }; error?: { code: string; reason?: string } } };

describe('recording at the free-space floor', () => {
  it('stops at the floor when another writer fills the volume, and its events commit on the full disk', async (ctx) => {
    if (!mounted) return ctx.skip();
    const data = path.join(vol, 'data');
    const logs = testLogger();
    closeLogs = logs.close;
    server = await startServer(
      loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: data, SKYLARK_LOG_LEVEL: 'error', SKYLARK_ABR_LADDER: '0', SKYLARK_MIN_FREE_DISK_BYTES: String(8 * 1024 * 1024) }),
      logs.log,
    );
    const reserve = path.join(data, DISK_RESERVE_FILE);
    expect(statSync(reserve).size).toBe(DISK_RESERVE_BYTES);
    const http = `http://127.0.0.1:${server.httpPort}`;
    const key = (await server.accounts.create({ name: 'Floor', plan: 'paid', region: 'eu-west-1' })).secretKey;
    const pod = (await api(http, key, 'POST', '/v2/podcasts', { title: 'Floor show' })).json;
    const s = (await api(http, key, 'POST', '/v2/streams', { title: 'Recorded', reconnectWindow: 0, recording: { podcastId: pod.id } })).json;
    pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 120 });
    await waitFor(async () => (await api(http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 20_000, 200, 'live');
    const recordings = path.join(data, 'recordings');
    await waitFor(() => existsSync(recordings) && readdirSync(recordings).some((f) => f.endsWith('.aac') && statSync(path.join(recordings, f)).size > 16_000), 20_000, 200, 'recording');

    // Another writer takes the volume 1 MiB under the floor: the recording stops at once.
    fillVolume(path.join(vol, 'filler'), 7 * 1024 * 1024);
    const events = async () => (await api(http, key, 'GET', '/v2/events?limit=100')).json.data as Ev[];
    const stopped = await waitFor(async () => (await events()).find((e) => e.type === 'stream.error' && e.data.error?.code === 'recording_stopped') ?? null, 4000, 100, 'recording_stopped at the floor');
    expect(stopped.data.error!.reason).toBe('disk_free');
    expect(stopped.data.object.id).toBe(s.id);

    // The volume full to its last byte: the node's own records still commit.
    fillVolume(path.join(vol, 'filler'));
    // The publisher leaves: the stream ends, recorded on the full disk too.
    pub.kill('SIGKILL');
    await exited(pub);
    pub = null;
    await waitFor(async () => (await events()).some((e) => e.type === 'stream.ended' && e.data.object.id === s.id), 10_000, 100, 'stream.ended on the full disk');
    expect(existsSync(reserve)).toBe(false); // released for it

    // Space is back: the reserve is made again.
    rmSync(path.join(vol, 'filler'));
    await waitFor(() => existsSync(reserve) && statSync(reserve).size === DISK_RESERVE_BYTES, 15_000, 200, 'the reserve made again');
  }, 120_000);
});
