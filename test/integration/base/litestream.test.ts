/**
 * Disaster recovery of the one writer (docs/backup.md): Litestream (`@flydotio/litestream-linux-x64`, a
 * optional dependency that ships the binary) replicates `skylark.db` continuously to a local file
 * replica while `skylark serve` runs; the node secret (`secret.key`, written once at first start)
 * is copied beside the replica once. Then the disaster: the server is killed (SIGKILL) and its data
 * dir destroyed. `litestream restore` into a new data dir plus the saved secret brings a node back
 * with:
 * - its streams (a restored stream key still publishes: FFmpeg takes the stream live),
 * - its API keys (a secret key still authenticates, a publishable key still mints listener tokens),
 * - its webhooks (the endpoint and its signing secret: the redelivery verifies with it),
 * - its pending deliveries (an attempt in flight at the crash is delivered after the restore, with
 *   the same event id).
 *
 * Skipped, with a message, when no Litestream binary is found (neither the npm package nor
 * `litestream` on PATH).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';
import { openDatabase } from '../../../src/base/db/database.js';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

/** The Litestream binary: the npm package's, else one on PATH; null when there is none. */
function litestreamBinary(): string | null {
  try {
    const pkg = createRequire(import.meta.url).resolve(`@flydotio/litestream-${process.platform}-${process.arch}/package.json`);
    const bin = path.join(path.dirname(pkg), 'litestream');
    if (existsSync(bin)) return bin;
  } catch {
    /* not installed */
  }
  const r = spawnSync('bash', ['-c', 'command -v litestream'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : null;
}

const LITESTREAM = litestreamBinary();
if (!LITESTREAM) process.stderr.write('litestream.test.ts: no Litestream binary (npm ci installs @flydotio/litestream-linux-x64 on Linux x64): the backup test is skipped\n');

const tmp = tempDir('skylark-litestream-');
const children: ChildProcess[] = [];
let server: CliServer | null = null;
let receiver: http.Server | null = null;
afterAll(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  receiver?.closeAllConnections();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  tmp.cleanup();
});

const ENV = { SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1', SKYLARK_LOG_LEVEL: 'error' };

describe.skipIf(!LITESTREAM)('Litestream backup and restore (docs/backup.md)', () => {
  it('brings a destroyed node back with its streams, keys, webhooks and pending deliveries', async () => {
    const data = path.join(tmp.dir, 'data');
    const backup = path.join(tmp.dir, 'backup');
    mkdirSync(backup, { recursive: true });
    const config = path.join(tmp.dir, 'litestream.yml');
    writeFileSync(config, `dbs:\n  - path: ${data}/skylark.db\n    replicas:\n      - type: file\n        path: ${backup}/db\n        sync-interval: 1s\n`);

    // A receiver that holds the first delivery open (in flight when the node dies), then answers 200.
    const hits: Array<{ id: string; key: string; sig: string; body: string }> = [];
    let answer = false;
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        hits.push({ id: JSON.parse(body).id, key: String(req.headers['idempotency-key']), sig: String(req.headers['service-signature']), body });
        if (answer) res.end('ok'); // else: never answered
      });
    });
    await new Promise<void>((r) => receiver!.listen(0, '127.0.0.1', () => r()));
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    // The node, replicated from its first start; the secret copied beside the replica once.
    server = await startCli(data, ENV);
    const replicate = spawn(LITESTREAM!, ['replicate', '-config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(replicate);
    let replicateErr = '';
    replicate.stderr!.on('data', (d) => (replicateErr += d));
    copyFileSync(path.join(data, 'secret.key'), path.join(backup, 'secret.key'));

    const acct = JSON.parse(await runCli(['accounts', 'create', '--name', 'Backed up', '--plan', 'paid', '--json', '--data-dir', data]));
    const sk = acct.secretKey as string;
    const pk = acct.publishableKey as string;
    const streams: any[] = [];
    for (const title of ['Morning show', 'Night show']) streams.push((await api(server.http, sk, 'POST', '/v2/streams', { title, reconnectWindow: 1 })).json);
    const created = await api(server.http, sk, 'POST', '/v2/webhooks', { url: hookUrl, events: ['stream.ended'] });
    expect(created.status, created.text).toBe(201);
    const hook = created.json;
    expect(hook.signingSecret).toMatch(/^whsec_/);
    const test = await api(server.http, sk, 'POST', `/v2/webhooks/${hook.id}/test`);
    expect(test.status).toBe(200);
    await waitFor(() => hits.length === 1, 10_000, 50, 'the first delivery attempt');
    const eventId = hits[0]!.id;

    // Caught up: a restore of the replica has the pending delivery (Litestream ships the WAL each second).
    const probe = path.join(tmp.dir, 'probe');
    await waitFor(
      () => {
        rmSync(probe, { recursive: true, force: true });
        mkdirSync(probe);
        const r = spawnSync(LITESTREAM!, ['restore', '-o', path.join(probe, 'skylark.db'), `file://${backup}/db`], { encoding: 'utf8' });
        if (r.status !== 0) return false;
        const db = openDatabase(probe);
        try {
          return (db.prepare("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").pluck().get() as number) === 1;
        } finally {
          db.close();
        }
      },
      20_000,
      500,
      'the replica to hold the pending delivery',
    );

    // The disaster: the node dies with the attempt in flight, its data dir is gone.
    server.child.kill('SIGKILL');
    await exited(server.child);
    replicate.kill('SIGTERM');
    await exited(replicate);
    rmSync(data, { recursive: true, force: true });
    expect(existsSync(data)).toBe(false);

    // The restore: the database from the replica, the secret from beside it.
    const restored = path.join(tmp.dir, 'restored');
    mkdirSync(restored);
    const r = spawnSync(LITESTREAM!, ['restore', '-config', config, '-o', path.join(restored, 'skylark.db'), `${data}/skylark.db`], { encoding: 'utf8' });
    expect(r.status, `${r.stderr}\n${replicateErr}`).toBe(0);
    copyFileSync(path.join(backup, 'secret.key'), path.join(restored, 'secret.key'));

    answer = true;
    server = await startCli(restored, ENV);
    // Keys authenticate; the streams are there, with their stream keys (decrypted with the restored secret).
    const list = await api(server.http, sk, 'GET', '/v2/streams?limit=10');
    expect(list.status).toBe(200);
    expect(list.json.data.map((s: any) => s.id).sort()).toEqual(streams.map((s) => s.id).sort());
    const one = (await api(server.http, sk, 'GET', `/v2/streams/${streams[0].id}`)).json;
    expect(one.streamKey).toBe(streams[0].streamKey);
    expect((await api(server.http, pk, 'POST', `/v2/streams/${streams[0].id}/listener_tokens`)).status).toBe(201);
    // The webhook is there, and the pending delivery arrives, signed with its restored secret.
    expect((await api(server.http, sk, 'GET', `/v2/webhooks/${hook.id}`)).json.url).toBe(hookUrl);
    await waitFor(() => hits.length >= 2, 15_000, 50, 'the pending delivery after the restore');
    const again = hits[1]!;
    expect(again.id).toBe(eventId);
    expect(again.key).toBe(eventId);
    const [t, v1] = again.sig.split(',').map((p) => p.split('=')[1]);
    expect(v1).toBe(createHmac('sha256', hook.signingSecret).update(`${t}.${again.body}`).digest('hex'));
    await waitFor(async () => (await api(server!.http, sk, 'GET', `/v2/events/${eventId}`)).json.deliveries?.[0]?.status === 'delivered', 10_000, 100, 'delivered');
    // A restored stream key still publishes.
    const night = (await api(server.http, sk, 'GET', `/v2/streams/${streams[1].id}`)).json; // this node's RTMP address
    expect(night.streamKey).toBe(streams[1].streamKey);
    const pub = publish(`${night.rtmpUrl}/${streams[1].streamKey}`, { seconds: 10 });
    children.push(pub);
    await waitFor(async () => (await api(server!.http, sk, 'GET', `/v2/streams/${streams[1].id}`)).json.status === 'live', 15_000, 100, 'live');
    pub.kill('SIGKILL');
    await server.stop();
  }, 90_000);
});
