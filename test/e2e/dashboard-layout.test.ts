/**
 * The dashboard's layout details in headless Chromium (playwright-core, /usr/bin/chromium): the
 * stream page's broadcasts table shows every column at 1280 px without scrolling sideways (the card
 * spans the page's whole row), and the browser finds the site icon (the page's `<link rel="icon">`
 * and `/favicon.ico`) instead of a 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, startInProcess, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';

declare const document: any;

const EMAIL = 'layout@example.com';
const PASSWORD = 'a long enough owner password';
let t: TestServer;
let key: string;
let browser: BrowserContext;
let page: Page;
let profile: string;

beforeAll(async () => {
  t = await startInProcess();
  key = (await t.server.accounts.create({ name: 'Layout Radio', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD })).secretKey;
  profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 800 },
    timeout: 30_000,
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(15_000);
});

afterAll(async () => {
  await browser?.close().catch(() => {});
  if (profile) rmSync(profile, { recursive: true, force: true });
  await t?.close();
});

describe('dashboard layout', () => {
  it('shows the whole broadcasts table at 1280 px and has a site icon', async () => {
    const s = (await api(t.http, key, 'POST', '/v2/streams', { title: 'Layout', reconnectWindow: 0 })).json;
    const ff = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 3 });
    await exited(ff);
    await waitFor(async () => {
      const list = (await api(t.http, key, 'GET', `/v2/streams/${s.id}/broadcasts`)).json;
      return list.data?.length === 1 && list.data[0].endedAt !== null;
    }, 20_000, 200, 'the broadcast ended');

    await page.goto(`${t.http}/dashboard/login`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.pathname.startsWith('/dashboard') && u.pathname !== '/dashboard/login');
    await page.goto(`${t.http}/dashboard/streams/${s.id}`);

    const wrap = page.locator('#broadcasts .table-wrap');
    await wrap.waitFor();
    const { scroll, client } = await wrap.evaluate((el: any) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
    expect(scroll, 'the broadcasts table scrolls sideways at 1280 px').toBeLessThanOrEqual(client);
    expect(await page.locator('#broadcasts th').allTextContents()).toContain('Episode');

    // The icon the page links loads as an image, and so does /favicon.ico.
    const href = await page.locator('link[rel="icon"]').getAttribute('href');
    expect(href).toMatch(/^\/dashboard\/assets\/icon\.[0-9a-f]{12}\.svg$/);
    const loaded = await page.evaluate(async (src: string) => {
      const img = document.createElement('img');
      img.src = src;
      await img.decode();
      return img.naturalWidth > 0;
    }, href!);
    expect(loaded).toBe(true);
    const fav = await page.goto(`${t.http}/favicon.ico`);
    expect(fav!.status()).toBe(200);
    expect(fav!.headers()['content-type']).toBe('image/svg+xml');
  });
});
