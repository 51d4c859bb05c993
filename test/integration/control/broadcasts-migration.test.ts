/**
 * The upgrade to reusable streams (migration 013, docs/streams.md) on a real SQLite file: a data
 * dir at the schema before it (no `broadcasts` table, a stream stored `ended` after one broadcast
 * with listeners, one stored `live`, one never live) is opened by the server, which makes the
 * `ended` stream `idle` with its one broadcast (times and listener totals kept), keeps the live
 * one's broadcast running, and lets the `ended` stream go live again with its old key (a second
 * broadcast).
 */
import { afterAll, describe, expect, it } from 'vitest';
import Sqlite from 'better-sqlite3';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

const data = tempDir('skylark-migrate-');
let server: TestServer | null = null;
afterAll(async () => {
  await server?.close();
  data.cleanup();
});

describe('migration 013: reusable streams', () => {
  it('turns stored ended streams into idle ones with their broadcast, and they go live again', async () => {
    // A data dir made by the server, with three streams.
    const first = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
    const key = first.secretKey;
    const create = async (title: string) => (await api(first.http, key, 'POST', '/v2/streams', { title, reconnectWindow: 1 })).json;
    const ended = await create('Ended before the upgrade');
    const live = await create('Live at the upgrade');
    const never = await create('Never live');
    await first.close();

    // Back to the schema before migration 013 (the later ones undone too: they run again after
    // it), with the rows an earlier version wrote.
    const db = new Sqlite(path.join(data.dir, 'skylark.db'));
    db.exec(
      [
        // 016–024 undone (newest first)
        'ALTER TABLE streams DROP COLUMN live_sample_rate; ALTER TABLE streams DROP COLUMN live_channels;',
        'DROP INDEX tracks_broadcast; ALTER TABLE tracks DROP COLUMN broadcast_id; ALTER TABLE tracks DROP COLUMN fallback;',
        'DROP INDEX episodes_publish_pending; ALTER TABLE episodes DROP COLUMN publish_pending; ALTER TABLE streams DROP COLUMN time_zone;',
        'DROP INDEX tracks_stream_time; ALTER TABLE listeners DROP COLUMN mode; DROP TABLE catch_up_segments; ALTER TABLE streams DROP COLUMN catch_up_hours;',
        'DROP INDEX streams_stream_key_hash; DROP INDEX streams_icecast_mount; ALTER TABLE streams DROP COLUMN icecast_mount;',
        'ALTER TABLE streams DROP COLUMN playback_publishable_tokens;',
        'ALTER TABLE download_clients DROP COLUMN counted_as; ALTER TABLE download_clients DROP COLUMN address;',
        'DROP TABLE hls_timelines;',
        // 013–015
        'DROP TABLE broadcasts; ALTER TABLE streams DROP COLUMN fallback; ALTER TABLE streams DROP COLUMN source; DELETE FROM schema_migrations WHERE version >= 13;',
      ].join(' '),
    );
    const started = Date.parse('2026-01-05T10:00:00Z');
    const endedAt = Date.parse('2026-01-05T11:00:00Z');
    db.prepare("UPDATE streams SET status = 'ended', started_at = ?, ended_at = ? WHERE id = ?").run(started, endedAt, ended.id);
    db.prepare("UPDATE streams SET status = 'live', started_at = ? WHERE id = ?").run(started, live.id);
    db.prepare('INSERT INTO stream_listener_stats (stream_id, peak_listeners, total_listeners, left_duration_ms, left_sessions) VALUES (?, 7, 12, 3600000, 12)').run(ended.id);
    expect(db.prepare("SELECT COUNT(*) FROM streams WHERE status = 'ended'").pluck().get()).toBe(1);
    db.close();

    server = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
    const v2 = (method: string, p: string) => api(server!.http, key, method, `/v2${p}`);

    const s = (await v2('GET', `/streams/${ended.id}`)).json;
    expect(s).toMatchObject({ status: 'idle', startedAt: '2026-01-05T10:00:00.000Z', endedAt: '2026-01-05T11:00:00.000Z' });
    const before = (await v2('GET', `/streams/${ended.id}/broadcasts`)).json.data;
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({ object: 'broadcast', streamId: ended.id, startedAt: '2026-01-05T10:00:00.000Z', endedAt: '2026-01-05T11:00:00.000Z', durationSeconds: 3600, peakListeners: 7, totalListeners: 12, listenerSeconds: 3600, episodeId: null, trackCount: 0 });
    expect(before[0].id).toMatch(/^brd_[0-9a-f]{24}$/);
    expect((await v2('GET', `/streams/${ended.id}/stats`)).json).toMatchObject({ broadcastId: before[0].id, peakListenerCount: 7, totalListeners: 12 });
    expect((await v2('GET', `/streams/${never.id}/broadcasts`)).json.data).toEqual([]);
    expect((await v2('GET', '/streams?status=ended')).status).toBe(400);

    // The stream left live by the old version: its broadcast runs, and ends after its window (no publisher after a restart).
    const running = (await v2('GET', `/streams/${live.id}/broadcasts`)).json.data;
    expect(running).toHaveLength(1);
    expect(running[0].endedAt).toBeNull();
    await waitFor(async () => (await v2('GET', `/streams/${live.id}/broadcasts`)).json.data[0].endedAt !== null, 15_000, 100, 'left-live broadcast ended');
    expect((await v2('GET', `/streams/${live.id}`)).json.status).toBe('idle');

    // The once-ended stream goes live again with its old key: a second broadcast.
    const p = publish(`${ended.rtmpUrl.replace(/:\d+\//, `:${server.server.rtmpPort}/`)}/${ended.streamKey}`, { seconds: 3 });
    await waitFor(async () => (await v2('GET', `/streams/${ended.id}`)).json.status === 'live', 20_000, 100, 'live again');
    const after = (await v2('GET', `/streams/${ended.id}/broadcasts`)).json.data;
    expect(after.map((b: { id: string }) => b.id)).toEqual([expect.stringMatching(/^brd_/), before[0].id]);
    expect(after[0].endedAt).toBeNull();
    expect(await exited(p)).toBe(0);
  }, 90_000);
});
