/**
 * The durable scheduler across restarts of `skylark serve` (the CLI process, compiled dist/):
 * episode A falls due while the server is down (SIGKILL) and is published at once on the next
 * start; episode B is scheduled before a restart and falls due after it. Each is published exactly
 * once (one `podcast.published` event), never before its `publishAt`, and appears in the feed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import Sqlite from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function exited(child: CliServer['child']): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
}

describe('scheduled publication across a restart', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('publishes once, at or just after publishAt, whether it fell due while down or after the restart', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Sched', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    const mp3File = path.join(tmp.dir, 'a.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=2', '-c:a', 'libmp3lame', mp3File], { timeout: 30_000 });
    const mp3 = readFileSync(mp3File);

    server = await startCli(tmp.dir);
    const base = server.http;
    const pid = (await api(base, key, 'POST', '/v2/podcasts', { title: 'Restart show' })).json.id;
    const make = async (title: string) => {
      const e = (await api(base, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title })).json;
      const r = await fetch(`${base}/v2/podcasts/${pid}/episodes/${e.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}` }, body: mp3 });
      expect(r.status).toBe(200);
      return e.id as string;
    };
    const a = await make('Due while down');
    const b = await make('Due after restart');
    const atA = Date.now() + 2000;
    const atB = Date.now() + 6000;
    expect((await api(base, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: a, publishAt: new Date(atA).toISOString() })).json.status).toBe('scheduled');
    expect((await api(base, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: b, publishAt: new Date(atB).toISOString() })).json.status).toBe('scheduled');

    // Down hard before A is due; stay down until A is past due.
    server.child.kill('SIGKILL');
    await exited(server.child);
    const downUntil = atA + 500;
    while (Date.now() < downUntil) await sleep(100);
    const db = new Sqlite(path.join(tmp.dir, 'skylark.db'), { readonly: true });
    const statusOf = db.prepare('SELECT status FROM episodes WHERE id = ?').pluck();
    expect(statusOf.get(a)).toBe('scheduled'); // nobody published it while down

    server = await startCli(tmp.dir);
    const get = async (id: string) => (await api(server!.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${id}`)).json;
    const pa = await waitFor(async () => ((await get(a)).status === 'published' ? get(a) : null), 15_000, 100, 'A published after the restart');
    expect(Date.parse(pa.publishedAt)).toBeGreaterThanOrEqual(atA);
    const pbBefore = await get(b);
    if (pbBefore.status === 'published') expect(Date.parse(pbBefore.publishedAt)).toBeGreaterThanOrEqual(atB);
    const pb = await waitFor(async () => ((await get(b)).status === 'published' ? get(b) : null), 20_000, 100, 'B published');
    expect(Date.parse(pb.publishedAt)).toBeGreaterThanOrEqual(atB);

    const feed = await (await fetch(`${server.http}/feed/${pid}.xml`)).text();
    expect(feed).toContain(pa.guid);
    expect(feed).toContain(pb.guid);

    // A second restart changes nothing: exactly one event per episode.
    await server.stop();
    server = await startCli(tmp.dir);
    expect((await get(a)).publishedAt).toBe(pa.publishedAt);
    const events = (db.prepare("SELECT data FROM events WHERE type = 'podcast.published'").pluck().all() as string[]).map((d) => JSON.parse(d).data?.object ?? JSON.parse(d).object);
    db.close();
    expect(events.filter((o: any) => o.id === a)).toHaveLength(1);
    expect(events.filter((o: any) => o.id === b)).toHaveLength(1);
  });
});
