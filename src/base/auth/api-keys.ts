/**
 * API keys (spec "API keys", docs/behaviour.md §7): `svc_sk_` secret keys with full access, `svc_pk_`
 * publishable keys limited to reads of streams/podcasts/episodes/stats and listener-token creation.
 * The legacy `svc_pub_` prefix was retired at the end of December 2025.
 */
import { ApiError } from '../errors/errors.js';
import { randomBase62 } from '../ids.js';
import type { AccountsRepo, ApiKeyRow } from '../db/accounts-repo.js';
import { hashToken } from './secrets.js';

export type KeyType = 'secret' | 'publishable';

/** Scopes of the spec's table. */
export type Scope =
  | 'streams:read'
  | 'streams:write'
  | 'podcasts:read'
  | 'podcasts:write'
  | 'webhooks:read'
  | 'webhooks:write'
  | 'account:read'
  | 'listener_tokens:write';

/** Who a request acts for, once authenticated. */
export interface Principal {
  accountId: string;
  /** An API key of either type, or an OAuth 2.0 access token (a JWT) an application holds for the account. */
  kind: 'secret_key' | 'publishable_key' | 'oauth_token';
  /** `key_…` for API keys; the token's `jti` for OAuth tokens. */
  keyId: string;
  /** OAuth tokens only: the granted scopes. */
  scopes?: ReadonlySet<Scope>;
  /** OAuth tokens only: the application (`client_id`). */
  clientId?: string;
  /** OAuth tokens only: the grant (token family, `gid`) the token belongs to; the same across refreshes. */
  grantId?: string;
}

/**
 * The credential `p` acted with, as a stable string: `<account>/<key id>` for an API key,
 * `<account>/<grant id>` for an OAuth token (every access token of one grant shares it). Idempotency
 * keys are scoped by it (docs/behaviour.md §13), so one principal never replays another's answer.
 */
export function credentialOf(p: Principal): string {
  return `${p.accountId}/${p.kind === 'oauth_token' ? (p.grantId ?? p.keyId) : p.keyId}`;
}

const PUBLISHABLE_SCOPES = new Set<Scope>(['streams:read', 'podcasts:read', 'listener_tokens:write']);

/**
 * Whether `p` may act with `scope`: secret keys always; publishable keys for reads of streams and
 * podcasts and listener-token creation (docs/behaviour.md §7); OAuth tokens for their granted scopes, where
 * `streams:read` also covers `listener_tokens:write` (a listener token only lets someone listen).
 */
export function allows(p: Principal, scope: Scope): boolean {
  if (p.kind === 'secret_key') return true;
  if (p.kind === 'publishable_key') return PUBLISHABLE_SCOPES.has(scope);
  const granted = p.scopes;
  if (!granted) return false;
  return granted.has(scope) || (scope === 'listener_tokens:write' && granted.has('streams:read'));
}

/** 403 insufficient_scope unless `p` may act with `scope`. @throws ApiError */
export function requireScope(p: Principal, scope: Scope): void {
  if (!allows(p, scope)) {
    const who = p.kind === 'oauth_token' ? 'access token' : 'key';
    throw new ApiError('insufficient_scope', `This ${who} lacks the '${scope}' permission required for this request.`, {
      headers: { 'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"` },
    });
  }
}

/** Makes a new key string of `type` (`svc_sk_…`/`svc_pk_…`, 32 random base62 characters). */
export function generateApiKey(type: KeyType): string {
  return `${type === 'secret' ? 'svc_sk_' : 'svc_pk_'}${randomBase62(32)}`;
}

/** The row fields describing a new key (hash, prefix and last 4 characters; never the key). */
export function apiKeyRecord(id: string, accountId: string, type: KeyType, key: string, now: number): Omit<ApiKeyRow, 'revoked_at'> {
  return { id, account_id: accountId, type, key_hash: hashToken(key), prefix: key.slice(0, 7), last4: key.slice(-4), created_at: now };
}

/** A 401 with `code` and the RFC 6750 §3 `WWW-Authenticate` challenge (`error="invalid_token"` unless the token is missing). */
export const unauthorized = (code: 'missing_token' | 'invalid_token' | 'token_expired' | 'key_revoked', message: string) =>
  new ApiError(code, message, {
    headers: { 'WWW-Authenticate': code === 'missing_token' ? 'Bearer' : `Bearer error="invalid_token", error_description="${message.replace(/"/g, "'")}"` },
  });

/**
 * Authenticates an `Authorization` header value.
 * @throws ApiError 401 `missing_token` | `invalid_token` | `key_revoked`
 */
export function authenticate(header: string, repo: AccountsRepo): Principal {
  if (!header) throw unauthorized('missing_token', 'No API key provided. Send it as "Authorization: Bearer <key>".');
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!m) throw unauthorized('invalid_token', 'The Authorization header must be "Bearer <token>".');
  const token = m[1]!;
  if (token.startsWith('svc_pub_')) {
    throw unauthorized('invalid_token', "Publishable keys with the legacy 'svc_pub_' prefix were retired at the end of December 2025; create an 'svc_pk_' key in the dashboard.");
  }
  if (!token.startsWith('svc_sk_') && !token.startsWith('svc_pk_')) throw unauthorized('invalid_token', 'The token is malformed or its signature is invalid.');
  const row = repo.apiKeyByHash(hashToken(token));
  if (!row) throw unauthorized('invalid_token', 'Invalid API key.');
  if (row.revoked_at !== null) throw unauthorized('key_revoked', 'This API key was revoked or rolled; use its replacement.');
  return { accountId: row.account_id, kind: row.type === 'secret' ? 'secret_key' : 'publishable_key', keyId: row.id };
}
