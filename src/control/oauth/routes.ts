/**
 * The authorization server's HTTP face on `{auth_url}` (docs/behaviour.md §1 "OAuth under /oauth", §9):
 * - `GET  /.well-known/oauth-authorization-server` RFC 8414 metadata; `GET /.well-known/jwks.json`;
 * - `GET  /oauth/authorize` validates, then shows the login form (no session) or the consent page;
 * - `POST /oauth/authorize` takes the login form (`email`, `password`), the consent form
 *   (`decision`), or `switch_account`; each with `csrf_token` and `request_id`;
 * - `POST /oauth/token`, `POST /oauth/revoke` form-encoded, JSON answers with `Cache-Control: no-store`.
 * Every `/oauth/*` request counts against a per-client-IP rate limit (Guard.limitClient); failed
 * logins also back off per account (Guard.logins). Before login the browser holds a signed
 * pre-login token (src/base/auth/sessions.ts): showing the login form stores nothing.
 */
import type { Feature } from '../../base/background.js';
import type { HttpServer, WebReply, WebRequest } from '../../base/http/server.js';
import type { Guard } from '../../base/auth/guard.js';
import type { AccessTokens } from '../../base/auth/jwt.js';
import type { AccountsRepo } from '../../base/db/accounts-repo.js';
import type { PublicUrls } from '../../base/config.js';
import type { Limits } from '../../base/limits/limits.js';
import type { AuthorizationServer, EndpointResult, PendingRequest } from './service.js';
import type { Session, Sessions } from '../../base/auth/sessions.js';
import { signInOwner } from '../../base/auth/owner-login.js';
import { consentPage, errorPage, loginPage } from './html.js';

const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const HTML_HEADERS = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` on the page's own
  // form posts (docs/behaviour.md §7 "OAuth"); the authorize URL still never leaves the origin.
  'Referrer-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
};

/** What the authorization server's routes are given by the composition root (src/app/control.ts). */
export interface OAuthDeps {
  http: HttpServer;
  /** The per-client-IP limit (`limitClient`), client addresses and the per-account login backoff. */
  guard: Pick<Guard, 'limitClient' | 'clientAddress' | 'logins'>;
  /** The authorization server (RFC 6749): checks, held requests, decisions, tokens, revocation. */
  server: AuthorizationServer;
  /** Access tokens: the JWKS and the signing key made at start. */
  tokens: Pick<AccessTokens, 'jwks' | 'ensureKey'>;
  /** The owner's sign-in sessions (shared with the dashboard: one sign-in for both). */
  sessions: Sessions;
  accounts: AccountsRepo;
  urls: () => PublicUrls;
  limits: Pick<Limits, 'hit'>;
}

/** Registers the authorization server's routes; `start` makes sure a signing key exists. */
export function registerOAuth(d: OAuthDeps): Feature {
  const { http, server, tokens } = d;
  http.web('get', '/.well-known/oauth-authorization-server', () => ({
    status: 200,
    headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'public, max-age=3600', 'Access-Control-Allow-Origin': '*' },
    body: JSON.stringify(server.metadata()),
  }));
  http.web('get', '/.well-known/jwks.json', () => ({
    status: 200,
    headers: { 'Content-Type': 'application/jwk-set+json', 'Cache-Control': 'public, max-age=300', 'Access-Control-Allow-Origin': '*' },
    body: JSON.stringify(tokens.jwks()),
  }));
  http.web('get', '/oauth/authorize', (req) => getAuthorize(d, req));
  http.web('post', '/oauth/authorize', (req) => postAuthorize(d, req));
  http.web('post', '/oauth/token', (req) => postToken(d, req));
  http.web('post', '/oauth/revoke', (req) => postRevoke(d, req));
  return { start: () => tokens.ensureKey() };
}

const json = (r: EndpointResult, extra: Record<string, string>): WebReply => ({
  status: r.status,
  headers: { ...JSON_HEADERS, ...extra, ...r.headers },
  body: r.body === null ? '' : JSON.stringify(r.body),
});
const html = (status: number, body: string, extra: Record<string, string> = {}): WebReply => ({ status, headers: { ...HTML_HEADERS, ...extra }, body });
const redirect = (status: 302 | 303, location: string, extra: Record<string, string> = {}): WebReply => ({
  status,
  headers: { Location: location, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer', ...extra },
});
const isForm = (req: WebRequest) => /^application\/x-www-form-urlencoded\s*(;|$)/i.test(req.headers.contentType);
const NOT_A_FORM: EndpointResult = { status: 400, body: { error: 'invalid_request', error_description: 'Send the parameters as application/x-www-form-urlencoded.' } };

/** Counts the request against its IP (filling `headers`); a refusal as JSON or HTML, or null when it may go on. */
function limited(d: OAuthDeps, req: WebRequest, headers: Record<string, string>, asHtml: boolean): WebReply | null {
  if (d.guard.limitClient(req.remoteAddress, req.headers.forwardedFor, headers)) return null;
  const msg = `Too many requests from your address; retry after ${headers['Retry-After']} seconds.`;
  return asHtml ? html(429, errorPage('Too many requests', msg), headers) : json({ status: 429, body: { error: 'temporarily_unavailable', error_description: msg } }, headers);
}

/** The login form or, for a logged-in owner, the consent page of `p`. */
function loginOrConsent(d: OAuthDeps, p: PendingRequest, s: Session, extra: Record<string, string>, error?: { status: number; message: string }, email?: string): WebReply {
  const account = s.accountId ? d.accounts.get(s.accountId) : undefined;
  if (!account || error !== undefined) {
    return html(error?.status ?? 200, loginPage({ clientName: p.client.name, csrf: s.csrfToken, requestId: p.id, error: error?.message, email }), extra);
  }
  let redirectOrigin = p.redirectUri;
  try {
    const u = new URL(p.redirectUri);
    redirectOrigin = u.origin !== 'null' ? u.origin : `${u.protocol}//`;
  } catch {
    /* registered URIs parse; keep the raw one */
  }
  return html(
    200,
    consentPage({ clientName: p.client.name, redirectOrigin, scopes: p.scopes, accountName: account.name, email: account.owner_email ?? '', csrf: s.csrfToken, requestId: p.id }),
    extra,
  );
}

