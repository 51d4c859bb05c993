/**
 * The caps on unconnected WHIP offers (docs/behaviour.md §18, §13): with one pending offer allowed
 * per address, a second from the same address is refused with 429 and `Retry-After` while the first
 * waits; once the first expires unconnected (the offer timeout) its slot is given back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { whipConnect } from '../../helpers/whip-client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess({ SKYLARK_WHEP_MAX_PENDING_PER_IP: '1', SKYLARK_WHEP_OFFER_TIMEOUT_MS: '2000' });
});
afterAll(async () => {
  await t?.close();
});

describe('WHIP pending offers', () => {
  it('caps unconnected offers per address and frees the slot when one expires', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Caps', codec: 'opus' })).json;
    const first = await whipConnect(s.whipUrl, s.streamKey, { apply: false });
    expect(first.status).toBe(201);
    const second = await whipConnect(s.whipUrl, s.streamKey, { apply: false });
    expect(second.status).toBe(429);
    expect(JSON.parse(second.body).error.code).toBe('too_many_pending_offers');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The first never connects: after the offer timeout its session is gone and the slot is free.
    await waitFor(async () => (await fetch(new URL(first.location!, t.http), { method: 'DELETE' })).status === 404, 10_000, 200, 'the unconnected offer dropped');
    const third = await whipConnect(s.whipUrl, s.streamKey, { apply: false });
    expect(third.status).toBe(201);
    expect((await fetch(new URL(third.location!, t.http), { method: 'DELETE' })).status).toBe(200);
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status).toBe('idle');
    for (const c of [first, second, third]) await c.close();
  }, 30_000);
});
