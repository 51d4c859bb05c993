/**
 * Prepared statements of the OAuth 2.0 authorization server (migration 004): clients, grants (one
 * per authorization code: the token family), codes, refresh tokens, revoked access-token ids and
 * JWT signing keys. Secrets are stored as SHA-256 hashes; times are Unix milliseconds.
 */
import type { Database } from './database.js';

export interface OAuthClientRow {
  id: string;
  name: string;
  secret_hash: Buffer | null;
  redirect_uris: string;
  is_public: 0 | 1;
  account_id: string | null;
  created_at: number;
  deleted_at: number | null;
}

export interface OAuthGrantRow {
  id: string;
  client_id: string;
  account_id: string;
  scope: string;
  created_at: number;
  revoked_at: number | null;
  revoked_reason: string | null;
}

export interface OAuthCodeRow {
  code_hash: Buffer;
  grant_id: string;
  client_id: string;
  account_id: string;
  redirect_uri: string;
  redirect_uri_given: 0 | 1;
  scope: string;
  code_challenge: string | null;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

export interface RefreshTokenRow {
  token_hash: Buffer;
  grant_id: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: string;
  private_enc: Buffer;
  created_at: number;
  retired_at: number | null;
}

/** What the resource server checks per request for a JWT: its grant's revocation and its own. */
export interface TokenLiveness {
  grantRevoked: boolean;
  jtiRevoked: boolean;
}

export class OAuthRepo {
  private readonly s;

  constructor(readonly db: Database) {
    this.s = {
      insertClient: db.prepare(
        'INSERT INTO oauth_clients (id, name, secret_hash, redirect_uris, is_public, account_id, created_at) VALUES (@id, @name, @secret_hash, @redirect_uris, @is_public, @account_id, @created_at)',
      ),
      clientById: db.prepare('SELECT * FROM oauth_clients WHERE id = ? AND deleted_at IS NULL'),
      clientsOf: db.prepare('SELECT * FROM oauth_clients WHERE account_id = ? AND deleted_at IS NULL ORDER BY seq DESC LIMIT ?'),
      insertGrant: db.prepare('INSERT INTO oauth_grants (id, client_id, account_id, scope, created_at) VALUES (@id, @client_id, @account_id, @scope, @created_at)'),
      grantById: db.prepare('SELECT * FROM oauth_grants WHERE id = ?'),
      revokeGrant: db.prepare('UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND revoked_at IS NULL'),
      liveness: db.prepare(
        'SELECT (SELECT revoked_at FROM oauth_grants WHERE id = ?) AS g, (SELECT 1 FROM oauth_grants WHERE id = ?) AS e, (SELECT 1 FROM oauth_revoked_jtis WHERE jti = ?) AS j',
      ),
      insertCode: db.prepare(
        'INSERT INTO oauth_codes (code_hash, grant_id, client_id, account_id, redirect_uri, redirect_uri_given, scope, code_challenge, created_at, expires_at) VALUES (@code_hash, @grant_id, @client_id, @account_id, @redirect_uri, @redirect_uri_given, @scope, @code_challenge, @created_at, @expires_at)',
      ),
      codeByHash: db.prepare('SELECT * FROM oauth_codes WHERE code_hash = ?'),
      useCode: db.prepare('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL'),
      purgeCodes: db.prepare('DELETE FROM oauth_codes WHERE expires_at < ?'),
      insertRefresh: db.prepare('INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at) VALUES (@token_hash, @grant_id, @created_at, @expires_at)'),
      refreshByHash: db.prepare('SELECT * FROM oauth_refresh_tokens WHERE token_hash = ?'),
      useRefresh: db.prepare('UPDATE oauth_refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL'),
      revokeJti: db.prepare('INSERT OR IGNORE INTO oauth_revoked_jtis (jti, expires_at) VALUES (?, ?)'),
      purgeJtis: db.prepare('DELETE FROM oauth_revoked_jtis WHERE expires_at < ?'),
      insertKey: db.prepare('INSERT INTO signing_keys (kid, alg, public_jwk, private_enc, created_at) VALUES (@kid, @alg, @public_jwk, @private_enc, @created_at)'),
      activeKey: db.prepare('SELECT * FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 1'),
      publishedKeys: db.prepare('SELECT kid, alg, public_jwk FROM signing_keys ORDER BY created_at DESC'),
      keyByKid: db.prepare('SELECT kid, alg, public_jwk FROM signing_keys WHERE kid = ?'),
      stamp: db.prepare('SELECT total_changes() * 4294967296 + (SELECT data_version FROM pragma_data_version)').pluck(),
    };
  }

