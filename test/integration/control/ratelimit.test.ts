/**
 * Rate limits per account (docs/behaviour.md §7, §9): free 60 / paid 500 per 60 s, an exact sliding window
 * checked at its edges with an injected clock; `RateLimit-Policy` / `RateLimit`
 * (draft-ietf-httpapi-ratelimit-headers, parsed with `structured-headers`), `X-RateLimit-*`,
 * `Retry-After` on 429 `rate_limit_error`; 401s and 429s do not count; openapi.json is not limited;
 * GET /v2/account shows the usage. Every /v2 answer is also checked against the OpenAPI document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseList, Token } from 'structured-headers';
import { api, tempDir } from '../../helpers/server.js';
import { OpenApiChecker } from '../../helpers/platform.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';

let clock = 1_800_000_000_000; // a fixed start, so window arithmetic is exact
const now = () => clock;
const tmp = tempDir('skylark-rl-');
let srv: RunningServer;
let base: string;
let checker: OpenApiChecker;

beforeAll(async () => {
  srv = await startServer(loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' }), createLogger('error'), now);
  base = `http://127.0.0.1:${srv.httpPort}`;
  checker = new OpenApiChecker((await api(base, null, 'GET', '/v2/openapi.json')).json);
  checker.observe(srv);
});
afterAll(async () => {
  expect(checker.problems).toEqual([]);
  await srv?.close();
  tmp.cleanup();
});

const newAccount = async (plan: 'free' | 'paid') => srv.accounts.create({ name: plan, plan, region: 'eu-west-1' });
const get = (key: string) => api(base, key, 'GET', '/v2/streams?limit=1');

/** The parsed rate-limit headers of an answer. */
function limits(h: Headers) {
  const policy = parseList(h.get('ratelimit-policy')!);
  const state = parseList(h.get('ratelimit')!);
  expect(policy).toHaveLength(1);
  expect(state).toHaveLength(1);
  const [pName, pParams] = policy[0]!;
  const [sName, sParams] = state[0]!;
  expect(typeof pName).toBe('string'); // an sf-string, not a token
  expect(pName).not.toBeInstanceOf(Token);
  expect(sName).toBe(pName);
  return {
    name: pName as string,
    q: pParams.get('q') as number,
    w: pParams.get('w') as number,
    r: sParams.get('r') as number,
    t: sParams.get('t') as number,
    xLimit: Number(h.get('x-ratelimit-limit')),
    xRemaining: Number(h.get('x-ratelimit-remaining')),
    xReset: Number(h.get('x-ratelimit-reset')),
  };
}

describe('headers', () => {
  it('every authenticated answer carries RateLimit-Policy, RateLimit and X-RateLimit-* (paid 500/60)', async () => {
    const a = await newAccount('paid');
    const r = await get(a.secretKey);
    expect(r.status).toBe(200);
    expect(r.headers.get('ratelimit-policy')).toBe('"paid";q=500;w=60');
    expect(r.headers.get('ratelimit')).toBe('"paid";r=499;t=60');
    const l = limits(r.headers);
    expect(l).toMatchObject({ name: 'paid', q: 500, w: 60, r: 499, t: 60, xLimit: 500, xRemaining: 499 });
    expect(l.xReset).toBe(Math.ceil((clock + 60_000) / 1000));
    // Errors after authentication carry them too: 404, 400, 403.
    const nf = await api(base, a.secretKey, 'GET', '/v2/streams/stm_nope');
    expect(nf.status).toBe(404);
    expect(limits(nf.headers).r).toBe(498);
    const bad = await api(base, a.secretKey, 'POST', '/v2/streams', {});
    expect(bad.status).toBe(400);
    expect(limits(bad.headers).r).toBe(497);
    const forbidden = await api(base, a.publishableKey, 'POST', '/v2/streams', { title: 'x' });
    expect(forbidden.status).toBe(403);
    expect(limits(forbidden.headers).r).toBe(496); // per account, not per key
  });

  it('free accounts: "free";q=60;w=60', async () => {
    const a = await newAccount('free');
    const r = await get(a.secretKey);
    expect(r.headers.get('ratelimit-policy')).toBe('"free";q=60;w=60');
    expect(limits(r.headers)).toMatchObject({ q: 60, r: 59, xLimit: 60, xRemaining: 59 });
  });

  it('GET /v2/openapi.json needs no key, is not limited and has no rate-limit headers', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await api(base, null, 'GET', '/v2/openapi.json');
      expect(r.status).toBe(200);
      expect(r.headers.get('ratelimit')).toBeNull();
    }
  });
});

