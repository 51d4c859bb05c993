/**
 * OAuth access tokens as JWTs (RFC 9068 profile; RFC 7519). Signed by jose with RS256 (the algorithm
 * RFC 9068 §2.1 makes mandatory) under a key kept in SQLite (`signing_keys`, private half
 * AES-256-GCM-encrypted under the node secret), so restarts keep issued tokens valid. The `kid` in
 * every token header names a key of the published JWKS.
 *
 * Verification runs on every API request and must be synchronous (the route guard runs before the
 * body is read), so it uses node:crypto directly: header `alg` must be RS256 and `typ` `at+jwt`,
 * the key is looked up by `kid` (never taken from the token), then `iss`, `aud`, `exp` are checked.
 * Successfully verified tokens are cached by their exact string (bounded), so a client re-using a
 * token pays one Map lookup and the `exp` check.
 */
import { createPublicKey, randomBytes, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import type { OAuthRepo } from '../db/oauth-repo.js';
import { decryptSecret, encryptSecret } from './secrets.js';

/** Access-token lifetime (seconds), docs/behaviour.md §9. */
export const ACCESS_TOKEN_TTL_S = 3600;
const ALG = 'RS256';
const TYP = 'at+jwt';
const CACHE_MAX = 10_000;

/** The claims Skylark puts in an access token (RFC 9068 §2.2), times in Unix seconds. */
export interface AccessTokenClaims {
  iss: string;
  /** The account the token acts for. */
  sub: string;
  /** `{base_url}`. */
  aud: string;
  client_id: string;
  /** Space-separated granted scopes. */
  scope: string;
  jti: string;
  /** The grant (token family) the token belongs to; revoking the grant kills the token. */
  gid: string;
  iat: number;
  exp: number;
}

/** Why a token did not verify. `expired` is only reported for a token whose signature and claims are otherwise good. */
export type VerifyResult = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: 'malformed' | 'signature' | 'claims' | 'expired' };

/** Signs and verifies access tokens; publishes the JWKS. */
export class AccessTokens {
  private readonly verifyKeys = new Map<string, KeyObject | null>();
  private readonly cache = new Map<string, AccessTokenClaims>();
  private signer: { kid: string; key: Awaited<ReturnType<typeof importJWK>> } | null = null;

  /**
   * @param issuer `{auth_url}` (read per call: public URLs are known only once listening)
   * @param audience `{base_url}`
   * @param now clock in ms
   */
  constructor(
    private readonly repo: OAuthRepo,
    private readonly nodeSecret: Buffer,
    private readonly issuer: () => string,
    private readonly audience: () => string,
    private readonly now: () => number = Date.now,
  ) {}

  /** Makes sure a signing key exists (generating an RSA-2048 key on first start) and loads it. */
  async ensureKey(): Promise<void> {
    let row = this.repo.activeSigningKey();
    if (!row) {
      const { privateKey, publicKey } = await generateKeyPair(ALG, { modulusLength: 2048, extractable: true });
      const pub = await exportJWK(publicKey);
      const priv = await exportJWK(privateKey);
      const kid = await calculateJwkThumbprint(pub);
      const publicJwk: JWK = { ...pub, kid, alg: ALG, use: 'sig' };
      this.repo.insertSigningKey({
        kid,
        alg: ALG,
        public_jwk: JSON.stringify(publicJwk),
        private_enc: encryptSecret(this.nodeSecret, JSON.stringify(priv)),
        created_at: this.now(),
      });
      row = this.repo.activeSigningKey()!;
    }
    const priv = JSON.parse(decryptSecret(this.nodeSecret, row.private_enc)) as JWK;
    this.signer = { kid: row.kid, key: await importJWK(priv, row.alg) };
  }

