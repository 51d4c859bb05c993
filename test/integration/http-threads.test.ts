import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, type TestServer } from '../helpers/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess({ SKYLARK_HTTP_THREADS: '2' });
});
afterAll(async () => {
  await t?.close();
});

describe('HTTP threads', () => {
  it('answers the API through both threads', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${t.http}/v2/streams`, { headers: { Authorization: `Bearer ${t.secretKey}`, Connection: 'close' } });
      expect(r.status).toBe(200);
      await r.text();
    }
    const r2 = await fetch(`${t.http}/hls/stm_x/index.m3u8`, { headers: { Connection: 'close' } });
    expect(r2.status).toBe(404);
    const c = await t.server.threadCounts();
    console.log(c);
    expect(c.get(1)!.forwarded).toBeGreaterThan(0);
  });
});
