/**
 * The OAuth 2.0 authorization server over real HTTP, driven by an independent client
 * (oauth4webapi) and a cookie-keeping form-submitting "browser": discovery (RFC 8414), authorize
 * with login and consent, `iss` (RFC 9207) and `state`, code exchange with PKCE (RFC 7636), client
 * authentication by HTTP Basic and by body, refresh rotation with reuse detection, code replay,
 * revocation (RFC 7009), JWT access tokens against the JWKS, scopes on /v2, token expiry, restart,
 * CSRF and cookie attributes, per-IP rate limits. Spec "Authentication", docs/behaviour.md §7, §9.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { api, tempDir } from '../../helpers/server.js';
import { Browser, OpenApiChecker, authorizeInBrowser, formFields } from '../../helpers/platform.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { OAuthClients } from '../../../src/control/oauth/clients.js';
import { OAuthRepo } from '../../../src/base/db/oauth-repo.js';

const EMAIL = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';
const CALLBACK = 'http://127.0.0.1:9/callback';
const insecure = { [oauth.allowInsecureRequests]: true } as const;

let clock = Date.now();
const now = () => clock;
const tmp = tempDir('skylark-oauth-');
let srv: RunningServer;
let base: string;
let accountId: string;
let as: oauth.AuthorizationServer;
let confidential: { id: string; secret: string };
let publicClient: { id: string };
let checker: OpenApiChecker;

async function start(urls: Record<string, string> = {}): Promise<RunningServer> {
  const config = loadConfig({ ...urls, SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' });
  return startServer(config, createLogger('error'), now);
}

beforeAll(async () => {
  srv = await start();
  base = `http://127.0.0.1:${srv.httpPort}`;
  const created = await srv.accounts.create({ name: 'Owner Co', plan: 'paid', region: 'eu-west-1', email: EMAIL, password: PASSWORD });
  accountId = created.account.id;
  const clients = new OAuthClients(new OAuthRepo(srv.db));
  const c = clients.create({ name: 'Acme Scheduler', redirectUris: [CALLBACK, 'https://acme.example/cb?tenant=1'], public: false });
  confidential = { id: c.clientId, secret: c.clientSecret! };
  publicClient = { id: clients.create({ name: 'Acme Mobile', redirectUris: [CALLBACK], public: true }).clientId };
  const issuer = new URL(srv.urls.authUrl);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  checker = new OpenApiChecker((await api(base, null, 'GET', '/v2/openapi.json')).json);
  checker.observe(srv);
});
afterAll(async () => {
  expect(checker.problems).toEqual([]);
  await srv?.close();
  tmp.cleanup();
});

/** An authorize URL for `clientId` with PKCE; returns it with the verifier and state. */
async function authorizeUrl(clientId: string, scope: string | null, extra: Record<string, string> = {}) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const u = new URL(as.authorization_endpoint!);
  u.searchParams.set('client_id', clientId);
  u.searchParams.set('redirect_uri', CALLBACK);
  u.searchParams.set('response_type', 'code');
  if (scope !== null) u.searchParams.set('scope', scope);
  u.searchParams.set('state', state);
  u.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  u.searchParams.set('code_challenge_method', 'S256');
  for (const [k, v] of Object.entries(extra)) u.searchParams.set(k, v);
  return { url: u.href, verifier, state };
}

/** The whole flow for the confidential client (Basic auth); resolves to the token response. */
async function getTokens(scope = 'streams:read account:read', auth: oauth.ClientAuth = oauth.ClientSecretBasic(confidential.secret)) {
  const a = await authorizeUrl(confidential.id, scope);
  const location = await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' });
  const client = { client_id: confidential.id };
  const params = oauth.validateAuthResponse(as, client, new URL(location), a.state);
  const res = await oauth.authorizationCodeGrantRequest(as, client, auth, params, CALLBACK, a.verifier, insecure);
  return { tokens: await oauth.processAuthorizationCodeResponse(as, client, res), params, verifier: a.verifier };
}

/** Exchanges a code by hand (form POST) so that failures can be inspected. */
async function tokenRequest(form: Record<string, string>, basic?: { id: string; secret: string }) {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic.id)}:${encodeURIComponent(basic.secret)}`).toString('base64')}`;
  const res = await fetch(`${base}/oauth/token`, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : null };
}

