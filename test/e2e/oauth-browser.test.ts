/**
 * OAuth 2.0 consent in a real browser (docs/behaviour.md §7 "OAuth"): headless Chromium signs in on
 * `/oauth/authorize` and presses Allow, the way a person does, and oauth4webapi (an independent
 * client) checks the redirect and exchanges the code with PKCE (RFC 7636) for tokens that open
 * `/v2`. A browser sends its own `Origin` on those form posts, shaped by the page's referrer policy:
 * the node's pages must be ones a browser can complete.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import * as oauth from 'oauth4webapi';
import { api, tempDir } from '../helpers/server.js';
import { loadConfig } from '../../src/base/config.js';
import { createLogger } from '../../src/base/logger.js';
import { startServer, type RunningServer } from '../../src/main.js';
import { OAuthClients } from '../../src/control/oauth/clients.js';
import { OAuthRepo } from '../../src/base/db/oauth-repo.js';

const EMAIL = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';
const insecure = { [oauth.allowInsecureRequests]: true } as const;

const tmp = tempDir('skylark-oauth-browser-');
const profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
let srv: RunningServer;
let context: BrowserContext;
let callback: http.Server;
let callbackUrl: string;
const origins: Array<string | undefined> = [];

beforeAll(async () => {
  const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' });
  srv = await startServer(config, createLogger('error'));
  await srv.accounts.create({ name: 'Owner Co', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD });
  // The third-party application's redirect URI: another origin, a page that only says "done".
  callback = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Acme</title><p>Signed in.</p>');
  });
  await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
  callbackUrl = `http://127.0.0.1:${(callback.address() as { port: number }).port}/callback`;
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 30_000,
  });
  // What the browser itself sends as Origin on the form posts (recorded, not changed).
  context.on('request', (r) => {
    if (r.method() === 'POST' && r.url().includes('/oauth/authorize')) origins.push(r.headers()['origin']);
  });
});

afterAll(async () => {
  await context?.close().catch(() => {});
  callback?.close();
  await srv?.close();
  rmSync(profile, { recursive: true, force: true });
  tmp.cleanup();
});

describe('authorization code + PKCE in Chromium', () => {
  it('sign in, Allow, code, token: the token opens /v2', async () => {
    const clients = new OAuthClients(new OAuthRepo(srv.db));
    const clientId = clients.create({ name: 'Acme Web', redirectUris: [callbackUrl], public: true }).clientId;
    const issuer = new URL(srv.urls.authUrl);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const authorize = new URL(as.authorization_endpoint!);
    for (const [k, v] of Object.entries({
      client_id: clientId,
      redirect_uri: callbackUrl,
      response_type: 'code',
      scope: 'streams:read account:read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }))
      authorize.searchParams.set(k, v);

    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(authorize.href);
    await page.fill('input[name="email"]', EMAIL);
    await page.fill('input[name="password"]', PASSWORD);
    await Promise.all([page.waitForLoadState('load'), page.click('button[type="submit"]')]);
    // The consent page: not an error page.
    expect(await page.content()).not.toContain('Request refused');
    await Promise.all([page.waitForURL((u) => u.href.startsWith(callbackUrl), { timeout: 20_000 }), page.click('button[name="decision"][value="allow"]')]);
    expect(origins.length).toBe(2);

    const client = { client_id: clientId };
    const params = oauth.validateAuthResponse(as, client, new URL(page.url()), state);
    const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, callbackUrl, verifier, insecure);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, res);
    expect(tokens.access_token).toBeTruthy();
    const streams = await api(`http://127.0.0.1:${srv.httpPort}`, tokens.access_token, 'GET', '/v2/streams');
    expect(streams.status).toBe(200);
  });
});
