/**
 * A failing SQLite write never ends the process (docs/behaviour.md §13). `skylark serve` runs as a child
 * process with a webhook receiver, a live stream with an HLS listener, and then:
 * - another process holds the database's write lock for 20 s while a second stream goes live: the
 *   server stays up, keeps serving HLS and API reads, and once the lock is gone the stream is
 *   `live` with its `stream.started` event (and webhook) — in order, before any later event;
 * - the data volume (a 4 MiB tmpfs) is full while a stream goes live and records: the server
 *   stays up, the recording stops with `stream.error` `recording_stopped`, and once space is freed
 *   the stream's state and events catch up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import Sqlite from 'better-sqlite3';
import { api, repoRoot, runCli, startCli, tempDir, waitFor, fillVolume, type CliServer } from '../../helpers/server.js';
import { publish, exited } from '../../helpers/publish.js';

/** Holds `BEGIN IMMEDIATE` on the database for `ms`, from another process. Resolves once the lock is held. */
function holdWriteLock(dbFile: string, ms: number): Promise<ChildProcess> {
  const script = `
    const Sqlite = require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'better-sqlite3'))});
    const db = new Sqlite(${JSON.stringify(dbFile)});
    db.pragma('busy_timeout = 10000');
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    setTimeout(() => { db.exec('ROLLBACK'); db.close(); process.exit(0); }, ${ms});
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (c) => reject(new Error(`lock holder exited with ${c}`)));
  });
}

/** A loopback webhook receiver recording event types in arrival order. */
function receiver(): Promise<{ server: Server; url: string; types: string[] }> {
  const types: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      try {
        const e = JSON.parse(body) as { type: string; data: { object: { id?: string } } };
        types.push(`${e.type} ${e.data.object.id ?? ''}`);
      } catch {
        // not an event
      }
      res.writeHead(200).end('ok');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, types })));
}

async function playlistOk(http: string, hlsUrl: string): Promise<boolean> {
  const r = await fetch(hlsUrl.replace(/^http:\/\/[^/]+/, http)).catch(() => null);
  return r?.status === 200;
}

describe('SQLite faults on the live path', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  let rx: Awaited<ReturnType<typeof receiver>>;
  const publishers: ChildProcess[] = [];
  afterAll(async () => {
    for (const p of publishers) p.kill('SIGKILL');
    await server?.stop();
    rx?.server.close();
    tmp.cleanup();
  });

  it('a write lock held elsewhere for 20 s: the server stays up and the stream goes live once it is released', async () => {
    rx = await receiver();
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Locks', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    server = await startCli(tmp.dir, { SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1', SKYLARK_ABR_LADDER: '0' });
    const http = server.http;
    expect((await api(http, key, 'POST', '/v2/webhooks', { url: rx.url, events: ['*'] })).status).toBe(201);
    const a = (await api(http, key, 'POST', '/v2/streams', { title: 'A', reconnectWindow: 0 })).json;
    const b = (await api(http, key, 'POST', '/v2/streams', { title: 'B', reconnectWindow: 0 })).json;
    publishers.push(publish(`${a.rtmpUrl}/${a.streamKey}`, { seconds: 60 }));
    await waitFor(async () => (await api(http, key, 'GET', `/v2/streams/${a.id}`)).json.status === 'live', 15_000, 100, 'A live');
    await waitFor(() => playlistOk(http, a.hlsUrl), 15_000, 200, 'A playable');

    const lock = await holdWriteLock(path.join(tmp.dir, 'skylark.db'), 20_000);
    const lockedAt = Date.now();
    const pb = publish(`${b.rtmpUrl}/${b.streamKey}`, { seconds: 40 });
    publishers.push(pb);
    // B's media goes live (its playlist plays) while its state cannot be written.
    await waitFor(() => playlistOk(http, b.hlsUrl), 15_000, 200, 'B playable under the lock');
    // Meanwhile: HLS of A, API reads, and the process itself keep going.
    for (let i = 0; i < 10; i++) {
      expect(await playlistOk(http, a.hlsUrl)).toBe(true);
      expect((await api(http, key, 'GET', `/v2/streams/${a.id}`)).status).toBe(200);
      expect(server.child.exitCode).toBeNull();
      await new Promise((r) => setTimeout(r, 500)); // A fixed wait on purpose: the node keeps serving for 5 s under the lock.
    }
    expect((await api(http, key, 'GET', `/v2/streams/${b.id}`)).json.status).toBe('idle');
    expect(Date.now() - lockedAt).toBeLessThan(20_000); // all of the above happened under the lock

    expect(await exited(lock)).toBe(0);
    const live = await waitFor(async () => {
      const s = (await api(http, key, 'GET', `/v2/streams/${b.id}`)).json;
      return s.status === 'live' ? s : null;
    }, 15_000, 200, 'B live after the lock');
    // The time of the change is the time it happened, not the time it could be written.
    expect(Date.parse(live.startedAt)).toBeLessThan(lockedAt + 20_000);
    await waitFor(() => rx.types.includes(`stream.started ${b.id}`), 20_000, 200, "B's stream.started webhook");

    // Order kept: B ends after its publisher stops; ended comes after started.
    pb.kill('SIGKILL');
    await waitFor(async () => (await api(http, key, 'GET', `/v2/streams/${b.id}`)).json.status === 'idle', 15_000, 200, 'B ended');
    const db = new Sqlite(path.join(tmp.dir, 'skylark.db'), { readonly: true });
    const types = db.prepare("SELECT type FROM events WHERE json_extract(data, '$.object.id') = ? ORDER BY seq").pluck().all(b.id);
    db.close();
    expect(types).toEqual(['stream.started', 'stream.ended']);
    expect(server.child.exitCode).toBeNull();
  }, 120_000);
});

/** Whether this process may mount a tmpfs (root in a container that allows it). */
function canMount(dir: string): boolean {
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir]);
  return r.status === 0;
}

describe('a full data volume on the live path', () => {
  const tmp = tempDir();
  const vol = path.join(tmp.dir, 'vol');
  let mounted = false;
  let server: CliServer | undefined;
  const publishers: ChildProcess[] = [];
  beforeAll(() => {
    mounted = canMount(vol);
    if (!mounted) console.warn('db-faults: cannot mount a tmpfs here (needs root); the full-volume test is skipped');
  });
  afterAll(async () => {
    for (const p of publishers) p.kill('SIGKILL');
    await server?.stop();
    if (mounted) spawnSync('umount', [vol]);
    tmp.cleanup();
  });

  it('stays up when the volume fills; the recording stops with recording_stopped; state catches up once space is back', async (ctx) => {
    if (!mounted) return ctx.skip();
    const data = path.join(vol, 'data');
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Full', '--plan', 'paid', '--json', '--data-dir', data])).secretKey as string;
    server = await startCli(data, { SKYLARK_ABR_LADDER: '0', SKYLARK_MIN_FREE_DISK_BYTES: '0' });
    const http = server.http;
    const pod = (await api(http, key, 'POST', '/v2/podcasts', { title: 'Full disk show' })).json;
    const s = (await api(http, key, 'POST', '/v2/streams', { title: 'Full', reconnectWindow: 0, recording: { podcastId: pod.id } })).json;

    // Fill the volume to the last byte.
    const filler = path.join(vol, 'filler');
    fillVolume(filler);

    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 });
    publishers.push(p);
    await waitFor(() => playlistOk(http, s.hlsUrl), 15_000, 200, 'playable on a full volume');
    for (let i = 0; i < 6; i++) {
      expect(await playlistOk(http, s.hlsUrl)).toBe(true);
      expect(server.child.exitCode).toBeNull();
      await new Promise((r) => setTimeout(r, 500)); // A fixed wait on purpose: the node keeps serving for 3 s on the full volume.
    }
    expect((await api(http, key, 'GET', `/v2/streams/${s.id}`)).json.status).toBe('idle');

    rmSync(filler);
    await waitFor(async () => (await api(http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 200, 'live once space is back');
    const errors = await waitFor(async () => {
      const list = (await api(http, key, 'GET', '/v2/events?limit=100')).json.data as Array<{ type: string; data: { error?: { code: string } } }>;
      const e = list.filter((x) => x.type === 'stream.error' && x.data.error?.code === 'recording_stopped');
      return e.length > 0 ? e : null;
    }, 15_000, 200, 'recording_stopped');
    expect(errors.length).toBe(1);
    expect(server.child.exitCode).toBeNull();
  }, 120_000);
});
