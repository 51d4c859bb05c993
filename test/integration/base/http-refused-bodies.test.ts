/**
 * Refused request bodies reach their answer (docs/behaviour.md §13, src/base/http/body.ts): a client sending
 * a 5 MB body to a route with a smaller cap — JSON API, form (OAuth), rawBody (WHEP), streamed
 * upload — reads the 413 envelope instead of a connection reset, with and without
 * `Content-Length`, through node:http and fetch; errors answered before the body is read (401,
 * 404) too. A client that keeps sending forever is still cut off within the drain bounds, and the
 * server's memory stays flat meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { sendFrom, type ClientRequest, type Outcome } from './body-client.js';
import { DRAIN_MAX_MS, DRAIN_MIN_BYTES } from '../../../src/base/http/body.js';

const MiB = 1024 * 1024;
const FIVE_MB = 5_000_000;

async function send(base: string, method: string, p: string, headers: Record<string, string>, total: number | null, o: Omit<ClientRequest, 'url' | 'method' | 'headers' | 'total'>): Promise<Outcome> {
  return (await sendFrom([{ url: base + p, method, headers, total, ...o }]))[0]!;
}

/** The error envelope of an outcome, failing with what the client saw when there is none. */
function envelope(r: Outcome, status: number): { type: string; code: string; requestId: string } {
  expect(r.error, `the client saw ${r.error} instead of the ${status} (sent ${r.sent} bytes)`).toBeUndefined();
  expect(r.status, r.text).toBe(status);
  const j = JSON.parse(r.text!);
  expect(j.error.requestId).toBe(r.headers!['x-request-id']);
  return j.error;
}