describe('discovery and JWKS', () => {
  it('publishes RFC 8414 metadata with the issuer exactly {auth_url}', async () => {
    expect(as.issuer).toBe(srv.urls.authUrl);
    expect(as.authorization_endpoint).toBe(`${srv.urls.authUrl}/oauth/authorize`);
    expect(as.token_endpoint).toBe(`${srv.urls.authUrl}/oauth/token`);
    expect(as.revocation_endpoint).toBe(`${srv.urls.authUrl}/oauth/revoke`);
    expect(as.jwks_uri).toBe(`${srv.urls.authUrl}/.well-known/jwks.json`);
    expect(as.code_challenge_methods_supported).toEqual(['S256']);
    expect(as.authorization_response_iss_parameter_supported).toBe(true);
    expect(as.response_types_supported).toEqual(['code']);
    expect(as.grant_types_supported).toEqual(['authorization_code', 'refresh_token']);
    expect(as.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['client_secret_basic', 'client_secret_post', 'none']));
    expect(as.scopes_supported).toEqual(['streams:read', 'streams:write', 'podcasts:read', 'podcasts:write', 'webhooks:read', 'webhooks:write', 'account:read']);
  });

  it('access tokens are RS256 JWTs whose kid is in the JWKS and whose signature verifies with it', async () => {
    const { tokens } = await getTokens();
    const [h, p, sig] = tokens.access_token.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString());
    expect(header).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    const jwks = (await (await fetch(as.jwks_uri!)).json()) as { keys: Array<Record<string, string>> };
    const jwk = jwks.keys.find((k) => k.kid === header.kid);
    expect(jwk).toBeDefined();
    expect(jwk!.d).toBeUndefined(); // public half only
    expect(cryptoVerify('sha256', Buffer.from(`${h}.${p}`), createPublicKey({ key: jwk as any, format: 'jwk' }), Buffer.from(sig!, 'base64url'))).toBe(true);
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    expect(claims).toMatchObject({ iss: srv.urls.authUrl, sub: accountId, aud: srv.urls.baseUrl, client_id: confidential.id, scope: 'streams:read account:read' });
    expect(claims.exp - claims.iat).toBe(3600);
  });
});

