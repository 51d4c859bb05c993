/**
 * The dashboard in a real browser: headless Chromium (playwright-core, Debian's
 * /usr/bin/chromium) signs in as an account owner and drives every page: creates, rolls and revokes
 * an API key (the secret shown once, never in a URL); creates a stream, publishes to it with FFmpeg
 * and watches the listener count go from 0 to 1 while the page's hls.js player plays, sets what plays
 * now with the page's form and sees the play log (and a change made through the API) appear; adds a webhook
 * endpoint pointing at a real node:http receiver, sends a test event and sees the attempt appear (and
 * a failed one highlighted, then redelivered); uploads an episode with the progress bar, publishes
 * it and finds it in the feed; registers an OAuth client. Screenshots of each page at 375 and 1440
 * px go to test/e2e/__screenshots__/ (artifacts, not compared).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, repoRoot, startInProcess, tempDir, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { ffmpegPath } from '../helpers/ffmpeg.js';

// Browser globals inside page.evaluate/waitForFunction callbacks (the project's lib has no DOM).
declare const document: any;
declare const window: any;
declare const MutationObserver: any;

const SHOTS = path.join(repoRoot, 'test', 'e2e', '__screenshots__');
const EMAIL = 'owner@nightradio.example';
const PASSWORD = 'correct horse battery staple';

let t: TestServer;
let browser: BrowserContext;
let page: Page;
const cspViolations: string[] = [];
let profile: string;
let accountId: string;
/** A secret key of the owner's account (the API beside the dashboard). */
let ownerKey: string;
const tmp = tempDir('skylark-dash-');

