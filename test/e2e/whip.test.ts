/**
 * WHIP from a real browser (docs/behaviour.md §18): headless Chromium (playwright-core, the system
 * /usr/bin/chromium) with a fake microphone fed a 660 Hz tone file. A page on another origin
 * publishes with a publish token (CORS, Opus from Chrome's encoder) to an `aac` stream, whose top
 * layer is encoded from that Opus: the tone is decoded back from HLS; DELETE makes the stream idle.
 * Then the dashboard's "Go live from this browser" button publishes the same microphone with a
 * token minted through the session: live, the input level moves, mute, stop → idle. No
 * Content-Security-Policy refusal on the dashboard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../helpers/server.js';
import { ffmpegPath } from '../helpers/ffmpeg.js';
import { decodedFrequency } from '../helpers/whip-client.js';

declare const window: any;

const EMAIL = 'host@studio.example';
const PASSWORD = 'correct horse battery staple';
const PAGE = `<!doctype html><meta charset="utf-8"><title>Guest studio</title>
<script>
window.goLive = async (endpoint, token) => {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const pc = new RTCPeerConnection();
  window.pc = pc;
  pc.addTransceiver(stream.getAudioTracks()[0], { direction: 'sendonly' });
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise((r) => {
    if (pc.iceGatheringState === 'complete') return r();
    pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && r());
    setTimeout(r, 3000);
  });
  const res = await fetch(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: 'Bearer ' + token }, body: pc.localDescription.sdp });
  const body = await res.text();
  if (res.status !== 201) return { status: res.status, body };
  window.session = new URL(res.headers.get('Location'), endpoint).href;
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  return { status: res.status, location: window.session, etag: res.headers.get('ETag') };
};
window.stop = async () => {
  const res = await fetch(window.session, { method: 'DELETE', headers: { Authorization: 'Bearer x' } });
  window.pc.close();
  return res.status;
};
</script><body></body>`;

let t: TestServer;
let browser: BrowserContext;
let page: Page;
let profile: string;
let ownerKey: string;
const cspViolations: string[] = [];
const tmp = tempDir('skylark-whip-e2e-');
const studio = http.createServer((_req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(PAGE);
});
let studioUrl = '';

beforeAll(async () => {
  t = await startInProcess();
  const owner = await t.server.accounts.create({ name: 'Studio', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD });
  ownerKey = owner.secretKey;
  const wav = path.join(tmp.dir, 'tone.wav');
  const r = spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=660:sample_rate=48000:duration=60', '-ac', '2', '-c:a', 'pcm_s16le', wav]);
  if (r.status !== 0) throw new Error(String(r.stderr));
  await new Promise<void>((res) => studio.listen(0, '127.0.0.1', res));
  studioUrl = `http://127.0.0.1:${(studio.address() as { port: number }).port}/`;
  profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`,
      '--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'],
    permissions: ['microphone'],
    timeout: 30_000,
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(15_000);
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  });
}, 60_000);

afterAll(async () => {
  await browser?.close().catch(() => {});
  studio.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await t?.close();
  tmp.cleanup();
});

const stream = async (id: string) => (await api(t.http, ownerKey, 'GET', `/v2/streams/${id}`)).json;

describe('WHIP from Chromium', () => {
  it('a page on another origin publishes its microphone with a publish token; the aac stream carries the tone', async () => {
    const s = (await api(t.http, ownerKey, 'POST', '/v2/streams', { title: 'Guest', codec: 'aac', reconnectWindow: 0 })).json;
    const { token } = (await api(t.http, ownerKey, 'POST', `/v2/streams/${s.id}/publish_tokens`, {})).json;
    await page.goto(studioUrl);
    const r = await page.evaluate(([u, k]) => window.goLive(u, k), [s.whipUrl, token] as const);
    expect(r).toMatchObject({ status: 201 });
    await waitFor(async () => (await stream(s.id)).status === 'live', 15_000, 200, 'live from Chromium');
    await new Promise((res) => setTimeout(res, 7000));
    const heard = await decodedFrequency(s.hlsUrl, 3);
    // Counted by zero crossings: a glitch of the browser's fake capture on a loaded machine adds a
    // few, so ±8 % of 660 Hz (no other tone is in play here).
    expect(heard.hz).toBeGreaterThan(607);
    expect(heard.hz).toBeLessThan(713);
    expect(await page.evaluate(() => window.stop())).toBe(200);
    await waitFor(async () => (await stream(s.id)).status === 'idle', 10_000, 200, 'idle after DELETE');
  }, 60_000);

  it('the dashboard button goes live with the microphone, mutes and stops', async () => {
    const s = (await api(t.http, ownerKey, 'POST', '/v2/streams', { title: 'Studio show', codec: 'opus', reconnectWindow: 0 })).json;
    await page.goto(`${t.http}/dashboard/streams/${s.id}`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${t.http}/dashboard/streams/${s.id}`);
    await expect(page.locator('#golive-mic option').count()).resolves.toBeGreaterThan(0);
    // The page never holds the stream key in what its script reads to publish.
    expect(await page.locator('#golive').getAttribute('data-token-url')).toBe(`/dashboard/streams/${s.id}/publish_token`);
    await page.getByRole('button', { name: 'Go live' }).click();
    await page.waitForFunction(() => /Live: publishing/.test(document.getElementById('golive-state')!.textContent || ''), null, { timeout: 15_000 });
    await waitFor(async () => (await stream(s.id)).status === 'live', 15_000, 200, 'live from the dashboard');
    await page.waitForFunction(() => Number((document.getElementById('golive-level') as any).value) > -40, null, { timeout: 5000 });
    await page.waitForFunction(() => /live/.test(document.getElementById('golive-listeners-see')!.textContent || ''), null, { timeout: 10_000 });
    await page.waitForFunction(() => document.getElementById('golive-elapsed')!.textContent !== '0:00', null, { timeout: 5000 });
    await new Promise((res) => setTimeout(res, 5000));
    const heard = await decodedFrequency(s.listenUrl, 2);
    expect(heard.hz).toBeGreaterThan(607); // ±8 %: zero crossings of a browser's capture (above)
    expect(heard.hz).toBeLessThan(713);
    await page.getByRole('button', { name: 'Mute microphone' }).click();
    expect(await page.locator('#golive-mute').getAttribute('aria-pressed')).toBe('true');
    await page.getByRole('button', { name: 'Stop publishing' }).click();
    await waitFor(async () => (await stream(s.id)).status === 'idle', 10_000, 200, 'idle after Stop');
    expect(cspViolations).toEqual([]);
  }, 90_000);
});

declare const document: { getElementById(id: string): { textContent: string | null } | null };