describe('authorization code flow', () => {
  it('login → consent → code (with state and iss) → tokens; Cache-Control: no-store', async () => {
    const a = await authorizeUrl(confidential.id, 'streams:read');
    const browser = new Browser();
    const first = await browser.request(a.url);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/html/);
    expect(first.headers.get('x-frame-options')).toBe('DENY');
    expect(first.text).toContain('name="email"');
    expect(first.text).toContain('name="password"');
    expect(formFields(first.text, 'name="password"').hidden.csrf_token).toMatch(/^[A-Za-z0-9]{32}$/);
    const cookie = browser.setCookies[0]!;
    expect(cookie).toMatch(/^skylark_session=/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).not.toMatch(/Secure/); // the auth URL is http here
    const login = formFields(first.text, 'name="password"');
    const consent = await browser.request(base + login.action, { form: { ...login.hidden, email: EMAIL, password: PASSWORD } });
    expect(consent.status).toBe(200);
    expect(consent.text).toContain('Acme Scheduler');
    expect(consent.text).toContain('streams:read');
    expect(consent.text).toContain('name="decision"');
    // Logging in rotated the session id.
    expect(browser.setCookies[1]).toBeDefined();
    expect(browser.setCookies[1]!.split(';')[0]).not.toBe(cookie.split(';')[0]);
    const f = formFields(consent.text, 'name="decision"');
    const done = await browser.request(base + f.action, { form: { ...f.hidden, decision: 'allow' } });
    expect(done.status).toBe(303);
    const back = new URL(done.location!);
    expect(back.origin + back.pathname).toBe(CALLBACK);
    expect(back.searchParams.get('state')).toBe(a.state);
    expect(back.searchParams.get('iss')).toBe(srv.urls.authUrl);
    const client = { client_id: confidential.id };
    const params = oauth.validateAuthResponse(as, client, back, a.state);
    const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(confidential.secret), params, CALLBACK, a.verifier, insecure);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const t = await oauth.processAuthorizationCodeResponse(as, client, res);
    expect(t.token_type).toBe('bearer'); // oauth4webapi lower-cases it
    expect(t.expires_in).toBe(3600);
    expect(t.refresh_token).toMatch(/^rt_[A-Za-z0-9]{43}$/);
    expect(t.scope).toBe('streams:read');
  });

  it('a logged-in owner goes straight to consent; Deny → access_denied with state and iss', async () => {
    const browser = new Browser();
    const a = await authorizeUrl(confidential.id, 'streams:read');
    await authorizeInBrowser(browser, a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' });
    const b = await authorizeUrl(confidential.id, 'streams:write');
    const page = await browser.request(b.url);
    expect(page.text).toContain('name="decision"');
    expect(page.text).not.toContain('name="password"');
    const loc = await authorizeInBrowser(browser, b.url, { email: EMAIL, password: PASSWORD, decision: 'deny' });
    const u = new URL(loc);
    expect(u.searchParams.get('error')).toBe('access_denied');
    expect(u.searchParams.get('state')).toBe(b.state);
    expect(u.searchParams.get('iss')).toBe(srv.urls.authUrl);
    expect(() => oauth.validateAuthResponse(as, { client_id: confidential.id }, u, b.state)).toThrow(oauth.AuthorizationResponseError);
  });

  it('client_secret_post works too; the token response has every field of the spec', async () => {
    const { tokens } = await getTokens('streams:read', oauth.ClientSecretPost(confidential.secret));
    expect(Object.keys(tokens).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type']);
  });

  it('a wrong password shows the login form again (401) and logs nobody in', async () => {
    const a = await authorizeUrl(confidential.id, 'streams:read');
    const browser = new Browser();
    const first = await browser.request(a.url);
    const login = formFields(first.text, 'name="password"');
    const again = await browser.request(base + login.action, { form: { ...login.hidden, email: EMAIL, password: 'wrong' } });
    expect(again.status).toBe(401);
    expect(again.text).toContain('name="password"');
    expect(again.text).not.toContain('name="decision"');
    const unknown = await browser.request(base + login.action, { form: { ...login.hidden, email: 'nobody@example.com', password: 'x' } });
    expect(unknown.status).toBe(401);
  });

  it('public clients: PKCE is required; with it, the exchange needs no secret', async () => {
    const u = new URL(as.authorization_endpoint!);
    for (const [k, v] of Object.entries({ client_id: publicClient.id, redirect_uri: CALLBACK, response_type: 'code', scope: 'streams:read', state: 'st1' })) u.searchParams.set(k, v);
    const r = await new Browser().request(u.href);
    expect(r.status).toBe(302);
    const loc = new URL(r.location!);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('state')).toBe('st1');
    expect(loc.searchParams.get('iss')).toBe(srv.urls.authUrl);

    const a = await authorizeUrl(publicClient.id, 'streams:read');
    const back = await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' });
    const client = { client_id: publicClient.id };
    const params = oauth.validateAuthResponse(as, client, new URL(back), a.state);
    const t = await oauth.processAuthorizationCodeResponse(as, client, await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, CALLBACK, a.verifier, insecure));
    expect(t.access_token).toBeTruthy();
  });

  it('plain PKCE and malformed challenges are refused', async () => {
    const a = await authorizeUrl(confidential.id, 'streams:read', { code_challenge_method: 'plain' });
    const r = await new Browser().request(a.url);
    expect(r.status).toBe(302);
    expect(new URL(r.location!).searchParams.get('error')).toBe('invalid_request');
  });
});

