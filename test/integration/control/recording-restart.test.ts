/**
 * Recordings survive the process (docs/behaviour.md §3 "Recording", issue "The node survives its users"
 * item 8). `skylark serve` runs as a child process recording a live AAC stream into a podcast:
 * - killed with SIGKILL mid-show, restarted, and the broadcaster reconnects within the window:
 *   the recording resumes the same file, and when the stream ends there is ONE draft episode
 *   holding both halves, the episode of the stream's one broadcast;
 * - stopped with SIGTERM mid-show and nobody reconnects: the next run finishes the recording
 *   when the stream's window runs out — one draft episode, linked from the broadcast it was made
 *   in, nothing orphaned on disk.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

async function episodesOf(http: string, key: string, podcastId: string) {
  return (await api(http, key, 'GET', `/v2/podcasts/${podcastId}/episodes`)).json.data as Array<{ id: string; status: string; sourceStreamId: string | null; audio: { durationSeconds: number } | null }>;
}

describe('recordings across restarts', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });
  const env = { SKYLARK_ABR_LADDER: '0' };

  it('kill -9 mid-show, the broadcaster comes back: one episode with both halves', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Rec', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    server = await startCli(tmp.dir, env);
    const pod = (await api(server.http, key, 'POST', '/v2/podcasts', { title: 'Crash-proof show' })).json;
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Night show', reconnectWindow: 8, recording: { podcastId: pod.id } })).json;
    const url = `${s.rtmpUrl}/${s.streamKey}`;

    const first = publish(url, { seconds: 60 });
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
    await new Promise((r) => setTimeout(r, 5000)); // A fixed wait on purpose: ~5 s of live audio recorded before the crash
    server.child.kill('SIGKILL');
    await exited(server.child);
    first.kill('SIGKILL');

    server = await startCli(tmp.dir, env);
    const again = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 5 });
    expect(await exited(again)).toBe(0);
    // The window (8 s) runs out after the second half: the stream ends and the recording is handed over.
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'idle', 30_000, 250, 'ended');
    const eps = await waitFor(async () => {
      const e = await episodesOf(server!.http, key, pod.id);
      return e.length > 0 && e[0]!.audio ? e : null;
    }, 30_000, 250, 'episode');
    expect(eps.length).toBe(1);
    expect(eps[0]).toMatchObject({ status: 'draft', sourceStreamId: s.id });
    // Both halves: ~5 s before the crash and 5 s after.
    expect(eps[0]!.audio!.durationSeconds).toBeGreaterThan(8);
    // One broadcast across the crash (docs/streams.md), and the episode is its recording.
    const broadcasts = await waitFor(async () => {
      const l = (await api(server!.http, key, 'GET', `/v2/streams/${s.id}/broadcasts`)).json.data;
      return l[0]?.episodeId ? l : null;
    }, 10_000, 100, 'the broadcast links its episode');
    expect(broadcasts.map((b: { episodeId: string }) => b.episodeId)).toEqual([eps[0]!.id]);
    // Nothing left behind: no sidecar, no raw file (forgotten right after the hand-over that linked the episode).
    await waitFor(async () => readdirSync(path.join(tmp.dir, 'recordings')).length === 0, 10_000, 100, 'the recording forgotten on disk');
  }, 120_000);

  it('SIGTERM mid-show and nobody comes back: the next run makes the episode when the window runs out', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Rec2', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    await server?.stop();
    server = await startCli(tmp.dir, env);
    const pod = (await api(server.http, key, 'POST', '/v2/podcasts', { title: 'Graceful show' })).json;
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Late show', reconnectWindow: 4, recording: { podcastId: pod.id } })).json;
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 });
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
    await new Promise((r) => setTimeout(r, 4000)); // A fixed wait on purpose: ~4 s of live audio recorded first
    await server.stop(); // SIGTERM
    p.kill('SIGKILL');
    expect((await episodesOf((await startCli(tmp.dir, env).then((x) => ((server = x), x))).http, key, pod.id)).length).toBe(0);
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'idle', 30_000, 250, 'ended');
    const eps = await waitFor(async () => {
      const e = await episodesOf(server!.http, key, pod.id);
      return e.length > 0 && e[0]!.audio ? e : null;
    }, 30_000, 250, 'episode');
    expect(eps.length).toBe(1);
    expect(eps[0]).toMatchObject({ status: 'draft', sourceStreamId: s.id });
    expect(eps[0]!.audio!.durationSeconds).toBeGreaterThan(3);
    // The recording an earlier run left stays with the broadcast it was made in.
    const broadcasts = await waitFor(async () => {
      const l = (await api(server!.http, key, 'GET', `/v2/streams/${s.id}/broadcasts`)).json.data;
      return l[0]?.episodeId ? l : null;
    }, 10_000, 100, 'the broadcast links its episode');
    expect(broadcasts.map((b: { episodeId: string }) => b.episodeId)).toEqual([eps[0]!.id]);
    await waitFor(async () => readdirSync(path.join(tmp.dir, 'recordings')).length === 0, 10_000, 100, 'the recording forgotten on disk');
  }, 120_000);
});
