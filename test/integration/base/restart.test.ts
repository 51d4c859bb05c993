/**
 * Crash safety: `skylark serve` is killed with SIGKILL while a stream is live; the SQLite file is
 * reopened by a new process, the stream keeps its state and ends after its reconnect window with
 * exactly one stream.ended event.
 */
import { afterAll, describe, expect, it } from 'vitest';
import Sqlite from 'better-sqlite3';
import path from 'node:path';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

describe('restart after a crash', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('keeps every row and ends a stream left live once its window passes', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Crash', '--plan', 'free', '--json', '--data-dir', tmp.dir])).secretKey;
    server = await startCli(tmp.dir);
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Survivor', reconnectWindow: 3, metadata: { show: 'night' } })).json;
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');

    server.child.kill('SIGKILL');
    await exited(server.child);
    expect(await exited(p)).not.toBe(0); // the publisher lost its server

    server = await startCli(tmp.dir);
    const after = (await api(server.http, key, 'GET', `/v2/streams/${s.id}`)).json;
    expect(after).toMatchObject({ id: s.id, status: 'live', title: 'Survivor', metadata: { show: 'night' }, streamKey: s.streamKey });
    await waitFor(async () => (await api(server!.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'idle', 15_000, 200, 'ended');

    const db = new Sqlite(path.join(tmp.dir, 'skylark.db'), { readonly: true });
    const types = (db.prepare('SELECT type FROM events ORDER BY seq').pluck().all() as string[]);
    db.close();
    expect(types).toEqual(['stream.started', 'stream.ended']);
  });
});
