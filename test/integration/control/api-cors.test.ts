/**
 * CORS on `/v2` (docs/api-platform.md "CORS"): preflights answer 204 with the allowed methods and
 * headers, need no key and cost nothing against the rate limit; every answer — success, 4xx from
 * the guard or the handler, 429 — carries `Access-Control-Allow-Origin: *` and exposes the request
 * id and rate-limit headers. Then a real browser: a page on another origin holding a publishable
 * key mints a listener token with `fetch` and reads the answer and an exposed header.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';

let s: TestServer;

beforeAll(async () => {
  s = await startInProcess();
});
afterAll(async () => {
  await s?.close();
});

const preflight = (p: string, method = 'POST', headers = 'authorization, content-type, idempotency-key') =>
  fetch(`${s.http}${p}`, { method: 'OPTIONS', headers: { Origin: 'https://player.example', 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers } });

function expectCors(h: Headers) {
  expect(h.get('access-control-allow-origin')).toBe('*');
  const exposed = (h.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
  for (const name of ['x-request-id', 'ratelimit', 'ratelimit-policy', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after']) expect(exposed).toContain(name);
}

describe('CORS on /v2', () => {
  it('answers preflights on every kind of /v2 route with 204 and the allowed methods and headers, without a key', async () => {
    const stream = (await api(s.http, s.secretKey, 'POST', '/v2/streams', { title: 'CORS' })).json;
    const podcast = (await api(s.http, s.secretKey, 'POST', '/v2/podcasts', { title: 'CORS cast' })).json;
    const episode = (await api(s.http, s.secretKey, 'POST', `/v2/podcasts/${podcast.id}/episodes`, { title: 'One' })).json;
    const paths = [
      '/v2/streams',
      `/v2/streams/${stream.id}`,
      `/v2/streams/${stream.id}/listener_tokens`,
      `/v2/streams/${stream.id}/tracks`,
      '/v2/events',
      '/v2/account',
      '/v2/openapi.json',
      `/v2/podcasts/${podcast.id}/episodes/${episode.id}/audio`,
    ];
    for (const p of paths) {
      const r = await preflight(p);
      expect(r.status, p).toBe(204);
      expect(await r.text()).toBe('');
      expect(r.headers.get('access-control-allow-origin'), p).toBe('*');
      const methods = (r.headers.get('access-control-allow-methods') ?? '').split(/\s*,\s*/);
      for (const m of ['GET', 'POST', 'PATCH', 'DELETE', 'OPTIONS']) expect(methods, p).toContain(m);
      const allowed = (r.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
      for (const h of ['authorization', 'content-type', 'idempotency-key']) expect(allowed, p).toContain(h);
      expect(Number(r.headers.get('access-control-max-age'))).toBeGreaterThan(0);
    }
  });

  it('preflights do not count against the rate limit', async () => {
    const first = await api(s.http, s.secretKey, 'GET', '/v2/account');
    const before = Number(first.headers.get('x-ratelimit-remaining'));
    for (let i = 0; i < 20; i++) expect((await preflight('/v2/account', 'GET', 'authorization')).status).toBe(204);
    const after = Number((await api(s.http, s.secretKey, 'GET', '/v2/account')).headers.get('x-ratelimit-remaining'));
    // Exactly one request (the second GET) was counted between the two readings.
    expect(after).toBe(before - 1);
  });

  it('every answer carries Access-Control-Allow-Origin and the exposed headers: 200, 201, 400, 401, 403, 404, 429', async () => {
    const ok = await api(s.http, s.secretKey, 'GET', '/v2/streams');
    expect(ok.status).toBe(200);
    expectCors(ok.headers);
    const created = await api(s.http, s.secretKey, 'POST', '/v2/streams', { title: 'x' }, { 'Idempotency-Key': 'cors-1' });
    expect(created.status).toBe(201);
    expectCors(created.headers);
    expect(created.headers.get('access-control-expose-headers')).toMatch(/Idempotent-Replayed/);
    const bad = await api(s.http, s.secretKey, 'POST', '/v2/streams', { title: 'x', nope: 1 });
    expect(bad.status).toBe(400);
    expectCors(bad.headers);
    const noKey = await api(s.http, null, 'GET', '/v2/streams');
    expect(noKey.status).toBe(401);
    expectCors(noKey.headers);
    const scope = await api(s.http, s.publishableKey, 'POST', '/v2/streams', { title: 'x' });
    expect(scope.status).toBe(403);
    expectCors(scope.headers);
    const missing = await api(s.http, s.secretKey, 'GET', '/v2/streams/stm_nope');
    expect(missing.status).toBe(404);
    expectCors(missing.headers);
    const doc = await api(s.http, null, 'GET', '/v2/openapi.json');
    expect(doc.status).toBe(200);
    expectCors(doc.headers);
    // The server's own refusals under /v2: an unknown URL (404) and a method the route lacks (405).
    const noRoute = await api(s.http, s.secretKey, 'GET', '/v2/no_such_resource');
    expect(noRoute.status).toBe(404);
    expectCors(noRoute.headers);
    const wrongMethod = await api(s.http, s.secretKey, 'PUT', '/v2/streams');
    expect(wrongMethod.status).toBe(405);
    expectCors(wrongMethod.headers);

    // A free account's 61st request in the window is refused with 429, still readable by a browser.
    const free = await s.server.accounts.create({ name: 'Free', plan: 'free', region: 'eu-west-1' });
    let last = await api(s.http, free.secretKey, 'GET', '/v2/account');
    for (let i = 0; i < 70 && last.status !== 429; i++) last = await api(s.http, free.secretKey, 'GET', '/v2/account');
    expect(last.status).toBe(429);
    expectCors(last.headers);
    expect(last.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('a page on another origin with a publishable key mints a listener token with fetch and reads an exposed header', async () => {
    const stream = (await api(s.http, s.secretKey, 'POST', '/v2/streams', { title: 'Browser', playback: 'token' })).json;
    const page = `<!doctype html><meta charset="utf-8"><title>token minter</title><script>
window.mint = async (base, key, streamId) => {
  const res = await fetch(base + '/v2/streams/' + streamId + '/listener_tokens', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json', 'Idempotency-Key': 'browser-1' },
    body: '{}',
  });
  return { status: res.status, body: await res.json(), requestId: res.headers.get('X-Request-ID'), remaining: res.headers.get('X-RateLimit-Remaining') };
};
</script>`;
    const origin = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(page);
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const pagePort = (origin.address() as { port: number }).port;
    const profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      timeout: 30_000,
    });
    try {
      const tab = browser.pages()[0] ?? (await browser.newPage());
      // `localhost` for the page, 127.0.0.1 for the API: two origins, so fetch runs the CORS protocol (with a preflight).
      await tab.goto(`http://localhost:${pagePort}/`);
      const out = await tab.evaluate(([base, key, id]) => (globalThis as unknown as { mint: (a: string, b: string, c: string) => Promise<any> }).mint(base!, key!, id!), [s.http, s.publishableKey, stream.id]);
      expect(out.status).toBe(201);
      expect(out.body.object).toBe('listener_token');
      expect(typeof out.body.token).toBe('string');
      expect(out.requestId).toMatch(/^req_/);
      expect(out.remaining).toMatch(/^\d+$/);
    } finally {
      await browser.close().catch(() => {});
      origin.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }, 60_000);
});