/** The webhook receiver: records requests; answers `status`. */
const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
let receiverStatus = 200;
const receiver = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    received.push({ headers: req.headers, body });
    res.writeHead(receiverStatus).end(receiverStatus === 200 ? 'ok' : 'try later');
  });
});
let receiverUrl = '';

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1' });
  const owner = await t.server.accounts.create({ name: 'Night Radio', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD });
  accountId = owner.account.id;
  ownerKey = owner.secretKey;
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/webhooks`;
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--autoplay-policy=no-user-gesture-required'],
    viewport: { width: 1440, height: 900 },
    timeout: 30_000,
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(15_000);
  // Every Content-Security-Policy refusal the pages cause (the player's hls.js included).
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  });
});

afterAll(async () => {
  await browser?.close().catch(() => {});
  if (profile) rmSync(profile, { recursive: true, force: true });
  receiver.close();
  await t?.close();
  tmp.cleanup();
});

/** Full-page screenshots of the current page at 1440 and 375 px wide. */
async function shoot(name: string): Promise<void> {
  for (const width of [1440, 375]) {
    await page.setViewportSize({ width, height: width === 375 ? 812 : 900 });
    await page.waitForTimeout(150);
    // Nothing may stick out sideways at either width (tables scroll inside their own box).
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, `${name} at ${width}px scrolls sideways`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1440, height: 900 });
}

/** The text of the one-time secret shown after a POST-redirect-GET. */
const oneTimeSecret = () => page.locator('#one-time-secret').inputValue();

/** Cookie header of the browser's session (for requests made outside the page). */
async function cookieHeader(): Promise<string> {
  return (await browser.cookies(t.http)).map((c) => `${c.name}=${c.value}`).join('; ');
}

describe('dashboard', () => {
  it('sends a visitor to the sign-in form and lets the owner in', async () => {
    const res = await page.goto(`${t.http}/dashboard/streams`);
    expect(res!.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
    await shoot('login');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('wrong');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${t.http}/dashboard/streams`);
    const cookies = await browser.cookies(t.http);
    expect(cookies.find((c) => c.name === 'skylark_session')).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
    await page.goto(`${t.http}/dashboard`);
    expect(await page.locator('h1').textContent()).toBe('Night Radio');
    await shoot('overview');
  });

  it('creates an API key shown once, rolls it and revokes it after a confirmation', async () => {
    await page.goto(`${t.http}/dashboard/keys`);
    expect(await page.locator('tbody tr').count()).toBe(2); // the account's first secret and publishable keys
    await page.getByLabel('Type').selectOption('secret');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForURL(`${t.http}/dashboard/keys`); // POST-redirect-GET: nothing in the URL
    const key = await oneTimeSecret();
    expect(key).toMatch(/^svc_sk_/);
    expect(page.url()).not.toContain(key);
    // The list shows the prefix and the last 4 only.
    const table = (await page.locator('table').textContent())!;
    expect(table).toContain(`svc_sk_…${key.slice(-4)}`);
    expect(table).not.toContain(key);
    await shoot('keys');
    // Shown once: a reload no longer has it.
    await page.reload();
    expect(await page.locator('#one-time-secret').count()).toBe(0);
    expect(await page.content()).not.toContain(key);
    // The key works, for this account.
    expect((await api(t.http, key, 'GET', '/v2/account')).json.id).toBe(accountId);

    // Roll: a confirmation step, then a new key; the old one stops working.
    const row = page.locator('tbody tr', { hasText: `…${key.slice(-4)}` });
    await row.getByRole('button', { name: /^Roll key/ }).click();
    expect(await page.locator('h1').textContent()).toContain('Roll secret key');
    await shoot('keys-confirm');
    await page.getByRole('button', { name: 'Roll key' }).click();
    await page.waitForURL(`${t.http}/dashboard/keys`);
    const rolled = await oneTimeSecret();
    expect(rolled).toMatch(/^svc_sk_/);
    expect(rolled).not.toBe(key);
    expect((await api(t.http, key, 'GET', '/v2/account')).json.error.code).toBe('key_revoked');
    expect((await api(t.http, rolled, 'GET', '/v2/account')).status).toBe(200);

    // Revoke, with its confirmation (Cancel first: nothing happens).
    const rolledRow = () => page.locator('tbody tr', { hasText: `…${rolled.slice(-4)}` });
    await rolledRow().getByRole('button', { name: /^Revoke key/ }).click();
    await page.getByRole('link', { name: 'Cancel' }).click();
    expect((await api(t.http, rolled, 'GET', '/v2/account')).status).toBe(200);
    await rolledRow().getByRole('button', { name: /^Revoke key/ }).click();
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(`${t.http}/dashboard/keys`);
    expect(await page.getByRole('status').first().textContent()).toContain('revoked');
    expect((await api(t.http, rolled, 'GET', '/v2/account')).json.error.code).toBe('key_revoked');
    expect(await rolledRow().getByText('revoked').count()).toBeGreaterThan(0);
  });

  it('refuses a mutation without the CSRF token or from another origin', async () => {
    const cookie = await cookieHeader();
    const noToken = await fetch(`${t.http}/dashboard/keys`, { method: 'POST', redirect: 'manual', headers: { Cookie: cookie, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'type=secret' });
    expect(noToken.status).toBe(403);
    const csrf = await page.locator('input[name="csrf_token"]').first().inputValue();
    const foreign = await fetch(`${t.http}/dashboard/keys`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: 'https://evil.example', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `type=secret&csrf_token=${csrf}`,
    });
    expect(foreign.status).toBe(403);
    // Without a session: to the sign-in form (pages) or 401 (JSON).
    expect((await fetch(`${t.http}/dashboard/keys`, { redirect: 'manual' })).status).toBe(303);
    expect((await fetch(`${t.http}/dashboard/streams/stm_x/live.json`)).status).toBe(401);
    // 4 keys: the first 2, the created one (rolled, so revoked) and its successor: the refused posts added none.
    expect(t.server.accounts.listKeys(accountId)).toHaveLength(4);
  });

  it('creates a stream, shows OBS settings, and counts the page player as it plays the live stream', async () => {
    await page.goto(`${t.http}/dashboard/streams`);
    await page.getByLabel('Title').fill('Late Night Jazz');
    await page.getByRole('button', { name: 'Create stream' }).click();
    await page.waitForURL(/\/dashboard\/streams\/stm_[A-Za-z0-9]+$/);
    const streamId = page.url().split('/').pop()!;
    const server = await page.getByLabel('Server', { exact: true }).inputValue();
    expect(server).toMatch(new RegExp(`^rtmp://127\\.0\\.0\\.1:${t.server.rtmpPort}/live/${streamId}$`));
    // The stream key is hidden until revealed.
    const keyInput = page.getByLabel('Stream key');
    expect(await keyInput.getAttribute('type')).toBe('password');
    await page.locator('[data-reveal="ingest-key"]').click();
    expect(await keyInput.getAttribute('type')).toBe('text');
    const streamKey = await keyInput.inputValue();
    expect(streamKey).toMatch(/^sk_euw1_/);
    await page.locator('[data-reveal="ingest-key"]').click();
    expect(await keyInput.getAttribute('type')).toBe('password');
    // The Icecast source settings (docs/behaviour.md §10) and the listen URL, next to the OBS ones.
    expect(await page.getByLabel('Icecast server').inputValue()).toBe('127.0.0.1');
    expect(await page.getByLabel('Icecast port').inputValue()).toBe(String(t.server.icecastPort));
    expect(await page.getByLabel('Mount').inputValue()).toBe(`/live/${streamId}`);
    expect(await page.getByLabel('User').inputValue()).toBe('source');
    const icePassword = page.getByLabel('Source password');
    expect(await icePassword.getAttribute('type')).toBe('password');
    expect(await icePassword.inputValue()).toBe(streamKey);
    expect(await page.getByLabel(/^Listen URL/).inputValue()).toBe(`${t.http}/listen/${streamId}.aac`);
    expect(await page.locator('#stream-status').textContent()).toBe('idle');
    expect(await page.locator('#listener-count').textContent()).toBe('0');

    const ff = publish(`${server}/${streamKey}`, { seconds: 90 });
    try {
      // The page's poll turns the badge live; nobody listens yet.
      await page.locator('#stream-status .badge-live').waitFor({ timeout: 20_000 });
      expect(await page.locator('#listener-count').textContent()).toBe('0');
      await page.getByRole('button', { name: 'Play' }).click();
      await page.waitForFunction(() => document.getElementById('listener-count')!.textContent === '1', undefined, { timeout: 20_000 });
      const t1 = await page.evaluate(() => (document.getElementById('player')).currentTime);
      await page.waitForFunction((t0) => (document.getElementById('player')).currentTime > t0 + 2, t1, { timeout: 20_000 });
      expect(await page.evaluate(() => (document.getElementById('player')).paused)).toBe(false);
      // The same count through the API, and the chart and countries drawn from the samples.
      expect(t.server.listenerCount(streamId)).toBe(1);
      await page.waitForFunction(() => document.querySelectorAll('#listeners-chart polyline').length === 1);
      expect(await page.locator('#countries li').first().textContent()).toContain('Unknown');
      await page.waitForTimeout(2500); // a few more chart samples at 1
      await shoot('stream');
      // The README's screenshot: the top of the page at a common laptop width (written to docs/
      // only with SKYLARK_UPDATE_DOCS=1, so that test runs leave the checkout alone).
      await page.setViewportSize({ width: 1280, height: 1000 });
      await page.evaluate(() => window.scrollTo(0, 0));
      const readmeShot = process.env.SKYLARK_UPDATE_DOCS === '1' ? path.join(repoRoot, 'docs', 'dashboard-stream.png') : path.join(SHOTS, 'stream-readme-1280.png');
      await page.screenshot({ path: readmeShot });
      await page.setViewportSize({ width: 1440, height: 900 });
      expect(statSync(readmeShot).size).toBeLessThan(300 * 1024);

      // Stop: the listener leaves (3 target durations later) and the page shows 0 again.
      await page.getByRole('button', { name: 'Stop', exact: true }).click();
      await page.waitForFunction(() => document.getElementById('listener-count')!.textContent === '0', undefined, { timeout: 20_000 });

      // Now playing (docs/behaviour.md §11): the form sets it (CSRF like every form); the play log shows
      // the track; a change made elsewhere (the API) reaches the page through its live poll.
      expect(await page.locator('#now-playing').textContent()).toContain('Nothing set');
      await page.getByLabel('Track title').fill('Round Midnight');
      await page.getByLabel('Artist').fill('Thelonious Monk');
      await page.getByRole('button', { name: 'Set track' }).click();
      await page.waitForURL(new RegExp(`/dashboard/streams/${streamId}$`));
      expect(await page.locator('.flash-notice').textContent()).toContain('Round Midnight');
      expect(await page.locator('#now-playing').textContent()).toContain('Round Midnight — Thelonious Monk');
      expect(await page.locator('#play-log tbody tr').count()).toBe(1);
      expect((await api(t.http, ownerKey, 'POST', `/v2/streams/${streamId}/now_playing`, { title: 'Straight, No Chaser' })).status).toBe(200);
      await page.waitForFunction(() => document.getElementById('now-playing')!.textContent.includes('Straight, No Chaser'), undefined, { timeout: 10_000 });
      await page.waitForFunction(() => document.querySelectorAll('#play-log tbody tr').length === 2, undefined, { timeout: 10_000 });
      expect(await page.locator('#play-log tbody tr').first().textContent()).toContain('Straight, No Chaser');
      await shoot('stream-now-playing');
    } finally {
      ff.kill('SIGINT');
      await exited(ff);
    }
    await page.goto(`${t.http}/dashboard/streams`);
    expect(await page.locator('tbody tr', { hasText: 'Late Night Jazz' }).locator('.badge').textContent()).toMatch(/live|ended/);
    await shoot('streams');
    expect(cspViolations).toEqual([]);
  }, 120_000);

  it('adds a webhook endpoint, sends a test event and shows every attempt; redelivers an undelivered one', async () => {
    await page.goto(`${t.http}/dashboard/webhooks`);
    await page.getByLabel('Endpoint URL').fill(receiverUrl);
    expect(await page.getByLabel('All events (*)').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.waitForURL(/\/dashboard\/webhooks\/wh_[A-Za-z0-9]+$/);
    const secret = await oneTimeSecret();
    expect(secret).toMatch(/^whsec_/);
    expect(page.url()).not.toContain(secret);

    received.length = 0;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.waitForURL(/\/dashboard\/webhooks\/wh_[A-Za-z0-9]+$/);
    // The attempt appears in the log without a reload (the log refreshes itself).
    await page.locator('#event-log .code-2xx', { hasText: '200' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#event-log .event').first().textContent()).toContain('webhook.test');
    expect(await page.locator('#event-log .badge-delivered').count()).toBe(1);
    expect(received).toHaveLength(1);
    const sig = String(received[0]!.headers['service-signature']);
    const [, ts, v1] = /^t=(\d+),v1=([0-9a-f]+)$/.exec(sig)!;
    expect(v1).toBe(createHmac('sha256', secret).update(`${ts}.${received[0]!.body}`).digest('hex'));
    expect(received[0]!.headers['service-event']).toBe('webhook.test');

    // A failing receiver: the attempt shows 500 and the next retry; the event is flagged.
    receiverStatus = 500;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.locator('#event-log .code-5xx', { hasText: '500' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#event-log .event').first().textContent()).toContain('next retry');
    // Mark it undelivered the way the schedule would after its last retry, then see it highlighted.
    const evtId = (await page.locator('#event-log .event').first().locator('.mono').textContent())!.trim();
    t.server.db.prepare("UPDATE webhook_deliveries SET status = 'undelivered', next_attempt_at = NULL WHERE event_id = ?").run(evtId);
    await page.reload();
    const flagged = page.locator('#event-log .event-undelivered');
    expect(await flagged.count()).toBe(1);
    expect(await flagged.textContent()).toContain(evtId);
    await shoot('webhook');
    receiverStatus = 200;
    await flagged.getByRole('button', { name: /^Redeliver/ }).click();
    await page.waitForURL(/\/dashboard\/webhooks\/wh_[A-Za-z0-9]+$/);
    await page.waitForFunction((id) => {
      const ev = [...document.querySelectorAll('#event-log .event')].find((e) => e.textContent!.includes(id));
      return !!ev && !ev.classList.contains('event-undelivered') && ev.querySelector('.badge-delivered') !== null;
    }, evtId, { timeout: 20_000 });
    const attempts = await page.locator('#event-log .event', { hasText: evtId }).locator('tbody tr').allTextContents();
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.some((a) => a.includes('500'))).toBe(true);
    expect(attempts.some((a) => a.includes('200'))).toBe(true);

    // Edit the events, disable.
    await page.getByLabel('All events (*)').uncheck();
    await page.getByLabel('stream.started').check();
    await page.getByRole('button', { name: 'Save' }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('saved');
    expect(await page.getByLabel('stream.started').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Disable' }).click();
    expect(await page.locator('h1 .badge').textContent()).toBe('disabled');
    await page.goto(`${t.http}/dashboard/webhooks`);
    await shoot('webhooks');
  }, 90_000);

  it('creates a podcast and an episode, uploads its audio with progress, publishes it and finds it in the feed', async () => {
    const mp3 = path.join(tmp.dir, 'pilot.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=330:duration=30', '-c:a', 'libmp3lame', '-b:a', '128k', mp3], { timeout: 30_000 });
    await page.goto(`${t.http}/dashboard/podcasts`);
    await page.getByLabel('Title').fill('Night Shift');
    await page.getByLabel('Description').fill('Talk after dark');
    await page.getByLabel('Author').fill('Skylark FM');
    await page.getByLabel('Owner email').fill('me@example.com');
    await page.getByLabel('Apple category').fill('Technology');
    await page.getByRole('button', { name: 'Create podcast' }).click();
    await page.waitForURL(/\/dashboard\/podcasts\/pod_[A-Za-z0-9]+$/);
    const feedUrl = await page.getByLabel('RSS feed URL').inputValue();
    expect(feedUrl).toMatch(/\/feed\/pod_[A-Za-z0-9]+\.xml$/);
    expect((await fetch(feedUrl)).status).toBe(404); // a draft has no feed yet

    await page.getByLabel('Title').fill('Pilot');
    await page.getByLabel('Season').fill('1');
    await page.getByLabel('Episode number').fill('1');
    await page.getByRole('button', { name: 'Create episode' }).click();
    await page.waitForURL(/\/episodes\/ep_[A-Za-z0-9]+$/);
    await page.getByLabel(/^Audio file/).setInputFiles(mp3);
    // Record what the progress line says while the upload runs (the page reloads when it is done).
    const progress: string[] = [];
    await page.exposeFunction('reportUploadState', (text: string) => progress.push(text));
    await page.evaluate(() => {
      const state = document.getElementById('upload-state')!;
      const bar = document.getElementById('upload-progress');
      new MutationObserver(() => window.reportUploadState(`${bar.hidden ? 'hidden' : bar.value}|${state.textContent}`)).observe(state, { childList: true, characterData: true, subtree: true });
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForFunction(() => /audio\/mpeg/.test(document.getElementById('audio')!.parentElement!.textContent!), undefined, { timeout: 30_000 });
    await page.waitForLoadState('load');
    expect(progress.some((p) => /^\d+\|Uploading… \d+ %/.test(p))).toBe(true);
    expect(progress.some((p) => /^100\|Uploaded and checked: 30 s of audio/.test(p))).toBe(true);
    await shoot('episode');
    await page.getByRole('button', { name: 'Publish' }).click();
    expect(await page.locator('#episode-status').textContent()).toBe('published');

    const feed = await (await fetch(feedUrl)).text();
    expect(feed).toContain('<title>Pilot</title>');
    expect(feed).toMatch(/<enclosure url="[^"]+\/media\/pod_[A-Za-z0-9]+\/ep_[^"]+\.mp3" length="\d+" type="audio\/mpeg"/);
    // podcast.published was recorded, as through the API.
    expect((t.server.db.prepare("SELECT COUNT(*) AS n FROM events WHERE type = 'podcast.published' AND account_id = ?").get(accountId) as { n: number }).n).toBe(1);
    await page.getByRole('link', { name: 'Night Shift' }).click();
    expect(await page.locator('tbody tr', { hasText: 'Pilot' }).locator('.badge').textContent()).toBe('published');
    await shoot('podcast');
    await page.goto(`${t.http}/dashboard/podcasts`);
    await shoot('podcasts');
  }, 90_000);

  it('schedules an episode for later with the browser time zone', async () => {
    await page.goto(`${t.http}/dashboard/podcasts`);
    await page.getByRole('link', { name: 'Night Shift' }).click();
    await page.getByLabel('Title').fill('Bonus');
    await page.getByRole('button', { name: 'Create episode' }).click();
    await page.waitForURL(/\/episodes\/ep_[A-Za-z0-9]+$/);
    const mp3 = path.join(tmp.dir, 'pilot.mp3');
    await page.getByLabel(/^Audio file/).setInputFiles(mp3);
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForFunction(() => /audio\/mpeg/.test(document.getElementById('audio')!.parentElement!.textContent!), undefined, { timeout: 30_000 });
    await page.waitForLoadState('load');
    await page.getByLabel(/^Date and time/).fill('2031-05-01T09:30');
    expect(await page.getByLabel('At', { exact: true }).isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Publish' }).click();
    expect(await page.locator('#episode-status').textContent()).toBe('scheduled');
    const tz = await page.evaluate(() => new Date('2031-05-01T09:30').toISOString());
    expect(await page.locator('p', { hasText: 'Scheduled for' }).locator('time').getAttribute('datetime')).toBe(tz);
    await page.getByRole('button', { name: 'Cancel schedule' }).click();
    expect(await page.locator('#episode-status').textContent()).toBe('draft');
  });

  it('registers an OAuth client with its secret shown once', async () => {
    await page.goto(`${t.http}/dashboard/oauth-clients`);
    await page.getByLabel('Name').fill('Acme Scheduler');
    await page.getByLabel(/^Redirect URIs/).fill('https://acme.example/callback\nhttp://127.0.0.1:7777/cb');
    await page.getByRole('button', { name: 'Register' }).click();
    await page.waitForURL(`${t.http}/dashboard/oauth-clients`);
    const secret = await oneTimeSecret();
    expect(secret).toMatch(/^cs_/);
    const row = page.locator('tbody tr', { hasText: 'Acme Scheduler' });
    expect(await row.textContent()).toContain('https://acme.example/callback');
    expect(await row.textContent()).toContain('http://127.0.0.1:7777/cb');
    const clientId = (await row.locator('code').first().textContent())!;
    expect(clientId).toMatch(/^client_/);
    await shoot('oauth-clients');
    // The secret works at the token endpoint (client authentication passes; the code is bogus).
    const tok = await fetch(`${t.http}/oauth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=authorization_code&code=nope&redirect_uri=https%3A%2F%2Facme.example%2Fcallback&code_verifier=' + 'a'.repeat(50),
    });
    expect(((await tok.json()) as { error: string }).error).toBe('invalid_grant');
    await page.reload();
    expect(await page.content()).not.toContain(secret);
    // An invalid redirect URI is refused with a message.
    await page.getByLabel('Name').fill('Bad');
    await page.getByLabel(/^Redirect URIs/).fill('http://example.com/cb');
    await page.getByRole('button', { name: 'Register' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('https');
  });

  it('signs out', async () => {
    await page.goto(`${t.http}/dashboard`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/dashboard\/login$/);
    await page.goto(`${t.http}/dashboard/keys`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
  });
});