  /**
   * A number that changes whenever the database may have changed: rows written through this
   * connection (`total_changes()`) or commits by any other connection, e.g. the CLI rolling a key
   * (`PRAGMA data_version`). One cheap query; lets the Guard cache authentication results safely.
   */
  changeStamp(): number {
    return this.s.stamp.get() as number;
  }

  insertClient(c: Omit<OAuthClientRow, 'deleted_at'>): void {
    this.s.insertClient.run(c);
  }
  /** A client that is not deleted, or undefined. */
  client(id: string): OAuthClientRow | undefined {
    return this.s.clientById.get(id) as OAuthClientRow | undefined;
  }
  /** The clients registered for `accountId` (the dashboard's), newest first, at most `limit`. */
  clientsOf(accountId: string, limit: number): OAuthClientRow[] {
    return this.s.clientsOf.all(accountId, limit) as OAuthClientRow[];
  }

  insertGrant(g: Omit<OAuthGrantRow, 'revoked_at' | 'revoked_reason'>): void {
    this.s.insertGrant.run(g);
  }
  grant(id: string): OAuthGrantRow | undefined {
    return this.s.grantById.get(id) as OAuthGrantRow | undefined;
  }
  /** Revokes a grant (every token of its family); false when it was already revoked or never existed. */
  revokeGrant(id: string, at: number, reason: string): boolean {
    return this.s.revokeGrant.run(at, reason, id).changes === 1;
  }
  /** One indexed query: whether the grant `grantId` is revoked or missing, and whether `jti` was revoked. */
  liveness(grantId: string, jti: string): TokenLiveness {
    const r = this.s.liveness.get(grantId, grantId, jti) as { g: number | null; e: number | null; j: number | null };
    return { grantRevoked: r.e === null || r.g !== null, jtiRevoked: r.j !== null };
  }

  insertCode(c: Omit<OAuthCodeRow, 'used_at'>): void {
    this.s.insertCode.run(c);
  }
  code(hash: Buffer): OAuthCodeRow | undefined {
    return this.s.codeByHash.get(hash) as OAuthCodeRow | undefined;
  }
  /** Marks a code used; false when it already was (a replay). Atomic. */
  useCode(hash: Buffer, at: number): boolean {
    return this.s.useCode.run(at, hash).changes === 1;
  }
  /** Deletes codes that expired before `before` (ms). */
  purgeCodes(before: number): void {
    this.s.purgeCodes.run(before);
  }

  insertRefreshToken(t: Omit<RefreshTokenRow, 'used_at'>): void {
    this.s.insertRefresh.run(t);
  }
  refreshToken(hash: Buffer): RefreshTokenRow | undefined {
    return this.s.refreshByHash.get(hash) as RefreshTokenRow | undefined;
  }
  /** Marks a refresh token rotated; false when it already was (a reuse). Atomic. */
  useRefreshToken(hash: Buffer, at: number): boolean {
    return this.s.useRefresh.run(at, hash).changes === 1;
  }

  /** Denylists one access token id until `expiresAt` (ms), after which the token is dead anyway. */
  revokeJti(jti: string, expiresAt: number): void {
    this.s.revokeJti.run(jti, expiresAt);
  }
  purgeJtis(before: number): void {
    this.s.purgeJtis.run(before);
  }

  insertSigningKey(k: Omit<SigningKeyRow, 'retired_at'>): void {
    this.s.insertKey.run(k);
  }
  /** The newest signing key that is not retired. */
  activeSigningKey(): SigningKeyRow | undefined {
    return this.s.activeKey.get() as SigningKeyRow | undefined;
  }
  /** Every key's public half, newest first (the JWKS). */
  publicKeys(): Array<Pick<SigningKeyRow, 'kid' | 'alg' | 'public_jwk'>> {
    return this.s.publishedKeys.all() as Array<Pick<SigningKeyRow, 'kid' | 'alg' | 'public_jwk'>>;
  }
  publicKey(kid: string): Pick<SigningKeyRow, 'kid' | 'alg' | 'public_jwk'> | undefined {
    return this.s.keyByKid.get(kid) as Pick<SigningKeyRow, 'kid' | 'alg' | 'public_jwk'> | undefined;
  }
}