/** `GET /oauth/authorize` (RFC 6749 §4.1.1): validates, holds the request, shows the login form or the consent page. */
function getAuthorize(d: OAuthDeps, req: WebRequest): WebReply {
  const headers: Record<string, string> = {};
  const refused = limited(d, req, headers, true);
  if (refused) return refused;
  const check = d.server.checkAuthorize(req.query);
  if (check.kind === 'fatal') return html(400, errorPage('This authorization request is invalid', check.description), headers);
  if (check.kind === 'redirect') return redirect(302, check.location, headers);
  let s = d.sessions.fromCookie(req.headers.cookie);
  if (!s) {
    const pre = d.sessions.preLogin(req.headers.cookie); // signed, nothing stored until a login succeeds
    s = pre.session;
    if (pre.setCookie) headers['Set-Cookie'] = pre.setCookie;
  }
  return loginOrConsent(d, d.server.hold(check.request, s.idHash), s, headers);
}

/** `POST /oauth/authorize`: the login form, `switch_account`, or the consent decision (RFC 6749 §4.1.2), each checked for origin, session and CSRF token. */
async function postAuthorize(d: OAuthDeps, req: WebRequest): Promise<WebReply> {
  const { sessions, server } = d;
  const headers: Record<string, string> = {};
  const refused = limited(d, req, headers, true);
  if (refused) return refused;
  const expected = new URL(d.urls().authUrl).origin;
  // `Origin: null` (a browser under a no-referrer policy, or a privacy setting) proves nothing either
  // way: the form's CSRF token, bound to the session cookie, decides as when no Origin is sent.
  if (req.headers.origin && req.headers.origin !== 'null' && req.headers.origin !== expected) {
    return html(403, errorPage('Request refused', 'The form was sent from another site.'), headers);
  }
  if (!isForm(req)) return html(400, errorPage('Bad request', 'The form must be sent as application/x-www-form-urlencoded.'), headers);
  const form = new URLSearchParams(req.body.toString('utf8'));
  const s = sessions.current(req.headers.cookie);
  if (!s) return html(403, errorPage('Your session expired', 'Your sign-in session is missing or expired.'), headers);
  if (!sessions.checkCsrf(s, form.get('csrf_token'))) return html(403, errorPage('Request refused', 'The form is stale or was not sent by this page (CSRF token mismatch).'), headers);
  const p = server.held(form.get('request_id') ?? '', s.idHash);
  if (!p) return html(400, errorPage('This authorization request expired', 'The authorization request is unknown or expired.'), headers);

  if (form.has('switch_account')) {
    const fresh = sessions.restart(s);
    p.sessionHash = fresh.session.idHash;
    return loginOrConsent(d, p, fresh.session, { ...headers, 'Set-Cookie': fresh.setCookie });
  }
  if (form.has('email') || form.has('password')) return signIn(d, req, form, p, s, headers);
  const decision = form.get('decision');
  if (!s.accountId || !d.accounts.get(s.accountId)) return loginOrConsent(d, p, s, headers);
  if (decision !== 'allow' && decision !== 'deny') return html(400, errorPage('Bad request', 'decision must be allow or deny.'), headers);
  return redirect(303, server.decide(p, s.accountId, decision === 'allow'), headers);
}