describe('authorize errors (RFC 6749 §4.1.2.1)', () => {
  it('an unregistered or inexact redirect URI is never redirected to', async () => {
    for (const bad of ['https://evil.example/cb', `${CALLBACK}/`, `${CALLBACK}?x=1`, CALLBACK.toUpperCase()]) {
      const a = await authorizeUrl(confidential.id, 'streams:read', { redirect_uri: bad });
      const r = await new Browser().request(a.url);
      expect(r.status, bad).toBe(400);
      expect(r.location).toBeNull();
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    }
  });

  it('an unknown or missing client_id is shown, not redirected', async () => {
    for (const id of ['client_nope', '']) {
      const a = await authorizeUrl(id, 'streams:read');
      const r = await new Browser().request(a.url);
      expect(r.status).toBe(400);
      expect(r.location).toBeNull();
    }
  });

  it('scope is required (invalid_scope); unknown scopes and response types are refused, with state and iss', async () => {
    const cases: Array<[string | null, Record<string, string>, string]> = [
      [null, {}, 'invalid_scope'],
      ['streams:read admin', {}, 'invalid_scope'],
      ['streams:read', { response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [scope, extra, error] of cases) {
      const a = await authorizeUrl(confidential.id, scope, extra);
      const r = await new Browser().request(a.url);
      expect(r.status).toBe(302);
      const u = new URL(r.location!);
      expect(u.origin + u.pathname).toBe(CALLBACK);
      expect(u.searchParams.get('error')).toBe(error);
      expect(u.searchParams.get('error_description')).toBeTruthy();
      expect(u.searchParams.get('state')).toBe(a.state);
      expect(u.searchParams.get('iss')).toBe(srv.urls.authUrl);
    }
  });

  it('a crafted state is echoed verbatim and cannot inject parameters; a forged state fails client validation', async () => {
    const crafted = 'x&code=evil&iss=https://evil.example#frag';
    const a = await authorizeUrl(confidential.id, 'streams:read', { state: crafted });
    const loc = new URL(await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' }));
    expect(loc.searchParams.getAll('code')).toHaveLength(1);
    expect(loc.searchParams.get('code')).not.toBe('evil');
    expect(loc.searchParams.getAll('iss')).toEqual([srv.urls.authUrl]);
    expect(loc.searchParams.get('state')).toBe(crafted);
    expect(loc.hash).toBe('');
    // The client that expected another state refuses the response (the CSRF defence of RFC 6749 §10.12).
    expect(() => oauth.validateAuthResponse(as, { client_id: confidential.id }, loc, 'the-state-i-sent')).toThrow();
    // A response without iss, or with another iss, is refused by the client too (RFC 9207).
    const noIss = new URL(loc);
    noIss.searchParams.delete('iss');
    expect(() => oauth.validateAuthResponse(as, { client_id: confidential.id }, noIss, crafted)).toThrow();
  });

  it('the registered redirect URI keeps its own query; exact match covers the query', async () => {
    const a = await authorizeUrl(confidential.id, 'streams:read', { redirect_uri: 'https://acme.example/cb?tenant=1' });
    const loc = new URL(await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' }));
    expect(loc.searchParams.get('tenant')).toBe('1');
    expect(loc.searchParams.get('code')).toBeTruthy();
  });
});

describe('consent form protection', () => {
  async function consentPage() {
    const browser = new Browser();
    const a = await authorizeUrl(confidential.id, 'streams:read');
    const first = await browser.request(a.url);
    const login = formFields(first.text, 'name="password"');
    const page = await browser.request(base + login.action, { form: { ...login.hidden, email: EMAIL, password: PASSWORD } });
    return { browser, form: formFields(page.text, 'name="decision"') };
  }

  it('a missing or wrong CSRF token → 403, no redirect', async () => {
    const { browser, form } = await consentPage();
    for (const csrf of ['', 'A'.repeat(32)]) {
      const r = await browser.request(base + form.action, { form: { ...form.hidden, csrf_token: csrf, decision: 'allow' } });
      expect(r.status).toBe(403);
      expect(r.location).toBeNull();
    }
    // The real token still works afterwards.
    const ok = await browser.request(base + form.action, { form: { ...form.hidden, decision: 'allow' } });
    expect(ok.status).toBe(303);
  });

  it('a form posted from another origin → 403; without the session cookie → 403', async () => {
    const { browser, form } = await consentPage();
    const r = await browser.request(base + form.action, { form: { ...form.hidden, decision: 'allow' }, headers: { origin: 'https://evil.example' } });
    expect(r.status).toBe(403);
    const stranger = new Browser();
    const s = await stranger.request(base + form.action, { form: { ...form.hidden, decision: 'allow' } });
    expect(s.status).toBe(403);
  });

  it("another session cannot complete someone else's request, even with its own CSRF token", async () => {
    const victim = await consentPage();
    const attacker = await consentPage();
    const r = await attacker.browser.request(base + attacker.form.action, {
      form: { csrf_token: attacker.form.hidden.csrf_token!, request_id: victim.form.hidden.request_id!, decision: 'allow' },
    });
    expect(r.status).toBe(400);
    expect(r.location).toBeNull();
  });
});

describe('token endpoint', () => {
  it('a replayed code → invalid_grant and every token it issued is revoked', async () => {
    const { tokens, params, verifier } = await getTokens('streams:read');
    expect((await api(base, tokens.access_token, 'GET', '/v2/streams')).status).toBe(200);
    const replay = await tokenRequest({ grant_type: 'authorization_code', code: params.get('code')!, redirect_uri: CALLBACK, code_verifier: verifier }, confidential);
    expect(replay.status).toBe(400);
    expect(replay.json.error).toBe('invalid_grant');
    expect(typeof replay.json.error_description).toBe('string');
    expect(replay.headers.get('cache-control')).toBe('no-store');
    const after = await api(base, tokens.access_token, 'GET', '/v2/streams');
    expect(after.status).toBe(401);
    expect(after.json.error.code).toBe('invalid_token');
    const refresh = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, confidential);
    expect(refresh.json.error).toBe('invalid_grant');
  });

  it('a wrong code_verifier, a missing one, a wrong redirect_uri → invalid_grant (the code stays usable)', async () => {
    const a = await authorizeUrl(confidential.id, 'streams:read');
    const loc = new URL(await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' }));
    const code = loc.searchParams.get('code')!;
    const wrongVerifier = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: oauth.generateRandomCodeVerifier() }, confidential);
    expect(wrongVerifier.status).toBe(400);
    expect(wrongVerifier.json.error).toBe('invalid_grant');
    const noVerifier = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: CALLBACK }, confidential);
    expect(noVerifier.json.error).toBe('invalid_grant');
    const wrongRedirect = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: 'https://acme.example/cb?tenant=1', code_verifier: a.verifier }, confidential);
    expect(wrongRedirect.json.error).toBe('invalid_grant');
    // oauth4webapi with a wrong verifier surfaces the server's error.
    const client = { client_id: confidential.id };
    const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(confidential.secret), oauth.validateAuthResponse(as, client, loc, a.state), CALLBACK, oauth.generateRandomCodeVerifier(), insecure);
    await expect(oauth.processAuthorizationCodeResponse(as, client, res)).rejects.toMatchObject({ error: 'invalid_grant' });
    const good = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: a.verifier }, confidential);
    expect(good.status).toBe(200);
  });

  it('client authentication: wrong secret → 401 invalid_client with a Basic challenge; two methods → invalid_request', async () => {
    const bad = await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'rt_x' }, { id: confidential.id, secret: 'cs_wrong' });
    expect(bad.status).toBe(401);
    expect(bad.json.error).toBe('invalid_client');
    expect(bad.headers.get('www-authenticate')).toMatch(/^Basic /);
    const both = await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'rt_x', client_secret: confidential.secret }, confidential);
    expect(both.json.error).toBe('invalid_request');
    const none = await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'rt_x' });
    expect(none.status).toBe(401);
    const unsupported = await tokenRequest({ grant_type: 'password', username: 'a', password: 'b' }, confidential);
    expect(unsupported.json.error).toBe('unsupported_grant_type');
  });

  it('refresh rotates the refresh token; reusing an old one revokes the whole family', async () => {
    const client = { client_id: confidential.id };
    const auth = oauth.ClientSecretBasic(confidential.secret);
    const { tokens: t1 } = await getTokens('streams:read');
    const t2 = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, t1.refresh_token!, insecure));
    expect(t2.refresh_token).toMatch(/^rt_/);
    expect(t2.refresh_token).not.toBe(t1.refresh_token);
    expect(t2.scope).toBe('streams:read');
    expect((await api(base, t2.access_token, 'GET', '/v2/streams')).status).toBe(200);
    // Reuse of the rotated token: refused, and the family (t2 too) is revoked.
    await expect(
      oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, t1.refresh_token!, insecure)),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
    await expect(
      oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, t2.refresh_token!, insecure)),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
    expect((await api(base, t2.access_token, 'GET', '/v2/streams')).status).toBe(401);
    expect((await api(base, t1.access_token, 'GET', '/v2/streams')).status).toBe(401);
  });

  it('refresh may narrow the scope, never widen it; another client cannot use the token', async () => {
    const { tokens } = await getTokens('streams:read account:read');
    const wider = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, scope: 'streams:write' }, confidential);
    expect(wider.json.error).toBe('invalid_scope');
    const other = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: publicClient.id });
    expect(other.json.error).toBe('invalid_grant');
    const narrow = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, scope: 'account:read' }, confidential);
    expect(narrow.status).toBe(200);
    expect(narrow.json.scope).toBe('account:read');
  });
});