  /**
   * Issues an access token living ACCESS_TOKEN_TTL_S seconds.
   * @throws Error when ensureKey() was not awaited first
   */
  async sign(t: { accountId: string; clientId: string; scope: string; grantId: string }): Promise<{ token: string; jti: string; expiresIn: number; exp: number }> {
    if (!this.signer) throw new Error('AccessTokens.ensureKey() was not called');
    const iat = Math.floor(this.now() / 1000);
    const exp = iat + ACCESS_TOKEN_TTL_S;
    const jti = randomBytes(16).toString('base64url');
    const token = await new SignJWT({ client_id: t.clientId, scope: t.scope, gid: t.grantId })
      .setProtectedHeader({ alg: ALG, kid: this.signer.kid, typ: TYP })
      .setIssuer(this.issuer())
      .setSubject(t.accountId)
      .setAudience(this.audience())
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(this.signer.key);
    return { token, jti, expiresIn: ACCESS_TOKEN_TTL_S, exp };
  }

  /** The JWKS document (RFC 7517 §5): every key's public half, newest first. */
  jwks(): { keys: JWK[] } {
    return { keys: this.repo.publicKeys().map((k) => JSON.parse(k.public_jwk) as JWK) };
  }

  /** Whether `token` looks like a JWS compact serialization (three base64url parts). */
  static looksLikeJwt(token: string): boolean {
    return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
  }

  /**
   * Verifies an access token synchronously. `ignoreExpiry` is for revocation (RFC 7009), where an
   * expired token is simply dead.
   */
  verify(token: string, ignoreExpiry = false): VerifyResult {
    let claims = this.cache.get(token);
    if (!claims) {
      const r = this.verifyUncached(token);
      if (!r.ok) return r;
      claims = r.claims;
      if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(token, claims);
    }
    if (!ignoreExpiry && Math.floor(this.now() / 1000) >= claims.exp) return { ok: false, reason: 'expired' };
    return { ok: true, claims };
  }

  private verifyUncached(token: string): VerifyResult {
    const parts = token.split('.');
    if (parts.length !== 3) return { ok: false, reason: 'malformed' };
    const header = parseJsonPart(parts[0]!);
    if (!header || header.alg !== ALG || header.typ !== TYP || typeof header.kid !== 'string' || 'crit' in header) return { ok: false, reason: 'malformed' };
    const key = this.publicKey(header.kid);
    if (!key) return { ok: false, reason: 'signature' };
    const sig = Buffer.from(parts[2]!, 'base64url');
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii');
    let good = false;
    try {
      good = cryptoVerify('sha256', signed, key, sig);
    } catch {
      good = false;
    }
    if (!good) return { ok: false, reason: 'signature' };
    const c = parseJsonPart(parts[1]!);
    if (
      !c ||
      c.iss !== this.issuer() ||
      c.aud !== this.audience() ||
      typeof c.sub !== 'string' ||
      typeof c.client_id !== 'string' ||
      typeof c.scope !== 'string' ||
      typeof c.jti !== 'string' ||
      typeof c.gid !== 'string' ||
      typeof c.iat !== 'number' ||
      typeof c.exp !== 'number'
    ) {
      return { ok: false, reason: 'claims' };
    }
    return { ok: true, claims: c as unknown as AccessTokenClaims };
  }

  /** The verification key of `kid` from SQLite (cached, including misses for a while). */
  private publicKey(kid: string): KeyObject | null {
    if (this.verifyKeys.has(kid)) return this.verifyKeys.get(kid)!;
    const row = this.repo.publicKey(kid);
    let key: KeyObject | null = null;
    if (row && row.alg === ALG) {
      try {
        key = createPublicKey({ key: JSON.parse(row.public_jwk) as import('node:crypto').JsonWebKey, format: 'jwk' });
      } catch {
        key = null;
      }
    }
    // Bound the cache (forged kids would grow it); a miss is re-read after a clear.
    if (this.verifyKeys.size > 1000) this.verifyKeys.clear();
    if (key) this.verifyKeys.set(kid, key);
    return key;
  }
}

function parseJsonPart(part: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
