/**
 * The retry schedule through the whole server with an injected clock (spec
 * "Retries"; docs/behaviour.md §9): `startServer(config, log, now)` with a clock the test moves. A receiver
 * that always answers 500 gets the first attempt at once, then one attempt each time the clock
 * reaches the `nextAttemptAt` that GET /events/{id} shows — 1 m, 5 m, 30 m, 2 h, 8 h after the end
 * of the previous attempt — and the delivery ends `undelivered` after the sixth.
 */
import { afterAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { api, tempDir, waitFor } from '../../helpers/server.js';

const tmp = tempDir('skylark-wh-clock-');
let server: RunningServer | null = null;
let rx: http.Server | null = null;
afterAll(async () => {
  await server?.close();
  rx?.closeAllConnections();
  await new Promise<void>((r) => (rx ? rx.close(() => r()) : r()));
  tmp.cleanup();
});

describe('retry schedule on an injected clock', () => {
  it('attempts at exactly +1 m, +5 m, +30 m, +2 h, +8 h, then undelivered', async () => {
    const clock = { t: Date.UTC(2026, 2, 15, 12, 0, 0) };
    const hits: number[] = [];
    rx = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        hits.push(clock.t);
        res.writeHead(500).end('down');
      });
    });
    await new Promise<void>((r) => rx!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
    const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1' });
    server = await startServer(config, createLogger('error'), () => clock.t);
    const { secretKey } = await server.accounts.create({ name: 'Clock', plan: 'paid', region: 'eu-west-1' });
    const base = `http://127.0.0.1:${server.httpPort}`;
    const hook = await api(base, secretKey, 'POST', '/v2/webhooks', { url, events: ['*'] });
    const test = await api(base, secretKey, 'POST', `/v2/webhooks/${hook.json.id}/test`);
    expect(test.status, test.text).toBe(200);
    expect(test.json.created).toBe(Math.floor(clock.t / 1000));
    const get = () => api(base, secretKey, 'GET', `/v2/events/${test.json.id}`).then((r) => r.json.deliveries[0]);
    const waits = [60_000, 300_000, 1_800_000, 7_200_000, 28_800_000];
    for (let i = 0; i <= waits.length; i++) {
      const d = await waitFor(async () => {
        const x = await get();
        return x.attempts.length === i + 1 && (x.status !== 'pending' || x.nextAttemptAt) ? x : null;
      }, 20_000, 20, `attempt ${i + 1} recorded`);
      expect(d.attempts[i]).toMatchObject({ responseStatus: 500, error: 'http_500', attemptedAt: new Date(clock.t).toISOString() });
      expect(hits).toHaveLength(i + 1);
      if (i === waits.length) {
        expect(d).toMatchObject({ status: 'undelivered', nextAttemptAt: null });
        break;
      }
      expect(d.status).toBe('pending');
      expect(d.nextAttemptAt).toBe(new Date(clock.t + waits[i]!).toISOString());
      clock.t += waits[i]!; // the engine notices within its poll interval
    }
    expect(hits.map((t, i) => (i ? t - hits[i - 1]! : 0))).toEqual([0, ...waits]);
  });
});
