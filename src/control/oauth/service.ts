/**
 * The OAuth 2.0 authorization server's protocol logic, without HTTP (src/control/oauth/routes.ts adapts it):
 * RFC 6749 (authorization code and refresh token grants), RFC 7636 (PKCE, S256 only), RFC 7009
 * (revocation), RFC 8414 (metadata), RFC 9207 (`iss` in the authorization response), following
 * RFC 9700 (Security BCP): exact redirect-URI match, single-use codes living 60 s whose replay
 * revokes every token the code led to, refresh tokens rotated on every use with reuse detection
 * that revokes the whole family (the grant), PKCE downgrade refused.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { OAuthClientRow, OAuthRepo } from '../../base/db/oauth-repo.js';
import type { AccountsRepo } from '../../base/db/accounts-repo.js';
import type { Database } from '../../base/db/database.js';
import type { AccessTokens } from '../../base/auth/jwt.js';
import { ACCESS_TOKEN_TTL_S } from '../../base/auth/jwt.js';
import { OAUTH_SCOPES, parseScope, type OAuthScope } from '../../base/auth/scopes.js';
import { hashToken, tokenMatches } from '../../base/auth/secrets.js';
import { newId, randomBase62 } from '../../base/ids.js';

/** Authorization code lifetime (ms). */
export const CODE_TTL_MS = 60_000;
/** Refresh token lifetime (ms): 30 days from issue; each rotation issues a fresh one. */
export const REFRESH_TTL_MS = 30 * 24 * 3600 * 1000;
/** How long a pending authorization request (login/consent page open) stays usable (ms). */
export const PENDING_TTL_MS = 10 * 60_000;
const PENDING_MAX = 10_000;
const STATE_MAX = 2048;

/** An authorization request that passed validation and waits for login and consent. Kept server-side, so the form cannot alter it. */
export interface PendingRequest {
  id: string;
  client: { id: string; name: string };
  redirectUri: string;
  redirectUriGiven: boolean;
  scopes: OAuthScope[];
  /** Echoed exactly as received (absent → not echoed). */
  state: string | null;
  codeChallenge: string | null;
  /** The SHA-256 of the session that may complete it (moves with the session on login). */
  sessionHash: Buffer;
  expiresAt: number;
}

/** An answer of the token or revocation endpoint: JSON body (or none), status and headers. */
export interface EndpointResult {
  status: number;
  body: Record<string, unknown> | null;
  headers?: Record<string, string>;
}

/** What validating GET /oauth/authorize decided (RFC 6749 §4.1.2.1). */
export type AuthorizeCheck =
  /** Client or redirect URI unusable: tell the user, never redirect. */
  | { kind: 'fatal'; description: string }
  /** Anything else wrong: redirect to the client with `error` (and `state`, `iss`). */
  | { kind: 'redirect'; location: string }
  | { kind: 'ok'; request: Omit<PendingRequest, 'id' | 'sessionHash' | 'expiresAt'> };

const oauthError = (status: number, error: string, description: string, headers?: Record<string, string>): EndpointResult => ({
  status,
  body: { error, error_description: description },
  ...(headers ? { headers } : {}),
});

export class AuthorizationServer {
  private readonly pending = new Map<string, PendingRequest>();

  constructor(
    private readonly d: {
      db: Database;
      repo: OAuthRepo;
      accounts: AccountsRepo;
      tokens: AccessTokens;
      /** `{auth_url}`: the issuer. */
      issuer: () => string;
      now: () => number;
    },
  ) {}

  /** RFC 8414 metadata. */
  metadata(): Record<string, unknown> {
    const iss = this.d.issuer();
    const auth = ['client_secret_basic', 'client_secret_post', 'none'];
    return {
      issuer: iss,
      authorization_endpoint: `${iss}/oauth/authorize`,
      token_endpoint: `${iss}/oauth/token`,
      revocation_endpoint: `${iss}/oauth/revoke`,
      jwks_uri: `${iss}/.well-known/jwks.json`,
      scopes_supported: Object.keys(OAUTH_SCOPES),
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: auth,
      revocation_endpoint_auth_methods_supported: auth,
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
    };
  }