describe('the window', () => {
  it('the 61st request within 60 s → 429 rate_limit_error with Retry-After; 429s and 401s do not count', async () => {
    clock += 3_600_000;
    const a = await newAccount('free');
    const start = clock;
    for (let i = 0; i < 60; i++) {
      const r = await get(a.secretKey);
      expect(r.status).toBe(200);
      clock += 500; // 60 requests over 30 s
    }
    // clock = start + 30 s: the oldest request leaves the window at start + 60 s.
    const refused = await get(a.secretKey);
    expect(refused.status).toBe(429);
    expect(refused.json.error.type).toBe('rate_limit_error');
    expect(refused.json.error.code).toBe('rate_limit_exceeded');
    expect(refused.headers.get('retry-after')).toBe('30');
    const l = limits(refused.headers);
    expect(l).toMatchObject({ r: 0, t: 30, xRemaining: 0 });
    expect(l.xReset).toBe(Math.ceil((start + 60_000) / 1000));
    // Hammering while limited is not counted; nor are bad keys.
    for (let i = 0; i < 5; i++) expect((await get(a.secretKey)).status).toBe(429);
    for (let i = 0; i < 5; i++) expect((await get('svc_sk_' + 'x'.repeat(32))).status).toBe(401);
    clock = start + 59_999;
    expect((await get(a.secretKey)).status).toBe(429);
    clock = start + 60_000; // the first request leaves the window: exactly one slot
    const ok = await get(a.secretKey);
    expect(ok.status).toBe(200);
    expect(limits(ok.headers).r).toBe(0);
    expect((await get(a.secretKey)).status).toBe(429);
    clock = start + 60_500; // the second one leaves
    expect((await get(a.secretKey)).status).toBe(200);
  });

  it('no burst at a window edge: 60 at :59 then more at :61 are still refused (unlike a fixed window)', async () => {
    clock = Math.ceil(clock / 60_000) * 60_000 + 3_600_000; // a minute boundary
    const a = await newAccount('free');
    clock += 59_000;
    for (let i = 0; i < 60; i++) expect((await get(a.secretKey)).status).toBe(200);
    clock += 2_000; // a new calendar minute
    const r = await get(a.secretKey);
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('58');
    clock += 58_000;
    const after = await get(a.secretKey);
    expect(after.status).toBe(200);
    expect(limits(after.headers).r).toBe(59); // all 60 left the window together; this one is counted
  });

  it('paid accounts get 500', async () => {
    clock += 3_600_000;
    const a = await newAccount('paid');
    let last = 0;
    for (let i = 0; i < 500; i++) last = (await get(a.secretKey)).status;
    expect(last).toBe(200);
    const r = await get(a.secretKey);
    expect(r.status).toBe(429);
    expect(r.headers.get('ratelimit')).toBe('"paid";r=0;t=60');
  });

  it('limits can be raised at run time (tests, operators) through the Guard', async () => {
    clock += 3_600_000;
    const a = await newAccount('free');
    const limitsRef = srv.guard.limits;
    limitsRef.free = 2;
    try {
      expect((await get(a.secretKey)).status).toBe(200);
      expect((await get(a.secretKey)).status).toBe(200);
      expect((await get(a.secretKey)).status).toBe(429);
      limitsRef.free = 3;
      expect((await get(a.secretKey)).status).toBe(200);
    } finally {
      limitsRef.free = 60;
    }
  });
});

describe('GET /v2/account', () => {
  it('plan, default region and usage this minute (this request included)', async () => {
    clock += 3_600_000;
    const a = await srv.accounts.create({ name: 'Usage Co', plan: 'free', region: 'ap-southeast-1' });
    await get(a.secretKey);
    clock += 10_000;
    await get(a.secretKey);
    const r = await api(base, a.secretKey, 'GET', '/v2/account');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      id: a.account.id,
      object: 'account',
      name: 'Usage Co',
      plan: 'free',
      defaultRegion: 'ap-southeast-1',
      usage: { object: 'rate_limit_usage', windowSeconds: 60, limit: 60, used: 3, remaining: 57 },
    });
    expect(r.json.usage.resetsAt).toBe(new Date(clock - 10_000 + 60_000).toISOString());
    // Publishable keys lack account:read.
    const pk = await api(base, a.publishableKey, 'GET', '/v2/account');
    expect(pk.status).toBe(403);
    expect(pk.json.error.code).toBe('insufficient_scope');
  });
});
