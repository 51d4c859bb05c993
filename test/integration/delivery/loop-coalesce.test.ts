/**
 * Fewer wake-ups of a busy HTTP thread (docs/http.md "Fewer wake-ups under load"), on a real
 * server on port 0 with raw keep-alive connections:
 * - below `SKYLARK_HTTP_WAKE_MIN_CONNECTIONS` open connections the loop never sleeps before a wait;
 * - at or above it, requests arriving one by one make it sleep out the interval before its waits,
 *   and every request is still answered, whole and in order;
 * - the front's open-connection count follows the connections opened and closed;
 * - `SKYLARK_HTTP_WAKE_INTERVAL_US=0` turns it off (no sleep with any number of connections).
 * No timing is asserted: only whether the loop slept and that every answer is right.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { RawConn } from '../../helpers/http-responses.js';
import { coalesceLoop, httpFrontCounts, loopCoalesceCounts } from '../../../src/native/http-front.js';
import { loadConfig } from '../../../src/base/config.js';

const MIN = 24;
const INTERVAL_US = 2000;
let t: TestServer;
let port = 0;

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_HTTP_WAKE_INTERVAL_US: String(INTERVAL_US), SKYLARK_HTTP_WAKE_MIN_CONNECTIONS: String(MIN) });
  port = Number(new URL(t.http).port);
}, 60_000);

afterAll(async () => {
  await t?.close();
});

/** `n` keep-alive connections, each having answered one request (so the server has accepted them all). */
async function open(n: number): Promise<RawConn[]> {
  const conns = Array.from({ length: n }, () => new RawConn(port));
  await rounds(conns, 1);
  return conns;
}

/** `k` rounds of one `GET /healthz` per connection, the connections one after the other; checks every answer. */
async function rounds(conns: RawConn[], k: number): Promise<void> {
  for (let i = 0; i < k; i++) {
    for (const c of conns) {
      c.send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body.toString())).toEqual({ status: 'ok' });
    }
  }
}

function sleeps(): number {
  return loopCoalesceCounts()?.sleeps ?? 0;
}

describe('wake-up coalescing of the HTTP thread', () => {
  it('is installed on the thread that serves HTTP', () => {
    expect(loopCoalesceCounts()).not.toBeNull();
  });

  it('never sleeps below the connection threshold', async () => {
    const before = httpFrontCounts().openConnections;
    const conns = await open(4);
    expect(httpFrontCounts().openConnections).toBeGreaterThanOrEqual(before + 4);
    expect(httpFrontCounts().openConnections).toBeLessThan(MIN);
    const s0 = sleeps();
    await rounds(conns, 20);
    expect(sleeps()).toBe(s0);
    for (const c of conns) c.end();
  });

  it('sleeps before its waits at or above the threshold, and answers every request', async () => {
    const conns = await open(MIN + 4);
    expect(httpFrontCounts().openConnections).toBeGreaterThanOrEqual(MIN);
    const s0 = sleeps();
    const w0 = loopCoalesceCounts()!.waits;
    await rounds(conns, 5);
    expect(sleeps()).toBeGreaterThan(s0);
    expect(loopCoalesceCounts()!.waits).toBeGreaterThan(w0);
    // Pipelined on one connection and spread over all: still whole and in order.
    const c = conns[0]!;
    c.send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3));
    const three = await c.responses(3);
    expect(three.map((r) => r.status)).toEqual([200, 200, 200]);
    for (const x of conns) x.end();
    // Closed connections leave the count (the server sees each close).
    await waitFor(() => httpFrontCounts().openConnections < MIN, 10_000, 50, 'the closes counted');
  });

  it('does not sleep with the interval at 0', async () => {
    coalesceLoop(0, MIN);
    try {
      const conns = await open(MIN + 4);
      const s0 = sleeps();
      await rounds(conns, 3);
      expect(sleeps()).toBe(s0);
      for (const c of conns) c.end();
    } finally {
      coalesceLoop(INTERVAL_US, MIN);
    }
  });

  it('refuses settings out of range', () => {
    expect(() => coalesceLoop(100_001, 0)).toThrow(TypeError);
    expect(() => coalesceLoop(-1, 0)).toThrow(TypeError);
    expect(() => loadConfig({ SKYLARK_HTTP_WAKE_INTERVAL_US: '100001' })).toThrow(/SKYLARK_HTTP_WAKE_INTERVAL_US/);
    expect(() => loadConfig({ SKYLARK_HTTP_WAKE_MIN_CONNECTIONS: 'many' })).toThrow(/SKYLARK_HTTP_WAKE_MIN_CONNECTIONS/);
  });
});