describe('revocation (RFC 7009)', () => {
  it('revoking an access token kills it at once; unknown tokens answer 200', async () => {
    const client = { client_id: confidential.id };
    const auth = oauth.ClientSecretBasic(confidential.secret);
    const { tokens } = await getTokens('streams:read');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, tokens.access_token, insecure));
    const r = await api(base, tokens.access_token, 'GET', '/v2/streams');
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe('invalid_token');
    // The refresh token still works (only the access token was revoked).
    const t2 = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token!, insecure));
    expect((await api(base, t2.access_token, 'GET', '/v2/streams')).status).toBe(200);
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, 'rt_doesnotexist', insecure));
  });

  it('revoking a refresh token revokes its family, access tokens included', async () => {
    const client = { client_id: confidential.id };
    const auth = oauth.ClientSecretPost(confidential.secret);
    const { tokens } = await getTokens('streams:read');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, tokens.refresh_token!, insecure));
    expect((await api(base, tokens.access_token, 'GET', '/v2/streams')).status).toBe(401);
    const again = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, confidential);
    expect(again.json.error).toBe('invalid_grant');
  });
});

describe('OAuth tokens on /v2', () => {
  it('scopes are enforced: 403 insufficient_scope with WWW-Authenticate naming the scope', async () => {
    const { tokens } = await getTokens('streams:read');
    expect((await api(base, tokens.access_token, 'GET', '/v2/streams')).status).toBe(200);
    const write = await api(base, tokens.access_token, 'POST', '/v2/streams', { title: 'x' });
    expect(write.status).toBe(403);
    expect(write.json.error.code).toBe('insufficient_scope');
    expect(write.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope", scope="streams:write"');
    const account = await api(base, tokens.access_token, 'GET', '/v2/account');
    expect(account.status).toBe(403);
    const { tokens: t2 } = await getTokens('streams:write account:read');
    const created = await api(base, t2.access_token, 'POST', '/v2/streams', { title: 'by oauth' });
    expect(created.status, created.text).toBe(201);
    expect((await api(base, t2.access_token, 'GET', `/v2/streams/${created.json.id}`)).status).toBe(403);
    const acct = await api(base, t2.access_token, 'GET', '/v2/account');
    expect(acct.status).toBe(200);
    expect(acct.json.id).toBe(accountId);
  });

  it('a tampered or foreign-signed JWT → 401 invalid_token with a Bearer error challenge', async () => {
    const { tokens } = await getTokens('streams:read');
    const [h, p, s] = tokens.access_token.split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, scope: 'streams:write' })).toString('base64url')}.${s}`;
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${p}.`;
    for (const t of [forged, none, `${h}.${p}.${'A'.repeat(s!.length)}`]) {
      const r = await api(base, t, 'GET', '/v2/streams');
      expect(r.status).toBe(401);
      expect(r.json.error.code).toBe('invalid_token');
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    }
  });

  it('an access token expires after 3600 s → 401 token_expired; the code lives 60 s', async () => {
    const { tokens } = await getTokens('streams:read');
    clock += 3599_000;
    expect((await api(base, tokens.access_token, 'GET', '/v2/streams')).status).toBe(200);
    clock += 1000;
    const r = await api(base, tokens.access_token, 'GET', '/v2/streams');
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe('token_expired');
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token", error_description=/);

    const a = await authorizeUrl(confidential.id, 'streams:read');
    const loc = new URL(await authorizeInBrowser(new Browser(), a.url, { email: EMAIL, password: PASSWORD, decision: 'allow' }));
    clock += 60_000;
    const late = await tokenRequest({ grant_type: 'authorization_code', code: loc.searchParams.get('code')!, redirect_uri: CALLBACK, code_verifier: a.verifier }, confidential);
    expect(late.json.error).toBe('invalid_grant');
  });

  it('a restart keeps issued tokens valid (signing keys persist)', async () => {
    const { tokens } = await getTokens('streams:read');
    const kid = JSON.parse(Buffer.from(tokens.access_token.split('.')[0]!, 'base64url').toString()).kid;
    const urls = { SKYLARK_AUTH_URL: srv.urls.authUrl, SKYLARK_BASE_URL: srv.urls.baseUrl };
    await srv.close();
    srv = await start(urls); // the same public URLs (as behind a proxy) on a new port
    checker.observe(srv);
    base = `http://127.0.0.1:${srv.httpPort}`;
    expect(srv.urls.authUrl).toBe(as.issuer);
    const jwks = (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
    expect(jwks.keys.map((k) => k.kid)).toEqual([kid]);
    expect((await api(base, tokens.access_token, 'GET', '/v2/streams')).status).toBe(200);
    const refreshed = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, confidential);
    expect(refreshed.status).toBe(200);
    expect((await api(base, refreshed.json.access_token, 'GET', '/v2/streams')).status).toBe(200);
  });
});

