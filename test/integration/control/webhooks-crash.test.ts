/**
 * Crash durability of webhook delivery: `skylark serve` (compiled dist/, as a
 * child process) is killed with SIGKILL at a random point of a burst of events — `webhook.test`
 * events made over the API, and `listener.joined` events written by another process straight into
 * the outbox table (as another feature's transaction would). A loopback receiver fails the first
 * attempt of about one event in seven. After restart: every event the burst got an answer for is
 * delivered at least once to every endpoint it was meant for; failed deliveries keep the schedule
 * they had before the crash (same next attempt time, no attempt before it); every request carries
 * `Idempotency-Key` = the event id, so duplicates are recognisable. Time passing is simulated by
 * moving the stored due times back while the server is down (no waiting for minutes).
 */
import { afterAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { openDatabase } from '../../../src/base/db/database.js';
import { EventsRepo } from '../../../src/base/db/events-repo.js';
import { Outbox } from '../../../src/base/outbox.js';
import { api, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';

interface Hit {
  path: string;
  id: string;
  key: string;
  status: number;
  at: number;
}

const tmp = tempDir('skylark-wh-crash-');
let server: CliServer | null = null;
let rxServer: http.Server | null = null;
afterAll(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  rxServer?.closeAllConnections();
  await new Promise<void>((r) => (rxServer ? rxServer.close(() => r()) : r()));
  tmp.cleanup();
});

const ENV = { SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1', SKYLARK_LOG_LEVEL: 'error' };
const failsFirst = (id: string) => id.charCodeAt(id.length - 1) % 7 === 0;

async function kill9(s: CliServer): Promise<void> {
  s.child.kill('SIGKILL');
  await exited(s.child);
}

describe('webhook delivery survives kill -9', () => {
  it('delivers every event at least once, keeps the schedule, same Idempotency-Key', async () => {
    // ── receiver ──
    const hits: Hit[] = [];
    const seen = new Set<string>();
    rxServer = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const id = (JSON.parse(body) as { id: string }).id;
        const first = !seen.has(`${req.url} ${id}`);
        seen.add(`${req.url} ${id}`);
        const status = first && failsFirst(id) ? 500 : 200;
        hits.push({ path: req.url ?? '', id, key: String(req.headers['idempotency-key']), status, at: Date.now() });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((r) => rxServer!.listen(0, '127.0.0.1', r));
    const rx = `http://127.0.0.1:${(rxServer.address() as AddressInfo).port}`;

    // ── server, keys, endpoints ──
    server = await startCli(tmp.dir, ENV);
    const key = (await waitFor(() => /secretKey: (svc_sk_\w+)/.exec(server!.stderr())?.[1], 10_000, 20, 'first-start key'))!;
    const accountId = (await waitFor(() => /default account (acct_\w+)/.exec(server!.stderr())?.[1], 10_000, 20, 'account id'))!;
    const hooks: Record<string, string> = {};
    for (const [name, events] of [['a', ['*']], ['b', ['*']], ['c', ['listener.joined']]] as const) {
      const r = await api(server.http, key, 'POST', '/v2/webhooks', { url: `${rx}/${name}`, events });
      expect(r.status, r.text).toBe(201);
      hooks[r.json.id] = `/${name}`;
    }
    const hookIds = Object.keys(hooks);

    // ── burst, killed at a random point ──
    const expected = new Map<string, string[]>(); // event id → paths it must reach
    const other = openDatabase(tmp.dir);
    const outbox = new Outbox(new EventsRepo(other));
    const killAt = 80 + Math.floor(Math.random() * 300);
    let accepted = 0;
    let killed = false;
    const srv = server;
    const client = async (n: number) => {
      for (let i = 0; !killed; i++) {
        if (i % 4 === 3) {
          // another feature's transaction, from another process
          const id = other.transaction(() => outbox.record(accountId, 'listener.joined', { object: { id: `lst_${n}_${i}`, object: 'listener' } }).id)();
          expected.set(id, ['/a', '/b', '/c']);
        } else {
          const hook = hookIds[(n + i) % hookIds.length]!;
          const r = await api(srv.http, key, 'POST', `/v2/webhooks/${hook}/test`).catch(() => null);
          if (!r || r.status !== 200) continue;
          expected.set(r.json.id, [hooks[hook]!]);
        }
        if (++accepted === killAt) {
          killed = true;
          await kill9(srv);
        }
      }
    };
    await Promise.all([0, 1, 2, 3].map(client));
    expect(srv.child.signalCode).toBe('SIGKILL');

    // What was scheduled before the crash (failed attempts committed): it must not move.
    const before = other
      .prepare("SELECT event_id, webhook_id, attempt_count, next_attempt_at FROM webhook_deliveries WHERE status = 'pending' AND attempt_count > 0")
      .all() as Array<{ event_id: string; webhook_id: string; attempt_count: number; next_attempt_at: number }>;

    // ── restart ──
    server = await startCli(tmp.dir, ENV);
    const okAt = (id: string, path: string) => hits.some((h) => h.id === id && h.path === path && h.status === 200);
    const failedOnce = (id: string, path: string) => hits.some((h) => h.id === id && h.path === path && h.status === 500);
    // Everything is either delivered or has its first failure on record (and waits a minute).
    await waitFor(
      () => [...expected].every(([id, paths]) => paths.every((p) => okAt(id, p) || failedOnce(id, p))),
      60_000,
      100,
      'every event attempted after restart',
    );
    const pendingNow = other
      .prepare("SELECT event_id, webhook_id, attempt_count, next_attempt_at FROM webhook_deliveries WHERE status = 'pending' AND attempt_count > 0")
      .all() as typeof before;
    const nowMap = new Map(pendingNow.map((d) => [`${d.event_id} ${d.webhook_id}`, d]));
    for (const d of before) {
      const after = nowMap.get(`${d.event_id} ${d.webhook_id}`);
      expect(after, 'a scheduled retry neither lost nor made early').toEqual(d);
      // No attempt reached the receiver between the crash and the due time.
      const path = hooks[d.webhook_id]!;
      expect(hits.filter((h) => h.id === d.event_id && h.path === path && h.status === 200)).toHaveLength(0);
    }
    expect(pendingNow.length).toBeGreaterThan(0);
    for (const d of pendingNow) expect(d.next_attempt_at).toBeGreaterThan(Date.now() + 1_000);

    // ── time passes (moved while the server is down again), restart: the retries happen ──
    await kill9(server);
    other.prepare("UPDATE webhook_deliveries SET next_attempt_at = next_attempt_at - 120000 WHERE status = 'pending'").run();
    server = await startCli(tmp.dir, ENV);
    await waitFor(() => [...expected].every(([id, paths]) => paths.every((p) => okAt(id, p))), 60_000, 100, 'every event delivered');
    // Events committed by requests the crash cut off are delivered too: nothing stays behind.
    const notDelivered = other.prepare("SELECT COUNT(*) FROM webhook_deliveries WHERE status != 'delivered'").pluck();
    await waitFor(() => notDelivered.get() === 0, 30_000, 100, 'no delivery left behind');
    for (const h of hits) expect(h.key).toBe(h.id);
    if (process.env.WH_CRASH_DEBUG) console.log({ killAt, accepted, events: expected.size, hits: hits.length, scheduledBefore: before.length, pendingAfterRestart: pendingNow.length, duplicates: hits.length - new Set(hits.map((h) => `${h.path} ${h.id} ${h.status}`)).size });
    other.close();
    await server.stop();
    expect(accepted).toBeGreaterThanOrEqual(killAt);
  });
});
