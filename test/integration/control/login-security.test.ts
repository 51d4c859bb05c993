/**
 * The owner login forms (dashboard and OAuth) over real HTTP, a real SQLite file and a controlled
 * clock, behind a trusted proxy (`SKYLARK_TRUSTED_PROXIES=127.0.0.1/32`) so that each request can
 * come from its own client address:
 * - showing a login form stores nothing (the pre-login CSRF token is a signed cookie), and a login
 *   without that cookie, with a forged or expired one, or with a CSRF field that is not its own is
 *   refused; a normal login works;
 * - failed logins back off per account whatever the client address, with a bounded delay, reset by
 *   a success, shared by both forms, and without locking the owner out at a known address;
 * - a password hash made at the old scrypt cost still verifies and is upgraded at that login.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes, scryptSync } from 'node:crypto';
import { tempDir } from '../../helpers/server.js';
import { Browser, formFields } from '../../helpers/platform.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { OAuthClients } from '../../../src/control/oauth/clients.js';
import { OAuthRepo } from '../../../src/base/db/oauth-repo.js';
import { SCRYPT_COST } from '../../../src/base/auth/secrets.js';

const EMAIL = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';
const CALLBACK = 'http://127.0.0.1:9/callback';

let clock = Date.now();
const now = () => clock;
const tmp = tempDir('skylark-login-');
let srv: RunningServer;
let base: string;
let accountId: string;
let clientId: string;

beforeAll(async () => {
  const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error', SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
  srv = await startServer(config, createLogger('error'), now);
  base = `http://127.0.0.1:${srv.httpPort}`;
  accountId = (await srv.accounts.create({ name: 'Owner Co', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD })).account.id;
  clientId = new OAuthClients(new OAuthRepo(srv.db)).create({ name: 'Acme', redirectUris: [CALLBACK], public: false }).clientId;
});
afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const sessionRows = () => srv.db.prepare('SELECT COUNT(*) FROM sessions').pluck().get() as number;
const authorizeUrl = () => `${base}/oauth/authorize?client_id=${clientId}&redirect_uri=${encodeURIComponent(CALLBACK)}&response_type=code&scope=streams:read&state=s1`;
let ipSeq = 0;
/** A client address not used before in this file. */
const freshIp = () => {
  ipSeq++;
  return `10.${(ipSeq >> 16) & 255}.${(ipSeq >> 8) & 255}.${ipSeq & 255}`;
};

/** Dashboard sign-in from client address `ip`: GET the form, POST it. */
async function dashboardLogin(email: string, password: string, ip: string) {
  const b = new Browser();
  const headers = { 'x-forwarded-for': ip };
  const form = formFields((await b.request(`${base}/dashboard/login`, { headers })).text, 'name="password"');
  const r = await b.request(`${base}${form.action}`, { form: { ...form.hidden, email, password }, headers });
  return { ...r, browser: b };
}

/** OAuth sign-in from client address `ip`: GET /oauth/authorize, POST the login form. */
async function oauthLogin(email: string, password: string, ip: string) {
  const b = new Browser();
  const headers = { 'x-forwarded-for': ip };
  const form = formFields((await b.request(authorizeUrl(), { headers })).text, 'name="password"');
  return b.request(`${base}${form.action}`, { form: { ...form.hidden, email, password }, headers });
}