/** The login form of a held request: the password check with its per-account backoff, then the consent page in a new session. */
async function signIn(d: OAuthDeps, req: WebRequest, form: URLSearchParams, p: PendingRequest, s: Session, headers: Record<string, string>): Promise<WebReply> {
  const email = form.get('email') ?? '';
  const ip = d.guard.clientAddress(req.remoteAddress, req.headers.forwardedFor);
  const r = await signInOwner(d.accounts, d.guard.logins, email, form.get('password') ?? '', ip);
  if (r.kind === 'locked') {
    d.limits.hit('login_backoff', ip);
    const message = `Too many failed sign-ins for this account. Try again in ${r.retryAfterS} seconds.`;
    return loginOrConsent(d, p, s, { ...headers, 'Retry-After': String(r.retryAfterS) }, { status: 429, message }, email);
  }
  if (r.kind === 'busy') {
    const message = 'The server is busy checking other sign-ins. Try again in a moment.';
    return loginOrConsent(d, p, s, { ...headers, 'Retry-After': String(r.retryAfterS) }, { status: 503, message }, email);
  }
  if (r.kind === 'wrong') return loginOrConsent(d, p, s, headers, { status: 401, message: 'The email or password is wrong.' }, email);
  const started = d.sessions.start(r.account.id, s); // a new session id on login: no fixation
  p.sessionHash = started.session.idHash;
  return loginOrConsent(d, p, started.session, { ...headers, 'Set-Cookie': started.setCookie });
}

/** `POST /oauth/token` (RFC 6749 §3.2), form-encoded. */
async function postToken(d: OAuthDeps, req: WebRequest): Promise<WebReply> {
  const headers: Record<string, string> = {};
  const refused = limited(d, req, headers, false);
  if (refused) return refused;
  if (!isForm(req)) return json(NOT_A_FORM, headers);
  return json(await d.server.token(new URLSearchParams(req.body.toString('utf8')), req.headers.authorization), headers);
}

/** `POST /oauth/revoke` (RFC 7009 §2.1), form-encoded. */
function postRevoke(d: OAuthDeps, req: WebRequest): WebReply {
  const headers: Record<string, string> = {};
  const refused = limited(d, req, headers, false);
  if (refused) return refused;
  if (!isForm(req)) return json(NOT_A_FORM, headers);
  return json(d.server.revoke(new URLSearchParams(req.body.toString('utf8')), req.headers.authorization), headers);
}