describe('a refused body gets its answer (in-process server)', () => {
  let s: TestServer;
  let key: string;
  let audioPath: string;

  beforeAll(async () => {
    s = await startInProcess({ SKYLARK_MAX_UPLOAD_BYTES: String(MiB) });
    key = s.secretKey;
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Caps' })).json.id;
    const eid = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Too big' })).json.id;
    audioPath = `/v2/podcasts/${pid}/episodes/${eid}/audio`;
  });
  afterAll(async () => {
    await s?.close();
  });

  for (const chunked of [false, true]) {
    const how = chunked ? 'chunked' : 'with Content-Length';
    it(`JSON API: 5 MB ${how} → 413 body_too_large read by node:http, counted as a limit hit`, async () => {
      const before = s.server.limits.count('http_body_bytes');
      const r = await send(s.http, 'POST', '/v2/streams', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, FIVE_MB, { chunked });
      expect(envelope(r, 413)).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });
      expect(s.server.limits.count('http_body_bytes')).toBe(before + 1);
    });

    it(`form route (OAuth token): 5 MB ${how} → 413 read by the client`, async () => {
      const r = await send(s.http, 'POST', '/oauth/token', { 'Content-Type': 'application/x-www-form-urlencoded' }, FIVE_MB, { chunked });
      expect(r.error, `the client saw ${r.error}`).toBeUndefined();
      expect(r.status, r.text).toBe(413);
      expect(JSON.parse(r.text!)).toMatchObject({ error: 'invalid_request' });
    });

    it(`rawBody route (WHEP offer): 5 MB ${how} → 413 body_too_large`, async () => {
      const r = await send(s.http, 'POST', '/whep/stm_nothing', { 'Content-Type': 'application/sdp' }, FIVE_MB, { chunked });
      expect(envelope(r, 413)).toMatchObject({ code: 'body_too_large' });
    });

    it(`streamed upload over its 1 MiB cap: 5 MB ${how} → 413 body_too_large, no file left`, async () => {
      const r = await send(s.http, 'PUT', audioPath, { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, FIVE_MB, { chunked });
      expect(envelope(r, 413)).toMatchObject({ code: 'body_too_large' });
      expect(readdirSync(`${s.dataDir}/media/.tmp`)).toEqual([]);
    });

    it(`answers given before the body is read (401, 404, 405) reach the client: 5 MB ${how}`, async () => {
      expect(envelope(await send(s.http, 'POST', '/v2/streams', { 'Content-Type': 'application/json' }, FIVE_MB, { chunked }), 401).code).toBe('missing_token');
      expect(envelope(await send(s.http, 'POST', '/v2/nothing', { 'Content-Type': 'application/json' }, FIVE_MB, { chunked }), 404).code).toBe('route_not_found');
      expect(envelope(await send(s.http, 'PUT', '/v2/streams', { Authorization: `Bearer ${key}` }, FIVE_MB, { chunked }), 405).code).toBe('method_not_allowed');
      expect(envelope(await send(s.http, 'PUT', audioPath, { 'Content-Type': 'audio/mpeg' }, FIVE_MB, { chunked }), 401).code).toBe('missing_token');
    });
  }

  it('fetch reads the 413 envelope, with a Buffer body (Content-Length) and a stream body (chunked)', async () => {
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const [a, b, c] = await sendFrom([
      { url: `${s.http}/v2/streams`, method: 'POST', headers, total: FIVE_MB, chunked: false, client: 'fetch' },
      { url: `${s.http}/v2/streams`, method: 'POST', headers, total: FIVE_MB, chunked: true, client: 'fetch-stream' },
      { url: `${s.http}/whep/stm_nothing`, method: 'POST', headers: { 'Content-Type': 'application/sdp' }, total: FIVE_MB, chunked: false, client: 'fetch' },
    ]);
    expect(envelope(a!, 413)).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });
    expect(envelope(b!, 413).code).toBe('body_too_large');
    expect(envelope(c!, 413).code).toBe('body_too_large');
  });

  it('the connection stays usable after a drained 413 (keep-alive)', async () => {
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const [big, next] = await sendFrom([
      { url: `${s.http}/v2/streams`, method: 'POST', headers, total: 3 * MiB, chunked: true },
      // Two spaces: an empty body, read and validated on the same socket.
      { url: `${s.http}/v2/streams`, method: 'POST', headers, total: 2, chunked: false },
    ]);
    expect(envelope(big!, 413).code).toBe('body_too_large');
    expect(next!.reused).toBe(true);
    expect(envelope(next!, 400)).toMatchObject({ code: 'param_required' });
  });

  it('a fast endless body is cut off after the byte bound; the server\'s RSS stays flat', async () => {
    await send(s.http, 'POST', '/whep/stm_nothing', { 'Content-Type': 'application/sdp' }, 128 * 1024, { chunked: true }); // warm up
    const base = rss();
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 20);
    try {
      for (const p of ['/whep/stm_nothing', '/v2/nothing', '/v2/streams']) {
        const r = await send(s.http, 'POST', p, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, null, { chunked: true });
        // It ended (the drain bound closed the connection): whatever the client read or saw then,
        // it did not get to send much more than the allowance (plus what socket buffers hold).
        expect(r.status ?? r.error, `${p}: ${JSON.stringify(r)}`).toBeDefined();
        expect(r.sent, p).toBeLessThan(MiB + DRAIN_MIN_BYTES + 24 * MiB);
      }
    } finally {
      clearInterval(sampler);
    }
    expect(peak - base, `RSS ${base} → peak ${peak}`).toBeLessThan(48 * MiB);
    expect((await api(s.http, key, 'GET', '/v2/streams?limit=1')).status).toBe(200); // still serving
  });

  it('a slow endless body is cut off after the time bound', async () => {
    // Over the 64 KiB offer cap at once, then 1 KiB every 100 ms forever.
    const r = await send(s.http, 'POST', '/whep/stm_nothing', { 'Content-Type': 'application/sdp' }, null, { chunked: true, fastBytes: 128 * 1024, gapMs: 100 });
    expect(r.status ?? r.error, JSON.stringify(r)).toBeDefined();
    expect(r.ms).toBeLessThan(DRAIN_MAX_MS + 10_000);
    expect(r.sent).toBeLessThan(DRAIN_MIN_BYTES);
  }, 30_000);
});

/** This process's resident set size (bytes; the server runs here, the clients do not), from /proc. */
function rss(): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(m![1]) * 1024;
}