describe('pre-login CSRF token: a signed cookie, nothing stored', () => {
  it('1,000 anonymous GETs of the login pages leave the sessions table unchanged', async () => {
    const limits = srv.guard.limits;
    const saved = limits.oauthPerIp;
    limits.oauthPerIp = 10_000;
    try {
      const before = sessionRows();
      const cookies = new Set<string>();
      for (let batch = 0; batch < 50; batch++) {
        await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const res = await fetch(i % 2 ? `${base}/dashboard/login` : authorizeUrl(), { redirect: 'manual' });
            expect(res.status).toBe(200);
            const html = await res.text();
            expect(formFields(html, 'name="password"').hidden.csrf_token).toMatch(/^[A-Za-z0-9]{32}$/);
            cookies.add(res.headers.getSetCookie()[0]!.split(';')[0]!);
          }),
        );
      }
      expect(cookies.size).toBe(1000); // each anonymous visitor got its own token
      expect(sessionRows()).toBe(before);
    } finally {
      limits.oauthPerIp = saved;
      clock += 61_000; // a fresh per-IP window for the tests after this one
    }
  });

  it('the dashboard login refuses a missing cookie, a forged CSRF field, a forged or expired cookie; a normal login works', async () => {
    const before = sessionRows();
    const b = new Browser();
    const page = await b.request(`${base}/dashboard/login`);
    const form = formFields(page.text, 'name="password"');
    const cookie = [...b.cookies.values()][0]!;
    expect(cookie).toMatch(/^[A-Za-z0-9]{22}\.[0-9a-z]+\.[A-Za-z0-9_-]{43}$/);
    const post = (cookieValue: string | null, csrf: string) =>
      fetch(`${base}/dashboard/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookieValue ? { cookie: `skylark_session=${cookieValue}` } : {}) },
        body: new URLSearchParams({ ...form.hidden, csrf_token: csrf, email: EMAIL, password: PASSWORD }).toString(),
      });
    const [nonce, exp, mac] = cookie.split('.') as [string, string, string];
    // Another visitor's valid pair: its CSRF field does not go with this cookie.
    const other = new Browser();
    const otherCsrf = formFields((await other.request(`${base}/dashboard/login`)).text, 'name="password"').hidden.csrf_token!;
    const refused: Array<[string | null, string]> = [
      [null, form.hidden.csrf_token!], // no cookie
      [cookie, 'A'.repeat(32)], // forged CSRF field
      [cookie, otherCsrf], // someone else's CSRF field
      [cookie, ''],
      [`${nonce}.${(parseInt(exp, 36) + 86_400).toString(36)}.${mac}`, form.hidden.csrf_token!], // expiry pushed back, same MAC
      [`${nonce}.${exp}.${'A'.repeat(43)}`, form.hidden.csrf_token!], // forged MAC
      [`${'B'.repeat(22)}.${exp}.${mac}`, form.hidden.csrf_token!], // another nonce, same MAC
      ['C'.repeat(32), form.hidden.csrf_token!], // a made-up session id
    ];
    for (const [c, csrf] of refused) {
      const r = await post(c, csrf);
      expect(r.status, `${c} / ${csrf}`).toBe(403);
      expect(r.headers.get('location')).toBeNull();
    }
    expect(sessionRows()).toBe(before);
    // Expired: an hour later the same pair is refused.
    const savedClock = clock;
    clock += 3600_000 + 1000;
    expect((await post(cookie, form.hidden.csrf_token!)).status).toBe(403);
    clock = savedClock;
    // The real pair signs in: 303, a stored session's id in the cookie, one row.
    const ok = await post(cookie, form.hidden.csrf_token!);
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/dashboard');
    expect(ok.headers.getSetCookie()[0]).toMatch(/^skylark_session=[A-Za-z0-9]{32};/);
    expect(sessionRows()).toBe(before + 1);
    const signedIn = ok.headers.getSetCookie()[0]!.split(';')[0]!;
    const dash = await fetch(`${base}/dashboard`, { redirect: 'manual', headers: { cookie: signedIn } });
    expect(dash.status).toBe(200);
    // The stale form posted again while signed in: back to the dashboard, the session kept.
    const again = await fetch(`${base}/dashboard/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: signedIn },
      body: new URLSearchParams({ ...form.hidden, email: EMAIL, password: PASSWORD }).toString(),
    });
    expect(again.status).toBe(303);
    expect(again.headers.getSetCookie()).toEqual([]);
    expect(sessionRows()).toBe(before + 1);
  });

  it('the OAuth login refuses a missing cookie and a forged CSRF field; a normal login reaches consent', async () => {
    const before = sessionRows();
    const b = new Browser();
    const form = formFields((await b.request(authorizeUrl())).text, 'name="password"');
    const cookie = [...b.cookies.values()][0]!;
    const post = (cookieValue: string | null, csrf: string) =>
      fetch(`${base}${form.action}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookieValue ? { cookie: `skylark_session=${cookieValue}` } : {}) },
        body: new URLSearchParams({ ...form.hidden, csrf_token: csrf, email: EMAIL, password: PASSWORD }).toString(),
      });
    expect((await post(null, form.hidden.csrf_token!)).status).toBe(403);
    expect((await post(cookie, 'A'.repeat(32))).status).toBe(403);
    expect(sessionRows()).toBe(before);
    const consent = await post(cookie, form.hidden.csrf_token!);
    expect(consent.status).toBe(200);
    expect(await consent.text()).toContain('name="decision"');
    expect(sessionRows()).toBe(before + 1);
  });
});

describe('per-account login backoff', () => {
  it('failures from many addresses lock the account for a growing, bounded delay; a known address and a success undo it', async () => {
    // The owner signs in from home once: that address becomes known for the account.
    const home = '198.51.100.7';
    expect((await dashboardLogin(EMAIL, PASSWORD, home)).status).toBe(303);
    // Five free failures, each from another address.
    for (let i = 0; i < 5; i++) expect((await dashboardLogin(EMAIL, `guess ${i}`, freshIp())).status).toBe(401);
    // The sixth locks the account for 1 s …
    expect((await dashboardLogin(EMAIL.toUpperCase(), 'guess 5', freshIp())).status).toBe(401);
    const locked = await dashboardLogin(EMAIL, PASSWORD, freshIp());
    expect(locked.status).toBe(429);
    expect(locked.headers.get('retry-after')).toBe('1');
    expect(locked.text).toContain('Too many failed sign-ins for this account');
    expect(locked.browser.cookies.get('skylark_session')).not.toMatch(/^[A-Za-z0-9]{32}$/); // not signed in
    // … and the OAuth form sees the same lock.
    const viaOAuth = await oauthLogin(EMAIL, PASSWORD, freshIp());
    expect(viaOAuth.status).toBe(429);
    expect(viaOAuth.headers.get('retry-after')).toBe('1');
    // Each further failure doubles the delay.
    const delays: number[] = [];
    for (let i = 0; i < 14; i++) {
      clock += 16 * 60_000; // past any lock, well within the 24 h memory of failures
      expect((await oauthLogin(EMAIL, `guess ${6 + i}`, freshIp())).status).toBe(401);
      delays.push(Number((await dashboardLogin(EMAIL, PASSWORD, freshIp())).headers.get('retry-after')));
    }
    expect(delays).toEqual([2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900, 900, 900]); // bounded at 15 min
    // A lock refuses without counting: it does not grow while the stranger waits.
    expect(Number((await dashboardLogin(EMAIL, 'again', freshIp())).headers.get('retry-after'))).toBe(900);
    // The owner at home is not locked out, and the success resets the account.
    expect((await dashboardLogin(EMAIL, PASSWORD, home)).status).toBe(303);
    expect((await dashboardLogin(EMAIL, 'one typo', freshIp())).status).toBe(401);
    expect((await dashboardLogin(EMAIL, PASSWORD, freshIp())).status).toBe(303);
  }, 60_000);

  it('an unknown email backs off the same way (no hint that it does not exist)', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await dashboardLogin('nobody@example.com', 'x', freshIp())).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 429]);
    clock += 24 * 3600_000 + 1; // failures are forgotten a day after the last one
    expect((await dashboardLogin('nobody@example.com', 'x', freshIp())).status).toBe(401);
  }, 30_000);
});

describe('scrypt cost upgrade', () => {
  it('a hash at the old cost (N=2^14) still verifies and is rehashed at N=2^17 on that login', async () => {
    const salt = randomBytes(16);
    const old = `scrypt$16384$8$1$${salt.toString('base64url')}$${scryptSync(PASSWORD, salt, 32, { N: 16384, r: 8, p: 1 }).toString('base64url')}`;
    srv.db.prepare('UPDATE accounts SET password_hash = ? WHERE id = ?').run(old, accountId);
    const hashOf = () => srv.db.prepare('SELECT password_hash FROM accounts WHERE id = ?').pluck().get(accountId) as string;
    expect((await dashboardLogin(EMAIL, 'wrong', freshIp())).status).toBe(401);
    expect(hashOf()).toBe(old); // a failed login changes nothing
    expect((await dashboardLogin(EMAIL, PASSWORD, freshIp())).status).toBe(303);
    const upgraded = hashOf();
    expect(upgraded).toMatch(new RegExp(`^scrypt\\$${SCRYPT_COST.N}\\$8\\$1\\$[A-Za-z0-9_-]{22}\\$[A-Za-z0-9_-]{43}$`));
    expect(SCRYPT_COST.N).toBe(2 ** 17);
    // The new hash signs in (OAuth form too); the old password check still refuses a wrong one.
    expect((await oauthLogin(EMAIL, PASSWORD, freshIp())).status).toBe(200);
    expect((await dashboardLogin(EMAIL, 'wrong', freshIp())).status).toBe(401);
    expect(hashOf()).toBe(upgraded);
  }, 30_000);
});