describe('per-IP rate limit on /oauth/*', () => {
  it('counts every OAuth request per client address; 429 with Retry-After and RateLimit headers', async () => {
    const limits = srv.guard.limits;
    const saved = limits.oauthPerIp;
    limits.oauthPerIp = 3;
    clock += 120_000; // a fresh window
    try {
      const seen: number[] = [];
      let last: Awaited<ReturnType<typeof tokenRequest>> | null = null;
      for (let i = 0; i < 4; i++) {
        last = await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'rt_x' }, confidential);
        seen.push(last.status);
      }
      expect(seen).toEqual([400, 400, 400, 429]);
      expect(last!.json.error).toBe('temporarily_unavailable');
      expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(last!.headers.get('ratelimit-policy')).toBe('"oauth";q=3;w=60');
      const page = await new Browser().request(`${base}/oauth/authorize?client_id=${confidential.id}`);
      expect(page.status).toBe(429);
      // Discovery and JWKS are not limited.
      expect((await fetch(`${base}/.well-known/oauth-authorization-server`)).status).toBe(200);
    } finally {
      limits.oauthPerIp = saved;
      clock += 120_000;
    }
  });
});

describe('https auth URL', () => {
  it('session cookies get Secure and the __Host- prefix', async () => {
    const t = tempDir('skylark-oauth-https-');
    const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: t.dir, SKYLARK_LOG_LEVEL: 'error', SKYLARK_AUTH_URL: 'https://auth.example' });
    const s2 = await startServer(config, createLogger('error'));
    try {
      const c = new OAuthClients(new OAuthRepo(s2.db)).create({ name: 'x', redirectUris: [CALLBACK], public: false });
      await s2.accounts.create({ name: 'Owner', plan: 'free', region: 'eu-west-1', email: EMAIL, password: PASSWORD });
      const b = new Browser();
      const r = await b.request(`http://127.0.0.1:${s2.httpPort}/oauth/authorize?client_id=${c.clientId}&redirect_uri=${encodeURIComponent(CALLBACK)}&response_type=code&scope=streams:read`);
      expect(r.status).toBe(200);
      // Before login: the signed pre-login token (nonce.expiry.mac), one hour.
      expect(b.setCookies[0]).toMatch(/^__Host-skylark_session=[A-Za-z0-9]{22}\.[0-9a-z]+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax; Secure$/);
      const login = formFields(r.text, 'name="password"');
      const consent = await b.request(`http://127.0.0.1:${s2.httpPort}${login.action}`, { form: { ...login.hidden, email: EMAIL, password: PASSWORD } });
      expect(consent.status).toBe(200);
      // Signed in: the stored session's id.
      expect(b.setCookies[1]).toMatch(/^__Host-skylark_session=[A-Za-z0-9]{32}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/);
    } finally {
      await s2.close();
      t.cleanup();
    }
  });
});