  /** Validates the query of GET /oauth/authorize. */
  checkAuthorize(q: URLSearchParams): AuthorizeCheck {
    const one = (k: string) => (q.getAll(k).length > 1 ? undefined : q.get(k));
    const clientId = one('client_id');
    if (!clientId) return { kind: 'fatal', description: 'The request names no application (client_id is missing or repeated).' };
    const client = this.d.repo.client(clientId);
    if (!client) return { kind: 'fatal', description: 'The application (client_id) is not registered.' };
    const registered = JSON.parse(client.redirect_uris) as string[];
    const given = one('redirect_uri');
    if (given === undefined) return { kind: 'fatal', description: 'redirect_uri is repeated.' };
    let redirectUri: string;
    if (given !== null) {
      if (!registered.includes(given)) return { kind: 'fatal', description: 'redirect_uri is not one the application registered (they must match exactly).' };
      redirectUri = given;
    } else {
      if (registered.length !== 1) return { kind: 'fatal', description: 'redirect_uri is required: the application registered several.' };
      redirectUri = registered[0]!;
    }
    const state = q.getAll('state').length === 1 ? q.get('state') : null;
    const fail = (error: string, description: string) => ({ kind: 'redirect' as const, location: this.redirectWith(redirectUri, { error, error_description: description }, state) });
    for (const k of new Set(q.keys())) if (q.getAll(k).length > 1) return fail('invalid_request', `The parameter ${k} is repeated.`);
    if (state !== null && state.length > STATE_MAX) return fail('invalid_request', `state is longer than ${STATE_MAX} characters.`);
    const responseType = q.get('response_type');
    if (!responseType) return fail('invalid_request', 'response_type is missing.');
    if (responseType !== 'code') return fail('unsupported_response_type', 'Only response_type=code is supported.');
    const scopeRaw = q.get('scope');
    if (!scopeRaw || !scopeRaw.trim()) return fail('invalid_scope', 'scope is required: name the scopes the application needs.');
    const { scopes, unknown } = parseScope(scopeRaw);
    if (unknown.length) return fail('invalid_scope', `Unknown scope: ${unknown.join(' ')}.`);
    const challenge = q.get('code_challenge');
    const method = q.get('code_challenge_method');
    if (challenge !== null || method !== null) {
      if (method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256 (plain is not supported).');
      if (!challenge || !/^[A-Za-z0-9_-]{43}$/.test(challenge)) return fail('invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters).');
    }
    if (client.is_public && !challenge) return fail('invalid_request', 'PKCE is required for public clients: send code_challenge with code_challenge_method=S256.');
    return {
      kind: 'ok',
      request: { client: { id: client.id, name: client.name }, redirectUri, redirectUriGiven: given !== null, scopes, state, codeChallenge: challenge },
    };
  }

  /** Keeps a validated request for the login/consent forms; returns it with its id. */
  hold(r: Omit<PendingRequest, 'id' | 'sessionHash' | 'expiresAt'>, sessionHash: Buffer): PendingRequest {
    const now = this.d.now();
    if (this.pending.size >= PENDING_MAX) {
      for (const [k, p] of this.pending) if (p.expiresAt <= now) this.pending.delete(k);
      if (this.pending.size >= PENDING_MAX) this.pending.delete(this.pending.keys().next().value!);
    }
    const p: PendingRequest = { ...r, id: `areq_${randomBase62(32)}`, sessionHash, expiresAt: now + PENDING_TTL_MS };
    this.pending.set(p.id, p);
    return p;
  }

  /** The pending request `id` if it exists, is not expired and belongs to the session `sessionHash`. */
  held(id: string, sessionHash: Buffer): PendingRequest | null {
    const p = this.pending.get(id);
    if (!p) return null;
    if (p.expiresAt <= this.d.now()) {
      this.pending.delete(id);
      return null;
    }
    return p.sessionHash.length === sessionHash.length && timingSafeEqual(p.sessionHash, sessionHash) ? p : null;
  }

  /** Ends a pending request with the owner's decision; returns where to send the browser (RFC 6749 §4.1.2, RFC 9207). */
  decide(p: PendingRequest, accountId: string, allow: boolean): string {
    this.pending.delete(p.id);
    if (!allow) return this.redirectWith(p.redirectUri, { error: 'access_denied', error_description: 'The account owner denied the request.' }, p.state);
    const code = randomBase62(43);
    const now = this.d.now();
    this.d.repo.insertCode({
      code_hash: hashToken(code),
      grant_id: newId('grant'),
      client_id: p.client.id,
      account_id: accountId,
      redirect_uri: p.redirectUri,
      redirect_uri_given: p.redirectUriGiven ? 1 : 0,
      scope: p.scopes.join(' '),
      code_challenge: p.codeChallenge,
      created_at: now,
      expires_at: now + CODE_TTL_MS,
    });
    this.d.repo.purgeCodes(now - 24 * 3600 * 1000);
    return this.redirectWith(p.redirectUri, { code }, p.state);
  }

  /** `redirectUri` + `params` + `state` (when there was one) + `iss`, keeping the registered URI's own query as it is. */
  private redirectWith(redirectUri: string, params: Record<string, string>, state: string | null): string {
    const q = new URLSearchParams(params);
    if (state !== null) q.set('state', state);
    q.set('iss', this.d.issuer());
    return `${redirectUri}${redirectUri.includes('?') ? '&' : '?'}${q.toString()}`;
  }

  /** POST /oauth/token (RFC 6749 §4.1.3, §6; RFC 7636 §4.6). */
  async token(body: URLSearchParams, authorization: string): Promise<EndpointResult> {
    const dup = repeated(body);
    if (dup) return oauthError(400, 'invalid_request', `The parameter ${dup} is repeated.`);
    const c = this.authenticateClient(body, authorization);
    if ('error' in c) return c.error;
    const client = c.client;
    const grantType = body.get('grant_type');
    if (!grantType) return oauthError(400, 'invalid_request', 'grant_type is missing.');
    if (grantType === 'authorization_code') return this.codeGrant(client, body);
    if (grantType === 'refresh_token') return this.refreshGrant(client, body);
    return oauthError(400, 'unsupported_grant_type', 'Supported grant types: authorization_code, refresh_token.');
  }

  private async codeGrant(client: OAuthClientRow, body: URLSearchParams): Promise<EndpointResult> {
    const code = body.get('code');
    if (!code) return oauthError(400, 'invalid_request', 'code is missing.');
    const hash = hashToken(code);
    const row = this.d.repo.code(hash);
    const now = this.d.now();
    const bad = (why: string) => oauthError(400, 'invalid_grant', why);
    if (!row || row.client_id !== client.id) return bad('The authorization code is invalid or was issued to another client.');
    if (row.used_at !== null) {
      this.d.repo.revokeGrant(row.grant_id, now, 'code_reuse');
      return bad('The authorization code was already used; every token issued from it is now revoked.');
    }
    if (row.expires_at <= now) return bad('The authorization code expired (codes live 60 seconds).');
    const redirectUri = body.get('redirect_uri');
    if (row.redirect_uri_given ? redirectUri !== row.redirect_uri : redirectUri !== null && redirectUri !== row.redirect_uri) {
      return bad('redirect_uri does not match the one of the authorization request.');
    }
    const verifier = body.get('code_verifier');
    if (row.code_challenge) {
      if (!verifier) return bad('code_verifier is required: the authorization request used PKCE.');
      if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return bad('code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~].');
      const want = Buffer.from(row.code_challenge);
      const got = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
      if (want.length !== got.length || !timingSafeEqual(want, got)) return bad('code_verifier does not match the code_challenge.');
    } else if (verifier !== null) {
      return bad('code_verifier was sent but the authorization request had no code_challenge.');
    }
    if (!this.d.accounts.get(row.account_id)) return bad('The account no longer exists.');
    const issued = this.d.db.transaction(() => {
      if (!this.d.repo.useCode(hash, now)) return false; // a concurrent exchange won
      this.d.repo.insertGrant({ id: row.grant_id, client_id: client.id, account_id: row.account_id, scope: row.scope, created_at: now });
      return true;
    })();
    if (!issued) {
      this.d.repo.revokeGrant(row.grant_id, now, 'code_reuse');
      return bad('The authorization code was already used; every token issued from it is now revoked.');
    }
    return this.issue(row.grant_id, client.id, row.account_id, row.scope);
  }

  private async refreshGrant(client: OAuthClientRow, body: URLSearchParams): Promise<EndpointResult> {
    const token = body.get('refresh_token');
    if (!token) return oauthError(400, 'invalid_request', 'refresh_token is missing.');
    const bad = (why: string) => oauthError(400, 'invalid_grant', why);
    const hash = hashToken(token);
    const row = token.startsWith('rt_') ? this.d.repo.refreshToken(hash) : undefined;
    if (!row) return bad('The refresh token is invalid.');
    const grant = this.d.repo.grant(row.grant_id);
    if (!grant || grant.client_id !== client.id) return bad('The refresh token is invalid or was issued to another client.');
    if (grant.revoked_at !== null) return bad('The refresh token was revoked.');
    const now = this.d.now();
    if (row.used_at !== null) {
      this.d.repo.revokeGrant(grant.id, now, 'refresh_token_reuse');
      return bad('The refresh token was already used; the whole token family is now revoked.');
    }
    if (row.expires_at <= now) return bad('The refresh token expired.');
    let scope = grant.scope;
    const asked = body.get('scope');
    if (asked !== null) {
      const { scopes, unknown } = parseScope(asked);
      const granted = new Set(grant.scope.split(' '));
      if (unknown.length || scopes.length === 0 || scopes.some((s) => !granted.has(s))) {
        return oauthError(400, 'invalid_scope', 'The requested scope exceeds the scope originally granted.');
      }
      scope = scopes.join(' ');
    }
    if (!this.d.accounts.get(grant.account_id)) return bad('The account no longer exists.');
    if (!this.d.repo.useRefreshToken(hash, now)) {
      this.d.repo.revokeGrant(grant.id, now, 'refresh_token_reuse');
      return bad('The refresh token was already used; the whole token family is now revoked.');
    }
    return this.issue(grant.id, client.id, grant.account_id, scope);
  }

  /** A new refresh token in the grant's family and an access token with `scope`. */
  private async issue(grantId: string, clientId: string, accountId: string, scope: string): Promise<EndpointResult> {
    const now = this.d.now();
    const refresh = `rt_${randomBase62(43)}`;
    this.d.repo.insertRefreshToken({ token_hash: hashToken(refresh), grant_id: grantId, created_at: now, expires_at: now + REFRESH_TTL_MS });
    const access = await this.d.tokens.sign({ accountId, clientId, scope, grantId });
    return {
      status: 200,
      body: { access_token: access.token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_S, refresh_token: refresh, scope },
    };
  }

  /** POST /oauth/revoke (RFC 7009 §2). Answers 200 for unknown or foreign tokens (§2.2), revoking nothing then. */
  revoke(body: URLSearchParams, authorization: string): EndpointResult {
    const dup = repeated(body);
    if (dup) return oauthError(400, 'invalid_request', `The parameter ${dup} is repeated.`);
    const c = this.authenticateClient(body, authorization);
    if ('error' in c) return c.error;
    const token = body.get('token');
    if (!token) return oauthError(400, 'invalid_request', 'token is missing.');
    const now = this.d.now();
    if (token.startsWith('rt_')) {
      // A refresh token: revoke its grant, so the access tokens of the family die too (§2.1).
      const row = this.d.repo.refreshToken(hashToken(token));
      const grant = row && this.d.repo.grant(row.grant_id);
      if (grant && grant.client_id === c.client.id) this.d.repo.revokeGrant(grant.id, now, 'revoked');
    } else {
      const r = this.d.tokens.verify(token, true);
      if (r.ok && r.claims.client_id === c.client.id) {
        this.d.repo.revokeJti(r.claims.jti, r.claims.exp * 1000);
        this.d.repo.purgeJtis(now);
      }
    }
    return { status: 200, body: null };
  }

  /**
   * Client authentication (RFC 6749 §2.3.1): HTTP Basic with the form-urlencoded id and secret, or
   * `client_id`/`client_secret` in the body — not both; public clients send `client_id` only.
   */
  private authenticateClient(body: URLSearchParams, authorization: string): { client: OAuthClientRow } | { error: EndpointResult } {
    let id: string | null = body.get('client_id');
    let secret: string | null = body.get('client_secret');
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
    const challenge = { 'WWW-Authenticate': 'Basic realm="skylark", charset="UTF-8"' };
    if (authorization && !basic) return { error: oauthError(401, 'invalid_client', 'Only HTTP Basic client authentication is accepted in the Authorization header.', challenge) };
    if (basic) {
      if (secret !== null) return { error: oauthError(400, 'invalid_request', 'Use one client authentication method: HTTP Basic or client_secret in the body, not both.') };
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const i = decoded.indexOf(':');
      if (i < 0) return { error: oauthError(401, 'invalid_client', 'Malformed HTTP Basic credentials.', challenge) };
      let bid: string;
      try {
        bid = decodeURIComponent(decoded.slice(0, i).replace(/\+/g, ' '));
        secret = decodeURIComponent(decoded.slice(i + 1).replace(/\+/g, ' '));
      } catch {
        return { error: oauthError(401, 'invalid_client', 'Malformed HTTP Basic credentials.', challenge) };
      }
      if (id !== null && id !== bid) return { error: oauthError(400, 'invalid_request', 'client_id in the body differs from the HTTP Basic one.') };
      id = bid;
    }
    const fail = () => ({ error: oauthError(401, 'invalid_client', 'Client authentication failed.', basic ? challenge : undefined) });
    if (!id) return fail();
    const client = this.d.repo.client(id);
    if (!client) return fail();
    if (client.is_public) {
      if (secret) return fail();
      return { client };
    }
    if (!secret || !client.secret_hash || !tokenMatches(secret, client.secret_hash)) return fail();
    return { client };
  }
}

/** The first parameter given more than once (RFC 6749 §3.1, §3.2), or null. */
function repeated(p: URLSearchParams): string | null {
  for (const k of new Set(p.keys())) if (p.getAll(k).length > 1) return k;
  return null;
}
